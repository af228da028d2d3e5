//===- StepProgram.h - The planned training step, free of MLIR ------------===//
//
// What codegen lowers the training-step module to, and what the artifact
// serializes: the buffers every program shares or owns, one schedule per
// program (@step, @update, @eval), each entry a kernel call, a GEMM or a
// collective over buffer indices, the generated kernels, and the memory plan
// over all of it (MemoryPlan.h). Nothing here knows MLIR: the lowering
// (StepLowering.h) builds it from the module, the serializer
// (ArtifactSerializer.h) writes it, and a pass that must know the real peak
// (--kiln-remat) asks for it and reads the plan, the same numbers the
// artifact will carry.
//
//   StepProgram
//     buffers   [PlannedBuffer]  role, dtype, shape, init, alias, shard
//     kernels   [EmittedKernel]  source, entry, launch, scratch
//     programs  [PlannedProgram] name, flops,
//                 schedule [PlannedStep]  kernel | gemm | collective,
//                                         buffers read then written
//     memory    MemoryPlan       an offset per buffer, live ranges, peak
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_STEPPROGRAM_H
#define KILN_CODEGEN_STEPPROGRAM_H

#include "codegen/program/MemoryPlan.h"

#include "runtime/schema/CudnnWorkspace.h"
#include "runtime/schema/artifact_generated.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kiln {

// A scratch buffer of a kernel, passed after the group's outputs: Workspace
// (live during the call only, contents undefined on entry) or
// WorkspaceCounter (persistent, zero on allocation, left zero by the kernel).
// Planned like every other buffer, so peak memory counts it.
struct KernelScratch {
  std::string name;      // for the buffer's name ("attention_grad.cg")
  schema::DType dtype;   // element type of the Kernel arg
  int64_t elements = 0;  // element count
  schema::BufferRole role = schema::BufferRole_Workspace;
};

// One generated kernel, as stored in Artifact.kernels.
struct EmittedKernel {
  std::string entry;    // exported symbol (the target's kernel ABI)
  std::string source;   // C++ or CUDA source, compiled after the prelude
  std::string location; // "file:line:col" of the first op it implements
  std::string ops;      // the kiln ops it implements ("kiln.gelu")
  bool inPlace = false; // Kernel.in_place (see writesInPlace)
  // CUDA only (Kernel.launch; grid 0 on the CPU): blocks, threads per
  // block, dynamic shared bytes of every call.
  uint32_t grid = 0, block = 0, sharedBytes = 0;
  // Scratch arguments after the outputs: each call gets planned Workspace /
  // WorkspaceCounter buffers for them.
  std::vector<KernelScratch> scratch;
  // For kernel dumps only: whether cuDNN may replace it, and why not
  // (CudnnAttention.h; CUDA attention kernels).
  std::string note;
};

// The fields of a schema::CudnnAttention (buffer indices of the KernelCall):
// cuDNN's fused attention, which the CUDA runtime may run instead of the
// generated kernel (CudnnAttention.h decides when).
struct CudnnAttentionCall {
  bool backward = false;
  int64_t batch = 0, heads = 0, kvHeads = 0, qLen = 0, kvLen = 0;
  int64_t headDim = 0, valueDim = 0;
  float scale = 0;
  bool causal = false;
  int32_t kvLengths = -1; // buffer of the [B] i32 key lengths, -1: none
  uint32_t q = 0, k = 0, v = 0, out = 0, lse = 0;
  int32_t dout = -1, dq = -1, dk = -1, dv = -1; // backward only
  // The Workspace buffer reserved for cuDNN's workspace at this entry
  // (the lowering adds it), -1: none.
  int32_t workspace = -1;
  // The op's layout is bthd: q, k, v, out and the gradients are [B, T, H,
  // D] in memory.
  bool tokensMajor = false;

  schema::CudnnSdpaShape shape() const {
    return {backward, batch, heads, kvHeads, qLen, kvLen, headDim, valueDim};
  }
};

struct PlannedBuffer {
  std::string name;
  schema::BufferRole role = schema::BufferRole_Activation;
  schema::DType dtype = schema::DType_F32;
  std::vector<int64_t> shape;
  std::optional<std::pair<schema::InitKind, float>> init;
  std::vector<uint8_t> constantData;
  int32_t aliasOf = -1;
  float weightDecay = 0.0f; // parameters only
  std::vector<int64_t> logicalShape; // the true shape when pad-dims padded it
  std::string shardAxis; // a ZeRO shard over this mesh axis (kiln.shard_axis)
  std::vector<int64_t> wholeShape; // and the whole tensor's shape
  int64_t shardDim = -1; // tensor parallelism: the split dim (kiln.shard_dim)
};

struct PlannedGemm {
  uint32_t a, b, c;
  int64_t m, n, k, batch;
  bool transA, transB;
  int64_t strideA, strideB, strideC;
  bool tf32 = false; // fp32 operands may use TF32 tensor cores
  // kiln.fusion gemm: the epilogue and its bias / aux buffers (-1: none)
  schema::GemmEpilogue epilogue = schema::GemmEpilogue_None;
  int32_t bias = -1, aux = -1;
  bool biasWritten = false, auxWritten = false;
  bool accumulate = false; // C += product (kiln.matmul_accumulate)
};

// A collective: a kiln.all_reduce bucket (each buffer reduced in place),
// or a reduce-scatter / all-gather / local shard from buffers[0] into
// buffers[1].
struct PlannedCollective {
  schema::CollectiveKind kind = schema::CollectiveKind_AllReduce;
  schema::Reduction reduction = schema::Reduction_Sum;
  std::string axis, reason;
  bool overlap = false; // CollectiveCall.overlap (StepProgram::planOverlaps)
  int32_t overlapUntil = -1; // CollectiveCall.overlap_until
};

// One schedule entry: a GemmCall (`gemm`), a CollectiveCall (`collective`)
// or else a KernelCall of kernels[kernel] over `buffers`.
struct PlannedStep {
  std::optional<PlannedGemm> gemm;
  std::optional<PlannedCollective> collective;
  uint32_t kernel = 0;
  std::vector<uint32_t> buffers;
  size_t numInputs = 0; // buffers[0, numInputs) are read, the rest written
  std::string location;
  // KernelCall.cudnn_attention (CudnnAttention.h): CUDA attention ops
  // cuDNN's fused attention computes exactly.
  std::optional<CudnnAttentionCall> cudnnAttention;
};

struct PlannedProgram {
  std::string name;
  std::vector<PlannedStep> schedule;
  double flops = 0; // GEMM flops of one run
  // Runs in one training step: grad_accum for @step, 1 for @update, 0 for
  // @eval (Artifact.flops_per_step counts the step's runs).
  int64_t runsPerStep = 0;
};

// The buffers one entry touches, as liveness sees them: what it reads, then
// what it writes (all of them live at the entry).
struct StepAccess {
  std::vector<uint32_t> buffers;
  size_t numInputs = 0;
  bool inPlace = false; // a kernel that writes output element i after reading
                        // element i of its inputs (Kernel.in_place)
};

struct StepProgram {
  std::vector<PlannedBuffer> buffers;
  std::vector<PlannedProgram> programs;
  std::vector<EmittedKernel> kernels;
  MemoryPlan memory; // after planMemory()

  // The buffer that owns `index`'s storage (follows alias_of).
  uint32_t storageOf(uint32_t index) const;
  // Elements and bytes of a buffer's tensor.
  int64_t elementsOf(uint32_t index) const;
  int64_t bytesOf(uint32_t index) const;
  // Whether a buffer's storage lives only while one program runs
  // (activations and kernel scratch) rather than through every program.
  static bool isTransient(schema::BufferRole role);
  // Kernel calls read their inputs and write their outputs (and cuDNN's
  // workspace is live at its entry, like scratch); GEMMs read a, b (c when
  // accumulating, an epilogue's bias / aux input) and write c (an
  // epilogue's aux / bias output); collectives read and write their buffers.
  StepAccess accessOf(const PlannedStep &step) const;

  // CollectiveCall.overlap and overlap_until, per program: the all-reduces
  // whose buffers are not activations and that no later entry touches, and
  // the all-gathers of parameter slices with entries before their first
  // reader.
  void planOverlaps();
  // The arena: an offset per storage buffer (MemoryPlan.h's planArena),
  // into `memory`; its reports are formatMemorySummary / formatMemoryPlan.
  void planMemory();
};

} // namespace kiln

#endif // KILN_CODEGEN_STEPPROGRAM_H
