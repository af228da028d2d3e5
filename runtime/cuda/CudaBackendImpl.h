//===- CudaBackendImpl.h - The CUDA backend's state, shared by its files ===//
//
// Internal to runtime/cuda: the schedule as resolved for the device (one
// DeviceCall per step) and CudaBackend::Impl, whose members CudaBackend.cpp
// (device, memory, kernels, graphs, buffers) and CudaAttentionDispatch.cpp
// (cuDNN plans, their fix-ups, the timed choice under --attention=auto)
// define.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CUDA_CUDABACKENDIMPL_H
#define KILN_RUNTIME_CUDA_CUDABACKENDIMPL_H

#include "runtime/cuda/CudaBackend.h"

#include "runtime/cuda/CublasLt.h"
#include "runtime/cuda/Cudnn.h"
#include "runtime/cuda/CudaDriver.h"
#include "runtime/cuda/DeviceLayout.h"
#include "runtime/cuda/Nccl.h"

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace kiln::rt::cuda {

// cuBLASLt's workspace, shared by every GEMM (they run one after another on
// one stream). 32 MiB is what cuBLAS itself reserves on Hopper.
constexpr size_t kGemmWorkspaceBytes = 32u << 20;

// A buffer's host view; allocated on first use (a 1B-parameter model's
// mirrors are only needed for what is checkpointed or inspected).
struct HostMirror {
  std::vector<uint8_t> bytes;
};

// One fix-up launch after a cuDNN attention call with key lengths
// (CudnnEmptyKeys.h): Kiln's result for the samples without keys.
struct EmptyKeysLaunch {
  CUfunction function = nullptr;
  CUdeviceptr lengths = 0, x = 0;
  long long perSample = 0, inner = 0, rows = 0, total = 0;
  float value = 0; // f32 fills only
  bool f32 = false;
  unsigned grid = 1;
};

// One launch of a GEMM epilogue that cuBLASLt had no algorithm for
// (GemmEpilogueFallback.h), after the plain GEMM.
struct EpilogueLaunch {
  CUfunction function = nullptr;
  long long args[7] = {}; // the kernel's argument array, uploaded to `table`
  CUdeviceptr table = 0;
  unsigned grid = 1;
};

// One schedule entry, resolved at setup.
struct DeviceCall {
  CUfunction function = nullptr;       // KernelCall
  CUdeviceptr argumentTable = 0;       // device array of buffer pointers
  unsigned grid = 1, block = 1, sharedBytes = 0;
  std::unique_ptr<GemmPlan> gemm;      // GemmCall
  CUdeviceptr a = 0, b = 0, c = 0;
  std::vector<EpilogueLaunch> epilogue; // after `gemm`, when cuBLASLt had none
  std::string where;                   // "step entry 3 ('k_gelu' at m.kiln:4:5)"
  // KernelCall with a cudnn_attention (Cudnn.h) whose plan cuDNN accepted:
  // `useCudnn` runs it instead of the kernel; `undecided` (--attention=auto)
  // until the first run of the program times both.
  std::unique_ptr<CudnnAttentionPlan> cudnn;
  // Its workspace: the arena buffer kilnc reserved (CudnnAttention.workspace)
  // when cuDNN asks no more, else 0 (the backend's shared one, outside the plan).
  CUdeviceptr cudnnWorkspace = 0;
  std::vector<EmptyKeysLaunch> emptyKeys; // after cuDNN, with key lengths
  CUfunction clampLengths = nullptr;      // before cuDNN, with key lengths:
  CUdeviceptr lengths = 0, clamped = 0;   //   clamped = min(max(lengths, 0), S)
  long long batch = 0;
  int kvLen = 0;
  bool useCudnn = false;
  // Decided at the program's first run: cuDNN or the kernel (attention
  // under --attention=auto), or the GEMM's algorithm (--gemm-algos=timed).
  bool undecided = false;
  size_t gemmResultBytes = 0; // GemmCall: bytes of C (a scratch C for timing)
  // CollectiveCall: its buffers, all-reduced in place through NCCL; or a
  // reduce-scatter, all-gather (NCCL) or local shard (a device copy) from
  // collective[0] into collective[1].
  std::vector<NcclBuffer> collective;
  const Nccl *comm = nullptr; // the NCCL communicator of its mesh axis
  bool collectiveMean = false;
  schema::CollectiveKind collectiveKind = schema::CollectiveKind_AllReduce;
  // CollectiveCall.overlap, with a communication stream: in a graph it runs
  // on commStream after `ready` (recorded on the step's stream) and
  // records `done`, which the step's stream waits for at the program's end.
  bool overlap = false;
  int64_t overlapUntil = -1; // the entry that waits for it (-1: the end)
  CUevent ready = nullptr, done = nullptr;
};

struct DeviceProgram {
  bool present = false;
  const char *name = "";
  std::vector<DeviceCall> calls;
  std::vector<std::string> rangeNames; // per call, its NVTX range (metrics/Nvtx.h)
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  bool undecided = false; // a call is undecided: capture after the first run
};

// --gemm-algos=timed at one program's first run (GemmTuning.cpp).
struct GemmTuningTally {
  int timed = 0, changed = 0, cached = 0, skipped = 0;
  double heuristicMs = 0, chosenMs = 0; // summed over the timed GEMMs
  // The largest gains: (ms saved, what) of the changed GEMMs.
  std::vector<std::pair<double, std::string>> gains;
};

// The whole training step (Backend::runTrainingStep) as one CUDA graph: the
// accumulators zeroed, per micro-batch its inputs copied from pinned host
// staging and the "step" program, then the update's scalars and "update".
// Captured for one plan's shape (`key`: its buffers and bytes); the bytes
// are copied into `pinned` at `offsets` before each replay.
struct StepGraph {
  std::vector<int64_t> key;
  std::vector<size_t> offsets; // per write, micro-batches then the update's
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  uint8_t *pinned = nullptr;
  size_t pinnedBytes = 0;
  // Stamped by the graph's first and last nodes (event record nodes) at each
  // replay: the device's time for the step (lastSeconds), apart from the
  // host's before and after it and from the launch itself.
  CUevent start = nullptr, end = nullptr;
  std::optional<double> lastSeconds;
};

struct CudaBackend::Impl {
  const Artifact &artifact;
  BackendOptions options;
  std::unique_ptr<CudaDriver> driver;
  std::unique_ptr<CublasLt> cublas; // only when the artifact has GEMMs
  std::unique_ptr<Nccl> nccl;       // only when it has collectives
  // One per mesh axis that spans some but not all of the ranks (data x
  // model): over the ranks that differ only in their index along it.
  std::map<std::string, std::unique_ptr<Nccl>, std::less<>> axisNccl;
  int64_t collectiveBytes = 0;      // handed to NCCL, summed over calls
  std::unique_ptr<Cudnn> cudnn;      // only when an attention call may use it
  CUdeviceptr cudnnWorkspace = 0;    // outside the arena: shared by the cuDNN plans
                                     // whose reservation is too small (one stream)
  // --gemm-algos=timed: the choices of earlier runs on this machine
  // (signature -> algorithm, GemmTuning.cpp), loaded at the first decision,
  // and those this run made, to save.
  std::map<std::string, std::string> gemmChoices, gemmChoicesMade;
  bool gemmChoicesLoaded = false;
  // A C for timing an accumulating GEMM's candidates (they add into C), freed
  // after the program's first run; 0 when none.
  CUdeviceptr tuningScratch = 0;
  size_t tuningScratchBytes = 0;
  std::vector<CUdeviceptr> seqLenBuffers; // [B] i32 q_len per padding plan
  CUdevice device = 0;
  CUcontext context = nullptr;
  CUstream stream = nullptr;
  // The overlapped collectives' stream (with NCCL, an overlapped call and
  // BackendOptions::commOverlap).
  CUstream commStream = nullptr;
  std::vector<CUmodule> modules; // one per part of the JIT compile (JitCache.h)
  std::vector<size_t> kernelParts; // the part (module) of each of the artifact's kernels
  CUmodule emptyKeysModule = nullptr; // CudnnEmptyKeys.h, compiled on demand
  CUmodule epilogueModule = nullptr;  // GemmEpilogueFallback.h, on demand
  std::string arch;                   // NVRTC's target for this device
  CUdeviceptr arena = 0;      // every buffer
  CUdeviceptr tables = 0;     // every KernelCall's pointer array
  CUdeviceptr workspace = 0;  // cuBLASLt
  CUdeviceptr epilogueArgs = 0; // the fallback epilogue launches' arguments
  DeviceLayout layout;
  std::string deviceName;
  KernelLoad load;
  DeviceProgram programs[kNumProgramKinds];
  StepGraph stepGraph;
  mutable std::vector<HostMirror> mirrors;
  std::vector<uint32_t> scalars; // buffers refreshed after every run
  bool eager = false;
  bool profiling = false;
  TraceRecorder *trace = nullptr; // kiln-run --trace (not owned)
  // Entries are timed by events (runProfiled) when profiled or traced.
  bool timed() const { return profiling || (trace && trace->active()); }
  ScheduleTiming timing[kNumProgramKinds]; // per entry, --profile
  std::vector<CUevent> events;                   // one more than entries
  std::vector<CUevent> forkEvents; // DeviceCall::ready and done, to destroy
  int64_t allocatedBytes = 0; // every cuMemAlloc of this backend (none is freed before teardown)
  // The arena bytes [first, second) that hold every scalar buffer, and the
  // host copy readScalars() reads them into.
  std::pair<int64_t, int64_t> scalarSpan{0, 0};
  std::vector<uint8_t> scalarStaging;

  explicit Impl(const Artifact &a) : artifact(a) {}
  ~Impl();

  CUdeviceptr devicePointer(uint32_t buffer) const {
    return arena + static_cast<CUdeviceptr>(layout.offsets[buffer]);
  }
  size_t bytes(uint32_t buffer) const {
    return static_cast<size_t>(artifact.bufferInfo(buffer).bytes);
  }
  HostMirror &mirror(uint32_t buffer) const {
    HostMirror &m = mirrors[buffer];
    if (m.bytes.size() != bytes(buffer))
      m.bytes.assign(bytes(buffer), 0);
    return m;
  }

  Status openDevice();
  // cuMemAlloc of `bytes` for `what`, counted in allocatedBytes.
  Status allocateDevice(CUdeviceptr &pointer, size_t bytes, const std::string &what);
  Status allocate(size_t tableBytes, bool needsWorkspace);
  Status loadKernels();
  Status resolvePrograms();
  // The GEMM of `g` for `call`, with its epilogue in cuBLASLt or, when
  // cuBLASLt has no algorithm for it, as Kiln kernels after the plain GEMM
  // (added to `fallbacks` as (epilogue, location); the caller reports them
  // once).
  Status planGemm(DeviceCall &call, const schema::GemmCall &g, const std::string &location,
                  std::vector<std::pair<std::string, std::string>> &fallbacks);
  Status launch(const DeviceCall &call) const;
  Status launchKernel(const DeviceCall &call) const;
  // A CollectiveCall on `on` (NCCL, or a copy for a local shard).
  Status runCollective(const DeviceCall &call, CUstream on) const;
  // Every call of `program` on the stream, as a graph records them: an
  // overlapped collective forks onto commStream, joined back at the end.
  Status launchAll(const DeviceProgram &program) const;
  // The cuDNN plan of `call`, then its empty-sample fix-ups.
  Status runCudnn(const DeviceCall &call) const;
  // The fix-up launches for a planned call with key lengths.
  Status planEmptyKeys(DeviceCall &call, const schema::CudnnAttention &a);
  // cuDNN plans for the calls with a cudnn_attention (--attention).
  Status planCudnnAttention();
  // Times the kernel and cuDNN for each undecided attention call of the
  // program on the real buffers, keeps the faster, runs the program once (in
  // the trace when the step is traced, marked as host-timed).
  // And for undecided GEMMs, tuneGemm. Then captures the program.
  Status decideCalls(ProgramKind kind);
  // --gemm-algos=timed for one GEMM: its choice from gemmChoices, else its
  // candidates timed on its buffers (an accumulating one on tuningScratch),
  // the fastest chosen when it beats the first by kGemmTimedMargin.
  Status tuneGemm(DeviceCall &call, GemmTuningTally &tally);
  // After a program's first run: the tally on stderr, new choices saved,
  // the scratch freed.
  Status finishGemmTuning(const DeviceProgram &program, const GemmTuningTally &tally);
  Status capture(DeviceProgram &program);
  // Captures `plan` (whose shape is `key`) as stepGraph.
  Status captureStep(const TrainingStepPlan &plan, std::vector<int64_t> key);
  void releaseStepGraph();
  Status runEagerly(const DeviceProgram &program);
  // Launches `kind`'s entries with an event after each, waits once, adds
  // each entry's time to timing[kind].
  Status runProfiled(ProgramKind kind);
  // After a program: every scalar buffer into its host mirror, with one
  // synchronization and (when they are near each other) one copy.
  Status readScalars();
};

} // namespace kiln::rt::cuda

#endif // KILN_RUNTIME_CUDA_CUDABACKENDIMPL_H
