//===- Executor.h - Runs the programs of a verified artifact --------------===//
//
// Each program ("step", "update", "eval") is a flat list: KernelCall
// entries call a generated kernel with its buffer pointers; GemmCall entries
// call OpenBLAS sgemm (bf16 operands widened to fp32 scratch first, a
// bf16 result rounded from fp32 scratch after), then their epilogue
// (GemmEpilogue.h); CollectiveCall entries all-reduce their buffers through
// the Communicator. Argument arrays are resolved once at construction so
// running a program is just a loop of indirect calls. The executor fills
// nothing itself: the training session writes inputs, learning rate and
// step count into the arena before running a program.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPU_EXECUTOR_H
#define KILN_RUNTIME_CPU_EXECUTOR_H

#include "runtime/Artifact.h"
#include "runtime/cpu/Arena.h"
#include "runtime/cpu/CommThread.h"
#include "runtime/cpu/GemmEpilogue.h"
#include "runtime/comm/Communicator.h"
#include "runtime/cpu/KernelCompiler.h"
#include "runtime/metrics/ScheduleProfile.h"
#include "runtime/metrics/Trace.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace kiln::rt::cpu {

class Executor {
public:
  // `artifact`, `kernels`, `arena` and `mesh` must outlive the executor. An
  // artifact with CollectiveCall steps over more than one rank needs the
  // communicators of its mesh (null: this process runs alone).
  static StatusOr<std::unique_ptr<Executor>>
  create(const Artifact &artifact, const KernelLibrary &kernels,
         const Arena &arena, const MeshCommunicators *mesh,
         bool commOverlap = true);

  // Runs every schedule entry of the program once, in order. A program the
  // artifact does not have is an error.
  Status run(ProgramKind program);

  // With profiling on, run() times every schedule entry (a clock read
  // around each call: cheap next to a kernel, but off by default).
  void setProfiling(bool enabled) { profiling_ = enabled; }
  // While trace->active(), run() reports each program run and entry to it.
  void setTrace(TraceRecorder *trace) { trace_ = trace; }
  // Wall seconds per schedule entry of `program`, indexed like its
  // schedule, summed over its profiled runs (empty until profiled).
  const ScheduleTiming &entryTiming(ProgramKind program) const {
    return programs_[static_cast<int>(program)].timing;
  }
  // How many times `program` has run.
  int64_t runs(ProgramKind program) const {
    return programs_[static_cast<int>(program)].runs;
  }

private:
  struct GemmArgs {
    const float *a;
    const float *b;
    float *c;
    int m, n, k;
    int64_t batch, strideA, strideB, strideC;
    bool transA, transB;
    float beta; // 1: C += the product (GemmCall.accumulate), 0: C = it
  };
  // A CollectiveCall. AllReduce: its buffers reduced in place, back-to-back
  // ones as one range, in address order. The other kinds: from each part's
  // `in` into its `out`, `slice` floats per rank. Consecutive reduce-scatters
  // (or all-gathers) of a program are one call of the library, up to
  // kPackedFloats per rank: the first entry carries every part, packed into
  // the executor's staging and out again, and the others (`joined`) do
  // nothing.
  struct ShardPart {
    const float *in = nullptr;
    float *out = nullptr;
    size_t slice = 0;
  };
  struct Collective {
    schema::CollectiveKind kind = schema::CollectiveKind_AllReduce;
    Reduction reduction = Reduction::kSum;
    std::vector<std::pair<float *, size_t>> buffers; // ranges: data, elements
    std::vector<ShardPart> parts;
    bool joined = false;
    bool overlap = false; // CollectiveCall.overlap: may run on commThread_
    size_t until = SIZE_MAX; // ... finished before this entry (SIZE_MAX: the end)
    // The ranks of its axis (null: the axis has one rank, nothing moves).
    Communicator *comm = nullptr;
  };
  // The most floats per rank one packed call moves: its staging (host
  // memory beside the arena) is at most twice this times the ranks.
  static constexpr size_t kPackedFloats = size_t(1) << 20;
  Status collective(const Collective &c);
  // One library call for several parts of a reduce-scatter or all-gather.
  Status packedCollective(const Collective &c);

  struct Call {
    KernelEntry kernel = nullptr; // set for a KernelCall
    std::optional<Collective> collective; // set for a CollectiveCall
    std::vector<void *> buffers;  // KernelCall arguments
    GemmArgs gemm{};              // used when kernel is null
    GemmEpilogueArgs epilogue{};  // after the GEMM (kind None: nothing)
    // bf16 GEMM operands, widened into wideA/wideB (gemm.a/b point there)
    // before each call.
    const uint16_t *bf16A = nullptr, *bf16B = nullptr;
    mutable std::vector<float> wideA, wideB;
    // A bf16 result: sgemm writes fp32 scratch (gemm.c points there), then
    // each result is rounded to nearest even into bf16C.
    uint16_t *bf16C = nullptr;
    mutable std::vector<float> wideC;
    // With a bf16 C: the epilogue's bf16 bias (widened before it), bf16
    // aux written (fp32 scratch, rounded after it) or read (Dgelu: widened
    // into the scratch before it).
    const uint16_t *bf16Bias = nullptr;
    uint16_t *bf16Aux = nullptr;
    const uint16_t *bf16AuxIn = nullptr;
    mutable std::vector<float> wideBias, wideAux;
  };
  // Joins runs of consecutive reduce-scatters (same reduction and axis) or
  // all-gathers of `calls` into their first entry, unless a part reads
  // what an earlier one of its run writes.
  static void joinShardCollectives(std::vector<Call> &calls);

  struct Program {
    bool present = false;
    std::string name;                    // "step", "update", "eval"
    std::vector<Call> calls;
    std::vector<std::string> rangeNames; // per call, its NVTX range (metrics/Nvtx.h)
    ScheduleTiming timing; // per call, when profiled
    int64_t runs = 0;
  };

  Executor() = default;
  static Call resolve(const Artifact &artifact, const schema::Step &step,
                      const KernelLibrary &kernels, const Arena &arena);
  Status call(const Call &call);

  // The overlapped all-reduces' thread (with a communicator and such calls).
  std::unique_ptr<CommThread> commThread_;
  // packedCollective's staging, shared by every packed call.
  std::vector<float> stagingIn_, stagingOut_;

  Program programs_[kNumProgramKinds];
  bool profiling_ = false;
  TraceRecorder *trace_ = nullptr;
};

} // namespace kiln::rt::cpu

#endif // KILN_RUNTIME_CPU_EXECUTOR_H
