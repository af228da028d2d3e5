//===- CpuBackend.h - The Backend over the host arena and executor --------===//
//
// The CPU implementation of runtime/Backend.h: buffers live in a cpu::Arena
// (so hostData is the storage itself and upload/download are no-ops),
// kernels come from the cpu::KernelCompiler, programs run on cpu::Executor.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPU_CPUBACKEND_H
#define KILN_RUNTIME_CPU_CPUBACKEND_H

#include "runtime/Backend.h"
#include "runtime/cpu/Arena.h"
#include "runtime/cpu/Executor.h"
#include "runtime/cpu/KernelCompiler.h"

namespace kiln::rt::cpu {

class CpuBackend final : public Backend {
public:
  // Allocates the arena (failing before the compile when the step does not
  // fit in host memory), then compiles or fetches the kernels.
  // `mesh`'s communicators run the artifact's CollectiveCall steps (null:
  // the artifact must have none over more than one rank); with
  // `commOverlap` the overlapped ones on a thread of their own
  // (cpu/CommThread.h).
  static StatusOr<std::unique_ptr<CpuBackend>>
  create(const Artifact &artifact, const MeshCommunicators *mesh = nullptr,
         bool commOverlap = true);

  const char *name() const override { return "cpu"; }
  Status run(ProgramKind program) override { return executor_->run(program); }
  void *hostData(uint32_t buffer) const override { return arena_->data(buffer); }
  Status upload(uint32_t) override { return okStatus(); }
  Status download(uint32_t) override { return okStatus(); }
  Status zero(uint32_t buffer) override;
  const KernelLoad &kernelLoad() const override { return load_; }
  bool setProfiling(bool enabled) override {
    executor_->setProfiling(enabled);
    return true;
  }
  const ScheduleTiming &entryTiming(ProgramKind program) const override {
    return executor_->entryTiming(program);
  }
  void traceEntries(TraceRecorder *trace) override { executor_->setTrace(trace); }

  Arena &arena() const { return *arena_; }

private:
  explicit CpuBackend(const Artifact &artifact) : artifact_(artifact) {}
  const Artifact &artifact_;
  std::unique_ptr<Arena> arena_;
  std::unique_ptr<KernelLibrary> kernels_;
  std::unique_ptr<Executor> executor_;
  KernelLoad load_;
};

} // namespace kiln::rt::cpu

#endif // KILN_RUNTIME_CPU_CPUBACKEND_H
