//===- ScheduleProfile.h - Where the step's time goes (kiln-run --profile) ===//
//
// `kiln-run --profile` (CPU: host timers; CUDA: events) answers the first
// performance question — which schedule
// entries dominate the step — with tables attributing time to kernels and
// GEMMs and to the model-file line each came from, so slow kernels can be
// traced back to codegen and to the model. The timeline of the same
// timings is `kiln-run --trace` (Trace.h).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_METRICS_SCHEDULEPROFILE_H
#define KILN_RUNTIME_METRICS_SCHEDULEPROFILE_H

#include "runtime/Artifact.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::rt {

// Per schedule entry timing under --profile: seconds summed over `runs`
// timed runs of the program. A run that is not timed (the CUDA backend's
// first, which times cuDNN against the generated attention kernels) is not
// counted, so seconds / runs is the time of one run.
struct ScheduleTiming {
  std::vector<double> seconds;
  int64_t runs = 0;
};

// One schedule entry as the tables (and the trace, Trace.h) name it, with
// the work of one run for the roofline columns:
//  - `what`: "gemm 1024x384x128 x4 (A^T)", "kernel k_1a2b [kiln.gelu]" or
//    "all_reduce mean of 3 buffers over 'data'";
//  - `flops`: a GEMM's 2·M·N·K·batch; an attention kernel with a cuDNN
//    descriptor (CUDA): its matmuls, 2·B·H·T·S·(D + Dv) forward and
//    2·B·H·T·S·(3·D + 2·Dv) backward, times the fraction of (query, key)
//    pairs a causal mask keeps; 0 for the others (elementwise and row
//    kernels, whose FLOPs are not what limits them);
//  - `bytes`: the least device-memory traffic of the run: every buffer it
//    reads or writes moved once (a kernel's arguments as its source reads
//    them; a GEMM's A, B, C, with C twice when it accumulates, and its
//    bias and aux). A kernel that re-reads (attention's K and V per query
//    tile) moves more, so its bytes/s is a lower bound of what it achieved.
struct EntryWork {
  std::string what;
  double flops = 0;
  double bytes = 0;
};
EntryWork describeScheduleEntry(const Artifact &artifact, const schema::Step &step);
// The FLOPs of one attention call's matmuls (as EntryWork::flops says).
double attentionFlops(const schema::CudnnAttention &attention);

// The roofs to place entries under: peak FLOP/s at the step's matmul
// precision and device-memory bytes/s (PeakFlops.h: a GPU's datasheet, or
// --peak-tflops / --peak-gbps); either may be unknown.
struct DevicePeaks {
  std::optional<double> flopsPerSecond;
  std::optional<double> bytesPerSecond;
};

// Formats the `top` most expensive schedule entries of `program` given the
// seconds per entry over its timed runs (Backend::entryTiming), per
// training step (the program runs `runsPerStep` times a step: grad_accum K
// for "step"), then the same time summed per kernel / GEMM shape and per
// model-file line. The entry and line tables give achieved GFLOP/s and GB/s
// and the roofline position: the share of the roof at the entry's
// arithmetic intensity (min(peak FLOP/s, FLOP/byte x peak bytes/s)) it
// reached, and which roof that is ("mem" or "fp").
std::string formatScheduleProfile(const Artifact &artifact,
                                  ProgramKind program,
                                  const ScheduleTiming &timing,
                                  int64_t runsPerStep, size_t top,
                                  const DevicePeaks &peaks = {});

} // namespace kiln::rt

#endif // KILN_RUNTIME_METRICS_SCHEDULEPROFILE_H
