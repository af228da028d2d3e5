//===- ScheduleProfile.h - Where the step's time goes (kiln-run --profile) ===//
//
// Until the Chrome trace arrives, `kiln-run --profile` (CPU: host timers;
// CUDA: events) answers the first performance question — which schedule
// entries dominate the step — with tables attributing time to kernels and
// GEMMs and to the model-file line each came from, so slow kernels can be
// traced back to codegen and to the model.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_METRICS_SCHEDULEPROFILE_H
#define KILN_RUNTIME_METRICS_SCHEDULEPROFILE_H

#include "runtime/Artifact.h"

#include <string>
#include <vector>

namespace kiln::rt {

// Formats the `top` most expensive schedule entries of `program` given the
// accumulated seconds per entry (Backend::entrySeconds) over `steps`
// training steps (a "step" program with grad_accum K ran K times per step),
// then the same time summed per kernel / GEMM shape and per model-file line.
std::string formatScheduleProfile(const Artifact &artifact,
                                  ProgramKind program,
                                  const std::vector<double> &entrySeconds,
                                  int64_t steps, size_t top);

} // namespace kiln::rt

#endif // KILN_RUNTIME_METRICS_SCHEDULEPROFILE_H
