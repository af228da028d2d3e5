//===- Trainer.h - The kiln-run training loop ------------------------------===//
//
// The runtime's one entry point for kiln-run: load and verify the artifact,
// open the data, JIT the kernels, allocate and initialise buffers, then run
// `steps` training steps, reporting metrics and writing the requested
// safetensors dumps. Every failure comes back as a Status; the tool only
// prints it.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_TRAINER_H
#define KILN_RUNTIME_TRAINER_H

#include "runtime/RunOptions.h"
#include "runtime/Status.h"

#include <cstdio>

namespace kiln::rt {

struct TrainSummary {
  int64_t steps = 0;
  double finalLoss = 0;
  double tokensPerSecond = 0; // over all steps, kernel compilation excluded
  double flopsPerSecond = 0;  // model FLOPs (Artifact.flops_per_step) per
                              // second; 0 when the artifact does not say
  bool kernelCacheHit = false;
  double kernelLoadSeconds = 0;
};

// Runs training as `options` say. Progress and informational lines go to
// `out` (unless options.quiet); the caller prints the summary.
StatusOr<TrainSummary> runTraining(const RunOptions &options, FILE *out);

} // namespace kiln::rt

#endif // KILN_RUNTIME_TRAINER_H
