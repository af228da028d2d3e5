//===- ArtifactSerializer.cpp - The planned artifact as a flatbuffer ------===//
//
// The second half of ArtifactWriter: writes what `plan` decided into the
// flatbuffer of runtime/schema/artifact.fbs (version 4), then the integrity
// trailer. Also derives the TrainConfig the runtime needs from `kiln.train`:
// grad_accum, clip, optimizer, every setting as one JSON object, and the
// vocabulary bound of the token data.
//
//===----------------------------------------------------------------------===//

#include "codegen/ArtifactWriter.h"

#include "ir/KilnOps.h"
#include "ir/StepFunction.h"
#include "runtime/schema/ArtifactChecksum.h"
#include "runtime/schema/ArtifactVersion.h"
#include "runtime/schema/artifact_generated.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace mlir;
namespace k = mlir::kiln;

namespace kiln {

namespace {

// Whether `value` is (a reshape view of, or a kiln.fusion block argument
// bound to) an argument of @step with
// kiln.role = "input": indices the data loader fills from the token file.
bool isDataInput(func::FuncOp func, Value value) {
  // Inside a kiln.fusion, a block argument stands for the fusion's operand.
  for (;;) {
    if (auto reshape = value.getDefiningOp<k::ReshapeOp>()) {
      value = reshape->getOperand(0);
      continue;
    }
    auto inner = dyn_cast<BlockArgument>(value);
    auto fusion = inner ? dyn_cast<k::FusionOp>(inner.getOwner()->getParentOp())
                        : k::FusionOp();
    if (!fusion)
      break;
    value = fusion.getInputs()[inner.getArgNumber()];
  }
  auto arg = dyn_cast<BlockArgument>(value);
  if (!arg || arg.getOwner()->getParentOp() != func.getOperation())
    return false;
  auto role =
      func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), k::kRoleAttrName);
  return role && role.getValue() == k::role::kInput;
}

// TrainConfig.vocab_size: the largest token id + 1 the step can index with
// data from the token file. Token ids index the table of a kiln.embedding
// (tokens) and the classes of a kiln.cross_entropy (targets); both come from
// the same file, so the bound is the smallest of those dimensions. 0 when no
// data input indexes anything (nothing for the runtime to check).
int64_t vocabularySize(func::FuncOp func) {
  int64_t vocab = 0;
  auto bound = [&](int64_t size) {
    vocab = vocab == 0 ? size : std::min(vocab, size);
  };
  func.walk([&](Operation *op) {
    if (auto embedding = dyn_cast<k::EmbeddingOp>(op)) {
      // table [V, D] gathered by indices [...]; a table padded by pad-dims
      // has its true V in kiln.true_shape.
      if (isDataInput(func, embedding.getIndices())) {
        Value table = embedding.getTable();
        int64_t rows = cast<RankedTensorType>(table.getType()).getDimSize(0);
        if (auto arg = dyn_cast<BlockArgument>(table))
          if (auto trueShape = func.getArgAttrOfType<DenseI64ArrayAttr>(
                  arg.getArgNumber(), k::kTrueShapeAttrName))
            rows = trueShape[0];
        bound(rows);
      }
    } else if (auto crossEntropy = dyn_cast<k::CrossEntropyOp>(op)) {
      // logits [..., V], targets [...]; valid_classes when padded
      if (isDataInput(func, crossEntropy.getTargets())) {
        auto logits = cast<RankedTensorType>(crossEntropy.getLogits().getType());
        bound(crossEntropy.getValidClasses().value_or(
            logits.getDimSize(logits.getRank() - 1)));
      }
    }
  });
  return vocab;
}

// A JSON string literal.
std::string jsonString(StringRef text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += std::string("\\") + c;
    else if (static_cast<unsigned char>(c) < 0x20)
      out += llvm::formatv("\\u{0:x-4}", static_cast<unsigned>(c)).str();
    else
      out += c;
  }
  return out + "\"";
}

// TrainConfig.settings: every entry of kiln.train as one JSON object, keys
// sorted (the dictionary's order). f32 values are written as the shortest
// decimal that reads back as the same f32 (0.95, not 0.9499999881).
std::string settingsJson(DictionaryAttr train) {
  std::string json = "{";
  for (NamedAttribute entry : train) {
    Attribute value = entry.getValue();
    std::string text;
    if (auto b = dyn_cast<BoolAttr>(value))
      text = b.getValue() ? "true" : "false";
    else if (auto i = dyn_cast<IntegerAttr>(value))
      text = std::to_string(i.getInt());
    else if (auto f = dyn_cast<FloatAttr>(value))
      text = std::isfinite(f.getValueAsDouble())
                 ? k::formatShortestFloat(f.getValue())
                 : "null";
    else if (auto str = dyn_cast<StringAttr>(value))
      text = jsonString(str.getValue());
    else
      continue;
    if (json.size() > 1)
      json += ",";
    json += jsonString(entry.getName().getValue()) + ":" + text;
  }
  return json + "}";
}

} // namespace

FailureOr<std::string> ArtifactWriter::serialize() {
  auto train = module->getAttrOfType<DictionaryAttr>(k::kTrainAttrName);
  if (!train)
    return module.emitError() << "codegen needs the module attribute kiln.train";
  auto intField = [&](StringRef key) -> int64_t {
    auto attr = train.getAs<IntegerAttr>(key);
    return attr ? attr.getInt() : 0;
  };
  auto floatField = [&](StringRef key) -> float {
    auto attr = train.getAs<FloatAttr>(key);
    return attr ? static_cast<float>(attr.getValueAsDouble()) : 0.0f;
  };
  auto optimizer = train.getAs<StringAttr>("optimizer");
  int64_t gradAccum = std::max<int64_t>(1, intField("grad_accum"));
  auto model = module->getAttrOfType<StringAttr>(k::kModelAttrName);

  flatbuffers::FlatBufferBuilder fbb(1 << 16);
  // Each kernel's buffer signature, from its first call: a kernel is shared
  // only by calls with identical source, hence identical baked-in shapes.
  // (Every kernel takes at least its output, so an empty list is "not seen".)
  std::vector<std::vector<schema::KernelArg>> kernelArgs(kernelList.size());
  for (const PlannedProgram &program : programs)
    for (const PlannedStep &step : program.schedule) {
      // GEMMs and collectives call no kernel (their `kernel` is unset).
      if (step.gemm || step.collective || !kernelArgs[step.kernel].empty())
        continue;
      for (uint32_t b : step.buffers) {
        int64_t elements = 1;
        for (int64_t d : buffers[b].shape)
          elements *= d;
        kernelArgs[step.kernel].emplace_back(buffers[b].dtype, elements);
      }
    }
  std::vector<flatbuffers::Offset<schema::Kernel>> kernelOffsets;
  for (size_t i = 0; i < kernelList.size(); ++i) {
    const EmittedKernel &kernel = kernelList[i];
    // CUDA kernels carry their launch; CPU kernels leave it unset.
    schema::KernelLaunch launch(kernel.grid, kernel.block, kernel.sharedBytes);
    kernelOffsets.push_back(schema::CreateKernelDirect(
        fbb, kernel.entry.c_str(), kernel.source.c_str(),
        kernel.location.c_str(), kernel.ops.c_str(), &kernelArgs[i],
        kernel.elementwise, kernel.grid ? &launch : nullptr));
  }

  std::vector<flatbuffers::Offset<schema::Buffer>> bufferOffsets;
  for (size_t i = 0; i < buffers.size(); ++i) {
    const PlannedBuffer &b = buffers[i];
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
                                                 memory.offsets[i],
                                                 logicalShape, shardAxis,
                                                 wholeShape, b.shardDim));
  }

  std::vector<flatbuffers::Offset<schema::Program>> programOffsets;
  double flops = 0;
  for (const PlannedProgram &program : programs) {
    std::vector<flatbuffers::Offset<schema::Step>> stepOffsets;
    for (const PlannedStep &s : program.schedule) {
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
              c->dk, c->dv, c->workspace);
        op = schema::CreateKernelCallDirect(fbb, s.kernel, &s.buffers, cudnn)
                 .Union();
        kind = schema::Operation_KernelCall;
      }
      stepOffsets.push_back(
          schema::CreateStep(fbb, kind, op, fbb.CreateString(s.location)));
    }
    programOffsets.push_back(
        schema::CreateProgramDirect(fbb, program.name.c_str(), &stepOffsets));
    // One training step: grad_accum runs of "step" and one of "update".
    if (program.name == k::kStepFunctionName)
      flops += program.flops * static_cast<double>(gradAccum);
    else if (program.name == k::kUpdateFunctionName)
      flops += program.flops;
  }

  auto step = module.lookupSymbol<func::FuncOp>(k::kStepFunctionName);
  std::string optimizerName =
      optimizer ? optimizer.getValue().str() : std::string("adamw");
  std::string settings = settingsJson(train);
  auto trainConfig = schema::CreateTrainConfigDirect(
      fbb, intField("batch"), intField("seq"), optimizerName.c_str(),
      step ? vocabularySize(step) : 0, gradAccum, floatField("clip"),
      settings.c_str());
  std::string modelName = model ? model.getValue().str() : "";
  // The memory plan's summary: breakdown, and the tensors live at the peak.
  std::vector<flatbuffers::Offset<schema::PeakTensor>> peakTensors;
  for (uint32_t b : memory.peakTensors)
    peakTensors.push_back(schema::CreatePeakTensorDirect(
        fbb, b, memory.locations[b].c_str()));
  const MemoryBreakdown &bd = memory.breakdown;
  std::string peakProgram =
      memory.peakProgram >= 0 ? programs[memory.peakProgram].name : "";
  auto memoryPlan = schema::CreateMemoryPlanDirect(
      fbb, bd.parameters, bd.gradients, bd.optimizerState, bd.activations,
      bd.workspace, bd.other, bd.peak, peakProgram.c_str(), &peakTensors);
  std::vector<flatbuffers::Offset<flatbuffers::String>> archs;
  for (const std::string &arch : options.cudaArchs)
    if (options.target == "cuda")
      archs.push_back(fbb.CreateString(arch));
  // kiln.mesh: the processes kiln-run must be launched as.
  std::vector<flatbuffers::Offset<schema::MeshAxis>> meshAxes;
  if (auto mesh = module->getAttrOfType<DictionaryAttr>(k::kMeshAttrName))
    for (NamedAttribute axis : mesh)
      if (auto size = dyn_cast<IntegerAttr>(axis.getValue()))
        meshAxes.push_back(schema::CreateMeshAxisDirect(
            fbb, axis.getName().str().c_str(),
            static_cast<uint32_t>(size.getInt())));
  auto artifact = schema::CreateArtifactDirect(
      fbb, schema::kArtifactVersion, modelName.c_str(),
      options.target.c_str(), trainConfig, kernelPrelude(options.target),
      &kernelOffsets, &bufferOffsets, &programOffsets, flops,
      memory.arenaBytes, memoryPlan,
      options.target == "cuda" ? &archs : nullptr,
      meshAxes.empty() ? nullptr : &meshAxes);
  schema::FinishArtifactBuffer(fbb, artifact);
  // The flatbuffer, then the integrity trailer (runtime/schema/ArtifactChecksum.h).
  std::string bytes(reinterpret_cast<const char *>(fbb.GetBufferPointer()),
                    fbb.GetSize());
  return bytes + schema::checksumTrailer(fbb.GetBufferPointer(), fbb.GetSize());
}

} // namespace kiln
