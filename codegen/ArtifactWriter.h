//===- ArtifactWriter.h - Buffers, kernels and schedule of the step -------===//
//
// Plans the artifact of `func.func @step`: one buffer per function argument
// (by role) and per op result, reshape results as views (alias_of) of their
// input, AdamW results in place on the parameter and moment arguments; one
// schedule step per op (GemmCall for kiln.matmul, KernelCall otherwise), in
// program order. `serialize` writes the flatbuffer.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_ARTIFACTWRITER_H
#define KILN_CODEGEN_ARTIFACTWRITER_H

#include "codegen/Codegen.h"
#include "codegen/CpuKernelEmitter.h"

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

class ArtifactWriter {
public:
  explicit ArtifactWriter(mlir::ModuleOp module) : module(module) {}

  // Plans buffers, kernels and the schedule. Emits diagnostics on failure.
  mlir::LogicalResult plan();

  // The flatbuffer of the planned artifact (after a successful `plan`);
  // needs the module attribute `kiln.train`.
  mlir::FailureOr<std::string> serialize();

  // The planned kernels, each once.
  const std::vector<EmittedKernel> &kernels() const { return kernelList; }

private:
  struct PlannedBuffer {
    std::string name;
    schema::BufferRole role = schema::BufferRole_Activation;
    schema::DType dtype = schema::DType_F32;
    std::vector<int64_t> shape;
    std::optional<std::pair<schema::InitKind, float>> init;
    std::vector<uint8_t> constantData;
    int32_t aliasOf = -1;
  };
  struct PlannedGemm {
    uint32_t a, b, c;
    int64_t m, n, k, batch;
    bool transA, transB;
    int64_t strideA, strideB, strideC;
  };
  struct PlannedStep {
    std::optional<PlannedGemm> gemm;
    uint32_t kernel = 0;
    std::vector<uint32_t> buffers;
    std::string location;
  };

  mlir::LogicalResult planArguments(mlir::func::FuncOp func);
  mlir::LogicalResult planOp(mlir::Operation *op);
  mlir::LogicalResult planMatmul(mlir::Operation *op);
  mlir::LogicalResult planKernel(mlir::Operation *op);
  mlir::LogicalResult planReturn(mlir::func::FuncOp func,
                                 mlir::func::ReturnOp ret);

  // A new buffer for `value` (its type, named after `op`); returns its index.
  mlir::FailureOr<uint32_t> addBuffer(mlir::Value value, mlir::Operation *op,
                                      llvm::StringRef name);
  // Index of an already planned kernel with this entry, or adds it.
  uint32_t addKernel(const CpuKernel &kernel, mlir::Location loc);
  // The buffer that owns `index`'s storage (follows alias_of).
  uint32_t storageOf(uint32_t index) const;

  mlir::ModuleOp module;
  std::vector<PlannedBuffer> buffers;
  std::vector<PlannedStep> schedule;
  std::vector<EmittedKernel> kernelList;
  llvm::StringMap<uint32_t> kernelIndex;
  llvm::DenseMap<mlir::Value, uint32_t> bufferOf;
  // "role:name" of each argument -> its buffer (for in-place results).
  llvm::StringMap<uint32_t> argumentBuffers;
  double flops = 0;
};

} // namespace kiln

#endif // KILN_CODEGEN_ARTIFACTWRITER_H
