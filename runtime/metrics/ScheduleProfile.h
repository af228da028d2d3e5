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

// One schedule entry as the tables (and the trace, Trace.h) name it:
// "gemm 1024x384x128 x4 (A^T)", "kernel k_1a2b [kiln.gelu]" or
// "all_reduce mean of 3 buffers over 'data'"; `gemmFlops` gets a GEMM's
// FLOPs per run (0 otherwise).
std::string describeScheduleEntry(const schema::Artifact &artifact,
                                  const schema::Step &step, double *gemmFlops);

// Formats the `top` most expensive schedule entries of `program` given the
// seconds per entry over its timed runs (Backend::entryTiming), per
// training step (the program runs `runsPerStep` times a step: grad_accum K
// for "step"), then the same time summed per kernel / GEMM shape and per
// model-file line.
std::string formatScheduleProfile(const Artifact &artifact,
                                  ProgramKind program,
                                  const ScheduleTiming &timing,
                                  int64_t runsPerStep, size_t top);

} // namespace kiln::rt

#endif // KILN_RUNTIME_METRICS_SCHEDULEPROFILE_H
