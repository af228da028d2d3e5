//===- Executor.h - Runs one training step of a verified artifact ---------===//
//
// The schedule is a flat list: KernelCall entries call a generated kernel
// with its buffer pointers; GemmCall entries call OpenBLAS sgemm. Argument
// arrays are resolved once at construction so a step is just a loop of
// indirect calls. The executor fills nothing itself: the trainer writes
// inputs, learning rate and step count into the arena before each step.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPU_EXECUTOR_H
#define KILN_RUNTIME_CPU_EXECUTOR_H

#include "runtime/Artifact.h"
#include "runtime/cpu/Arena.h"
#include "runtime/cpu/KernelCompiler.h"

#include <vector>

namespace kiln::rt::cpu {

class Executor {
public:
  // `artifact`, `kernels` and `arena` must outlive the executor.
  Executor(const Artifact &artifact, const KernelLibrary &kernels,
           const Arena &arena);

  // Runs every schedule entry once, in order.
  Status runStep();

  // With profiling on, runStep() times every schedule entry (a clock read
  // around each call: cheap next to a kernel, but off by default).
  void setProfiling(bool enabled) { profiling_ = enabled; }
  // Accumulated wall seconds per schedule entry, indexed like the schedule.
  const std::vector<double> &entrySeconds() const { return seconds_; }

private:
  struct GemmArgs {
    const float *a;
    const float *b;
    float *c;
    int m, n, k;
    int64_t batch, strideA, strideB, strideC;
    bool transA, transB;
  };
  struct Call {
    KernelEntry kernel = nullptr; // set for a KernelCall
    std::vector<void *> buffers;  // KernelCall arguments
    GemmArgs gemm{};              // used when kernel is null
  };

  void run(const Call &call);

  std::vector<Call> calls_;
  bool profiling_ = false;
  std::vector<double> seconds_;
};

} // namespace kiln::rt::cpu

#endif // KILN_RUNTIME_CPU_EXECUTOR_H
