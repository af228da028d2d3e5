//===- CudaBackend.h - The Backend on one NVIDIA GPU ----------------------===//
//
// Made once per run (CudaBackend::create), in this order:
//   1. libcuda (no driver: a clear FailedPrecondition, kiln-run exits 1),
//      device 0's primary context, its architecture (sm_90 -> "sm_90a" when
//      the artifact lists it);
//   2. the device arena: deviceLayout() offsets, compared with cuMemGetInfo's
//      free bytes before the ONE cuMemAlloc (plus one for cuBLASLt's
//      workspace and the per-call pointer tables), zeroed, constants uploaded;
//   3. the kernels: JitCache (NVRTC, on-disk cache) -> one CUmodule, one
//      CUfunction per kernel; per KernelCall a device array of its buffer
//      pointers built once; per GemmCall a cuBLASLt plan (heuristic once);
//   4. every program captured once as a CUDA graph on the backend's stream.
// run() replays the graph and waits, then refreshes the host view of every
// scalar buffer. The learning rate and step count are device buffers written
// (upload) before "update" is replayed; each micro-batch is uploaded into the
// fixed input buffers before each replay of "step", so replays stay correct.
// runTrainingStep() replays a whole training step -- the accumulators
// zeroed, every micro-batch's input copies (from pinned host staging) and
// "step", the update's scalars and "update" -- as ONE graph captured at its
// first call, then waits once and reads the scalars with one copy.
//
// KILN_CUDA_EAGER=1 launches entry by entry instead of the graph and waits
// after each, so a failing kernel is named with its model-file location.
// --profile (setProfiling) launches entry by entry too, with a CUDA event
// after each, and waits once per program run: the time between two events
// is the entry's time on the GPU.
// This header exposes no CUDA type (the implementation is behind Impl).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CUDA_CUDABACKEND_H
#define KILN_RUNTIME_CUDA_CUDABACKEND_H

#include "runtime/Backend.h"

#include <memory>

namespace kiln::rt::cuda {

class CudaBackend final : public Backend {
public:
  static StatusOr<std::unique_ptr<CudaBackend>>
  create(const Artifact &artifact, const BackendOptions &options);
  ~CudaBackend() override;

  const char *name() const override { return "cuda"; }
  Status run(ProgramKind program) override;
  Status runTrainingStep(const TrainingStepPlan &plan) override;
  void *hostData(uint32_t buffer) const override;
  Status upload(uint32_t buffer) override;
  Status download(uint32_t buffer) override;
  Status zero(uint32_t buffer) override;
  const KernelLoad &kernelLoad() const override;
  std::string deviceName() const override;
  std::optional<int64_t> devicePeakBytes() const override;
  std::optional<double> lastStepDeviceSeconds() const override;
  int64_t collectiveBytesPerStep() const override;
  // --profile: each program runs launch by launch with an event after each
  // entry (no synchronization between them), timed when it completes.
  bool setProfiling(bool enabled) override;
  const ScheduleTiming &entryTiming(ProgramKind program) const override;
  void traceEntries(TraceRecorder *trace) override;

private:
  struct Impl;
  explicit CudaBackend(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

} // namespace kiln::rt::cuda

#endif // KILN_RUNTIME_CUDA_CUDABACKEND_H
