//===- KernelRunner.h - Runs generated CPU kernels in tests ---------------===//
//
// Parses a kiln-dialect module, emits one kernel per op (or kiln.fusion
// region, as the artifact writer does) of @step with CpuKernelEmitter, compiles all of them as one shared library with the host
// C++ compiler (`c++ -O1 -fopenmp -shared -fPIC`), and runs the step op by op
// on host buffers. With KernelBackend::CudaEmulated the kernels are
// CudaKernelEmitter's instead, built for the host with CudaHostEmulation.h
// and run with their launch configuration (no GPU needed). Reshape results
// share their input's storage and the
// optimizer/accumulation ops update their param, state and accumulator
// operands in place, as in the artifact.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNIT_CODEGEN_KERNELRUNNER_H
#define KILN_TEST_UNIT_CODEGEN_KERNELRUNNER_H

#include "codegen/CpuKernelEmitter.h"
#include "codegen/CudaKernelEmitter.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::test {

// Host storage of one tensor: floats for f32, ints for i32.
struct HostTensor {
  std::vector<float> f;
  std::vector<int32_t> i;
  void *data() { return f.empty() ? static_cast<void *>(i.data()) : f.data(); }
  static HostTensor floats(std::vector<float> v) { return {std::move(v), {}}; }
  static HostTensor ints(std::vector<int32_t> v) { return {{}, std::move(v)}; }
};

// A new MLIR context with the kiln and func dialects loaded.
std::unique_ptr<mlir::MLIRContext> makeContext();

// Which kernels a KernelRunner builds and runs.
enum class KernelBackend { Cpu, CudaEmulated };

// Compiles `prelude + sources` into a shared library and loads it. Returns
// the dlopen handle, or null (with a message in `error`).
void *compileKernels(const std::vector<std::string> &sources,
                     std::string &error,
                     KernelBackend backend = KernelBackend::Cpu);

class KernelRunner {
public:
  // Parses `moduleText` and builds and compiles the kernels of @step. Check
  // `ok()` (and `error()`) before running.
  // With `fuse`, --kiln-fusion runs on the module first, so its kiln.fusion
  // regions (pointwise, row, optimizer) become one kernel each.
  // `attentionSharedBudget`: CudaKernelEmitter::emit's (-1: the default
  // archs'), to emulate the tile plans of other archs.
  explicit KernelRunner(const std::string &moduleText,
                        KernelBackend backend = KernelBackend::Cpu,
                        bool fuse = false, int64_t attentionSharedBudget = -1);
  ~KernelRunner();

  bool ok() const { return handle != nullptr; }
  const std::string &error() const { return message; }

  // Runs @step on `args` (one per function argument); returns the returned
  // values.
  std::vector<HostTensor> run(std::vector<HostTensor> args);

  // The kernels, in op order (one per op that has a kernel).
  const std::vector<CpuKernel> &kernels() const { return emitted; }

private:
  std::unique_ptr<mlir::MLIRContext> context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::vector<CpuKernel> emitted;
  std::vector<CudaLaunch> launches; // CudaEmulated: one per emitted kernel
  KernelBackend backend;
  void *handle = nullptr;
  std::string message;
};

// Element count of a value's static shape.
int64_t elementCount(mlir::Value v);

} // namespace kiln::test

#endif // KILN_TEST_UNIT_CODEGEN_KERNELRUNNER_H
