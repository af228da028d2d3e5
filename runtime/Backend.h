//===- Backend.h - Where an artifact's buffers live and its programs run --===//
//
// TrainingSession, the Trainer, the gradient check and checkpoints are
// written once against this interface; kiln-run picks the implementation by
// Artifact.target:
//   "cpu"  cpu::CpuBackend  - host arena, JIT-compiled C++ kernels, OpenBLAS
//   "cuda" cuda::CudaBackend - device arena, NVRTC kernels, cuBLASLt, graphs
// Every buffer has a host-addressable view (hostData). On the CPU it IS the
// storage and upload/download do nothing; on a GPU it is a host mirror that
// upload() copies to the device and download() refreshes. Scalar buffers
// (loss, norms, metrics) are refreshed by run() itself, so reading the loss
// after a program needs no call. Callers write through hostData + upload and
// read through download + hostData, and stay correct on both.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_BACKEND_H
#define KILN_RUNTIME_BACKEND_H

#include "runtime/Artifact.h"
#include "runtime/AttentionDispatch.h"
#include "runtime/GemmAlgorithms.h"
#include "runtime/comm/Communicator.h"
#include "runtime/Status.h"
#include "runtime/metrics/ScheduleProfile.h"
#include "runtime/metrics/Trace.h"

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln::rt {

// How the kernels were made ready, as kiln-run reports before the first step.
struct KernelLoad {
  size_t kernels = 0;
  bool cacheHit = false;  // warm: from the on-disk cache; cold: compiled
  double seconds = 0;     // wall time of compile-or-lookup and load
  std::string path;       // the cached library or CUBIN
  std::string detail;     // backend specifics ("sm_90a, NVRTC 13.0")
};

// "kernels: 12 compiled in 1.20 s (cold, PATH)".
void printKernelLoad(const KernelLoad &load, FILE *out);

// Options a backend takes from the command line.
struct BackendOptions {
  bool tf32 = false; // CUDA: fp32 GEMMs on TF32 tensor cores
  // CUDA: who runs the attention calls that carry a cudnn_attention.
  AttentionDispatch attention = AttentionDispatch::kAuto;
  // The ranks' communicator, which runs the CollectiveCall steps (CUDA:
  // passes NCCL's unique id, NCCL runs them); must outlive the backend.
  // Required when the artifact has collectives over more than one rank.
  Communicator *communicator = nullptr;
  // The communicators of the mesh's axes (world among them): the CPU's
  // collectives run over their axis's. Must outlive the backend.
  const MeshCommunicators *mesh = nullptr;
  // CUDA: the GPU of this rank, its index among the node's (LOCAL_RANK).
  int device = 0;
  // Overlapped collectives (CollectiveCall.overlap) run beside the entries
  // after them; false: each where the schedule puts it (--no-comm-overlap).
  bool commOverlap = true;
  // CUDA: which of cuBLASLt's algorithms each GEMM runs (GemmAlgorithms.h).
  GemmAlgorithms gemmAlgorithms = GemmAlgorithms::kHeuristic;
};

// Bytes written into a buffer from the host before a program runs.
struct BufferWrite {
  uint32_t buffer = 0;
  const void *data = nullptr;
  size_t bytes = 0; // the buffer's bytes
};

// One training step as one unit: zero `zeroed` (the grad_accum
// accumulators), then for each micro-batch its writes (inputs, dropout RNG
// state) and the "step" program, then `updateWrites` (learning rate, update
// count) and the "update" program.
struct TrainingStepPlan {
  std::vector<uint32_t> zeroed;
  std::vector<std::vector<BufferWrite>> microBatches;
  std::vector<BufferWrite> updateWrites;
};

class Backend {
public:
  virtual ~Backend() = default;

  // "cpu" or "cuda".
  virtual const char *name() const = 0;

  // Runs every schedule entry of `program` once, in order; the results are
  // complete (and scalar buffers readable through hostData) on return.
  virtual Status run(ProgramKind program) = 0;

  // Runs `plan`; scalar buffers are readable on return, as after run(). This
  // default runs it call by call (zero; hostData + upload; run); the CUDA
  // backend replays the whole step as one CUDA graph.
  virtual Status runTrainingStep(const TrainingStepPlan &plan);

  // The host view of `buffer` (its bufferInfo().bytes bytes).
  virtual void *hostData(uint32_t buffer) const = 0;
  // hostData -> the buffer's storage.
  virtual Status upload(uint32_t buffer) = 0;
  // The buffer's storage -> hostData.
  virtual Status download(uint32_t buffer) = 0;
  // Sets every byte of the buffer (and of its host view) to zero.
  virtual Status zero(uint32_t buffer) = 0;

  virtual const KernelLoad &kernelLoad() const = 0;

  // The GPU's name as its driver reports it ("NVIDIA H100 80GB HBM3"), for
  // the peak FLOP/s table; empty on the CPU.
  virtual std::string deviceName() const { return ""; }
  // The most device memory this backend has held allocated (the arena,
  // launch tables and library workspaces); nullopt on the CPU, whose peak
  // is the process's resident memory.
  virtual std::optional<int64_t> devicePeakBytes() const { return std::nullopt; }
  // The device's time for the last runTrainingStep: from the first node of
  // the step's CUDA graph to its last (event record nodes of the graph). The
  // host's share of a step -- reading the batch, staging it, launching,
  // synchronizing, reading the scalars -- is the wall time less this.
  // nullopt on the CPU and where the step ran launch by launch (profiled,
  // traced, eager, or decided at its first run).
  virtual std::optional<double> lastStepDeviceSeconds() const { return std::nullopt; }
  // Bytes this rank all-reduces per training step through a library of the
  // backend's own (NCCL); 0 where the communicator runs the collectives.
  virtual int64_t collectiveBytesPerStep() const { return 0; }

  // Per schedule entry timing for --profile; a backend that cannot time
  // entries returns false and leaves the report to external profilers.
  virtual bool setProfiling(bool enabled) = 0;
  // Seconds per schedule entry of `program` summed over its timed runs
  // (empty unless profiled).
  virtual const ScheduleTiming &entryTiming(ProgramKind program) const = 0;

  // kiln-run --trace: while trace->active(), every program run and schedule
  // entry is timed and reported to `trace` (null: none), and so is every
  // copy of a step's inputs into the backend's memory. Not owned.
  void setTrace(TraceRecorder *trace) {
    trace_ = trace;
    traceEntries(trace);
  }

protected:
  // The backend's part of setTrace: its program runs and entries.
  virtual void traceEntries(TraceRecorder *trace) = 0;
  TraceRecorder *trace_ = nullptr;
};

// The backend for `artifact`'s target. A CUDA artifact on a machine without
// a driver or GPU is a FailedPrecondition error saying so.
StatusOr<std::unique_ptr<Backend>> createBackend(const Artifact &artifact,
                                                 const BackendOptions &options);

} // namespace kiln::rt

#endif // KILN_RUNTIME_BACKEND_H
