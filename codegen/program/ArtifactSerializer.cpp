//===- ArtifactSerializer.cpp - A StepProgram as a .kart flatbuffer -------===//
//
// Writes the step program into the flatbuffer of runtime/schema/artifact.fbs
// in its order (kernels, buffers with their arena offsets, programs and
// their steps, the memory plan's summary), with the header around it, then
// the integrity trailer. Each kernel's argument signature comes from its
// first call.
//
//===----------------------------------------------------------------------===//

#include "codegen/program/ArtifactSerializer.h"

#include "runtime/schema/ArtifactChecksum.h"
#include "runtime/schema/ArtifactVersion.h"
#include "runtime/schema/artifact_generated.h"

namespace kiln {

std::string serializeArtifact(const StepProgram &program,
                              const ArtifactHeader &header) {
  flatbuffers::FlatBufferBuilder fbb(1 << 16);
  // Each kernel's buffer signature, from its first call: a kernel is shared
  // only by calls with identical source, hence identical baked-in shapes.
  // (Every kernel takes at least its output, so an empty list is "not seen".)
  std::vector<std::vector<schema::KernelArg>> kernelArgs(program.kernels.size());
  for (const PlannedProgram &p : program.programs)
    for (const PlannedStep &step : p.schedule) {
      // GEMMs and collectives call no kernel (their `kernel` is unset).
      if (step.gemm || step.collective || !kernelArgs[step.kernel].empty())
        continue;
      for (uint32_t b : step.buffers) {
        int64_t elements = 1;
        for (int64_t d : program.buffers[b].shape)
          elements *= d;
        kernelArgs[step.kernel].emplace_back(program.buffers[b].dtype, elements);
      }
    }
  std::vector<flatbuffers::Offset<schema::Kernel>> kernelOffsets;
  for (size_t i = 0; i < program.kernels.size(); ++i) {
    const EmittedKernel &kernel = program.kernels[i];
    // CUDA kernels carry their launch; CPU kernels leave it unset.
    schema::KernelLaunch launch(kernel.grid, kernel.block, kernel.sharedBytes);
    kernelOffsets.push_back(schema::CreateKernelDirect(
        fbb, kernel.entry.c_str(), kernel.source.c_str(),
        kernel.location.c_str(), kernel.ops.c_str(), &kernelArgs[i],
        kernel.inPlace, kernel.grid ? &launch : nullptr));
  }

  std::vector<flatbuffers::Offset<schema::Buffer>> bufferOffsets;
  for (size_t i = 0; i < program.buffers.size(); ++i) {
    const PlannedBuffer &b = program.buffers[i];
    auto name = fbb.CreateString(b.name);
    auto shape = fbb.CreateVector(b.shape);
    flatbuffers::Offset<schema::Initializer> init = 0;
    if (b.init)
      init = schema::CreateInitializer(fbb, b.init->first, b.init->second);
    flatbuffers::Offset<flatbuffers::Vector<uint8_t>> data = 0;
    if (b.role == schema::BufferRole_Constant)
      data = fbb.CreateVector(b.constantData);
    flatbuffers::Offset<flatbuffers::Vector<int64_t>> logicalShape = 0;
    if (!b.logicalShape.empty())
      logicalShape = fbb.CreateVector(b.logicalShape);
    flatbuffers::Offset<flatbuffers::String> shardAxis = 0;
    flatbuffers::Offset<flatbuffers::Vector<int64_t>> wholeShape = 0;
    if (!b.shardAxis.empty()) {
      shardAxis = fbb.CreateString(b.shardAxis);
      wholeShape = fbb.CreateVector(b.wholeShape);
    }
    bufferOffsets.push_back(schema::CreateBuffer(fbb, name, b.role, b.dtype,
                                                 shape, init, data, b.aliasOf,
                                                 b.weightDecay,
                                                 program.memory.offsets[i],
                                                 logicalShape, shardAxis,
                                                 wholeShape, b.shardDim));
  }

  std::vector<flatbuffers::Offset<schema::Program>> programOffsets;
  double flops = 0;
  for (const PlannedProgram &p : program.programs) {
    std::vector<flatbuffers::Offset<schema::Step>> stepOffsets;
    for (const PlannedStep &s : p.schedule) {
      flatbuffers::Offset<void> op;
      schema::Operation kind;
      if (s.gemm) {
        const PlannedGemm &g = *s.gemm;
        op = schema::CreateGemmCall(fbb, g.a, g.b, g.c, g.m, g.n, g.k, g.batch,
                                    g.transA, g.transB, g.strideA, g.strideB,
                                    g.strideC, g.tf32, g.epilogue, g.bias,
                                    g.aux, g.accumulate)
                 .Union();
        kind = schema::Operation_GemmCall;
      } else if (const std::optional<PlannedCollective> &c = s.collective) {
        op = schema::CreateCollectiveCallDirect(fbb, c->reduction,
                                                c->axis.c_str(), &s.buffers,
                                                c->reason.c_str(), c->kind,
                                                c->overlap, c->overlapUntil)
                 .Union();
        kind = schema::Operation_CollectiveCall;
      } else {
        flatbuffers::Offset<schema::CudnnAttention> cudnn = 0;
        if (const std::optional<CudnnAttentionCall> &c = s.cudnnAttention)
          cudnn = schema::CreateCudnnAttention(
              fbb, c->backward, c->batch, c->heads, c->kvHeads, c->qLen,
              c->kvLen, c->headDim, c->valueDim, c->scale, c->causal,
              c->kvLengths, c->q, c->k, c->v, c->out, c->lse, c->dout, c->dq,
              c->dk, c->dv, c->workspace, c->tokensMajor);
        op = schema::CreateKernelCallDirect(fbb, s.kernel, &s.buffers, cudnn)
                 .Union();
        kind = schema::Operation_KernelCall;
      }
      stepOffsets.push_back(
          schema::CreateStep(fbb, kind, op, fbb.CreateString(s.location)));
    }
    programOffsets.push_back(
        schema::CreateProgramDirect(fbb, p.name.c_str(), &stepOffsets));
    // One training step: grad_accum runs of "step" and one of "update".
    flops += p.flops * static_cast<double>(p.runsPerStep);
  }

  auto trainConfig = schema::CreateTrainConfigDirect(
      fbb, header.batch, header.seq, header.optimizer.c_str(),
      header.vocabSize, header.gradAccum, header.clip,
      header.settingsJson.c_str());
  // The memory plan's summary: breakdown, and the tensors live at the peak.
  std::vector<flatbuffers::Offset<schema::PeakTensor>> peakTensors;
  for (uint32_t b : program.memory.peakTensors)
    peakTensors.push_back(schema::CreatePeakTensorDirect(
        fbb, b, program.memory.locations[b].c_str()));
  const MemoryBreakdown &bd = program.memory.breakdown;
  std::string peakProgram = program.memory.peakProgram >= 0
                                ? program.programs[program.memory.peakProgram].name
                                : "";
  auto memoryPlan = schema::CreateMemoryPlanDirect(
      fbb, bd.parameters, bd.gradients, bd.optimizerState, bd.activations,
      bd.workspace, bd.other, bd.peak, peakProgram.c_str(), &peakTensors);
  std::vector<flatbuffers::Offset<flatbuffers::String>> archs;
  for (const std::string &arch : header.cudaArchs)
    archs.push_back(fbb.CreateString(arch));
  std::vector<flatbuffers::Offset<schema::MeshAxis>> meshAxes;
  for (const auto &[axis, size] : header.mesh)
    meshAxes.push_back(schema::CreateMeshAxisDirect(fbb, axis.c_str(), size));
  auto artifact = schema::CreateArtifactDirect(
      fbb, schema::kArtifactVersion, header.model.c_str(),
      header.target.c_str(), trainConfig, header.prelude.c_str(),
      &kernelOffsets, &bufferOffsets, &programOffsets, flops,
      program.memory.arenaBytes, memoryPlan,
      header.target == "cuda" ? &archs : nullptr,
      meshAxes.empty() ? nullptr : &meshAxes);
  schema::FinishArtifactBuffer(fbb, artifact);
  // The flatbuffer, then the integrity trailer (runtime/schema/ArtifactChecksum.h).
  std::string bytes(reinterpret_cast<const char *>(fbb.GetBufferPointer()),
                    fbb.GetSize());
  return bytes + schema::checksumTrailer(fbb.GetBufferPointer(), fbb.GetSize());
}

} // namespace kiln
