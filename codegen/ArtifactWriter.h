//===- ArtifactWriter.h - Buffers, kernels and programs of the artifact ---===//
//
// Plans the artifact of a module with `@step`, `@update` and (optionally)
// `@eval`: one Program per function, in that order. Buffers with a role
// (parameters, inputs, gradients, the loss, optimizer state, lr, step,
// metrics, norms) are shared by all programs through their role and name;
// every other op result is an activation of its program. Reshape results are
// views (alias_of) of their input; the optimizer and accumulation ops write
// in place into their parameter / state / accumulator operands. One schedule
// step per op (GemmCall for kiln.matmul and kiln.fusion "gemm", KernelCall
// otherwise; one KernelCall per other kiln.fusion), in program order; kernels come from CpuKernelEmitter or
// CudaKernelEmitter, after the target. Then the static memory plan
// (MemoryPlan.h) over the final buffers and schedules. `serialize`
// (ArtifactSerializer.cpp) writes the flatbuffer.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_ARTIFACTWRITER_H
#define KILN_CODEGEN_ARTIFACTWRITER_H

#include "codegen/Codegen.h"
#include "codegen/CpuKernelEmitter.h"
#include "codegen/CudnnAttention.h"
#include "codegen/MemoryPlan.h"
#include "ir/KilnOps.h"

#include "runtime/schema/artifact_generated.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

// "file:line:col" of the innermost FileLineColLoc (the callee side of call
// sites), or "" when the location carries none.
std::string locationString(mlir::Location loc);

// Roles a program writes in place into the argument of the same role and
// name: parameters and optimizer state.
bool isInPlaceRole(llvm::StringRef role);

class ArtifactWriter {
public:
  explicit ArtifactWriter(mlir::ModuleOp module,
                          CodegenOptions options = {})
      : module(module), options(std::move(options)) {}

  // Plans buffers, kernels and the schedule. Emits diagnostics on failure.
  mlir::LogicalResult plan();

  // The flatbuffer of the planned artifact (after a successful `plan`);
  // needs the module attribute `kiln.train`.
  mlir::FailureOr<std::string> serialize();

  // The planned kernels, each once.
  const std::vector<EmittedKernel> &kernels() const { return kernelList; }

  // The memory plan's reports (after a successful `plan`).
  std::string memorySummary() const {
    return formatMemorySummary(memory, memoryBuffers, memoryPrograms);
  }
  int64_t arenaBytes() const { return memory.arenaBytes; }
  std::string memoryPlanText() const {
    return formatMemoryPlan(memory, memoryBuffers, memoryPrograms);
  }

private:
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
    // kiln.fusion "gemm": the epilogue and its bias / aux buffers (-1: none)
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
    bool overlap = false; // CollectiveCall.overlap (planOverlaps)
    int32_t overlapUntil = -1; // CollectiveCall.overlap_until
  };
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
  };

  mlir::LogicalResult planFunction(mlir::func::FuncOp func);
  // CollectiveCall.overlap and overlap_until: the all-reduces of `program`
  // whose buffers are not activations and that no later entry touches, and
  // its all-gathers of parameter slices with entries before their first
  // reader.
  void planOverlaps(PlannedProgram &program);
  // The arena: an offset per storage buffer (MemoryPlanner).
  void planMemory();
  mlir::LogicalResult planArguments(mlir::func::FuncOp func);
  // A ZeRO shard's axis and whole shape, from its kiln.shard_axis and
  // kiln.whole_shape (nothing when `attrs` has neither).
  static void markShard(PlannedBuffer &buffer, mlir::DictionaryAttr attrs);
  mlir::LogicalResult planOp(mlir::Operation *op);
  mlir::LogicalResult planMatmul(mlir::Operation *op);
  mlir::LogicalResult planMatmulAccumulate(mlir::Operation *op);
  // Appends the GemmCall `g` of `op` to the schedule (and its flops).
  void addGemmStep(mlir::Operation *op, const PlannedGemm &g);
  // The GemmCall of a kiln.matmul (or of kiln.matmul_accumulate's factors,
  // from operand 1) whose operands have buffers (C unset).
  mlir::FailureOr<PlannedGemm> gemmOf(mlir::Operation *op,
                                      unsigned firstOperand = 0);
  // A kiln.fusion "gemm" (GemmEpilogueWriter.cpp): one GemmCall with an
  // epilogue.
  mlir::LogicalResult planGemmFusion(mlir::kiln::FusionOp fusion);
  // True when kiln.train's precision is `precision`.
  bool precisionIs(llvm::StringRef precision) const;
  mlir::LogicalResult planKernel(mlir::Operation *op);
  // kiln.all_reduce: one CollectiveCall reducing its operands' buffers in
  // place (its results take their storage).
  mlir::LogicalResult planAllReduce(mlir::kiln::AllReduceOp op);
  // kiln.reduce_scatter, kiln.all_gather, kiln.local_shard: one
  // CollectiveCall from the operand's buffer into the result's. An
  // all-gather that becomes an updated parameter (ZeRO) writes straight
  // into the parameter's storage.
  mlir::LogicalResult planShardCollective(mlir::Operation *op);
  // The @update argument whose storage `gathered` is returned into (through
  // reshape views) as an in-place role (param), or null.
  mlir::Value inPlaceHome(mlir::Value gathered);
  mlir::LogicalResult planFusion(mlir::kiln::FusionOp fusion);
  mlir::LogicalResult planReturn(mlir::func::FuncOp func,
                                 mlir::func::ReturnOp ret);
  // Gives `value` (a result of the op being planned) the storage of
  // `operand`, which must not be read after `op` (in-place updates).
  mlir::LogicalResult planInPlace(mlir::Operation *op, mlir::Value result,
                                  mlir::Value operand);
  // Buffer.logical_shape of padded parameters, gradients and state.
  void planLogicalShapes();
  // A shared buffer for `role` and `name`, created on first use.
  mlir::FailureOr<uint32_t> sharedBuffer(mlir::Value value,
                                         mlir::Operation *where,
                                         llvm::StringRef role,
                                         llvm::StringRef name);

  // A new buffer for `value` (its type, named after `op`); returns its index.
  mlir::FailureOr<uint32_t> addBuffer(mlir::Value value, mlir::Operation *op,
                                      llvm::StringRef name);
  // The kernel of `group` / of a copy of `type`, from the target's emitter.
  mlir::FailureOr<EmittedKernel> emitGroup(const KernelGroup &group);
  mlir::FailureOr<EmittedKernel> emitCopy(mlir::RankedTensorType type);
  // Index of an already planned kernel with this entry, or adds it.
  uint32_t addKernel(EmittedKernel kernel, mlir::Location loc);
  // The buffer that owns `index`'s storage (follows alias_of).
  uint32_t storageOf(uint32_t index) const;

  mlir::ModuleOp module;
  CodegenOptions options;
  std::vector<PlannedBuffer> buffers;
  std::vector<PlannedProgram> programs;
  std::vector<PlannedStep> *schedule = nullptr; // of the program being planned
  std::vector<EmittedKernel> kernelList;
  llvm::StringMap<uint32_t> kernelIndex;
  llvm::DenseMap<mlir::Value, uint32_t> bufferOf;
  // "role:name" -> the buffer shared by every program.
  llvm::StringMap<uint32_t> sharedBuffers;
  // The memory planner's view of `buffers` and `programs`, and its plan.
  std::vector<MemoryPlanBuffer> memoryBuffers;
  std::vector<MemoryPlanProgram> memoryPrograms;
  MemoryPlan memory;
  // Parameter name -> kiln.true_shape of a parameter pad-dims padded.
  llvm::StringMap<std::vector<int64_t>> trueShapes;
};

} // namespace kiln

#endif // KILN_CODEGEN_ARTIFACTWRITER_H
