//===- Trainer.h - The kiln-run training loop ------------------------------===//
//
// The runtime's one entry point for kiln-run: load and verify the artifact,
// open the data, JIT the kernels, allocate and initialise buffers (or
// restore them from a checkpoint), then run the training steps, reporting
// metrics, validating, checkpointing and stopping cleanly on SIGINT/SIGTERM
// or on a run of non-finite steps. Every failure comes back as a Status; the
// tool only prints it.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_TRAINER_H
#define KILN_RUNTIME_TRAINER_H

#include "runtime/RunOptions.h"
#include "runtime/Status.h"

#include <cstdio>
#include <string>

namespace kiln::rt {

struct TrainSummary {
  int64_t steps = 0;          // the last step completed (counting resumed ones)
  int64_t stepsThisRun = 0;   // steps run by this process
  double finalLoss = 0;
  double tokensPerSecond = 0; // over this run's steps, kernel compilation excluded
  // Samples (batch rows, times accumulation) per second, same window: the
  // throughput of models whose "tokens" are padded slots, e.g. TSP cities.
  double samplesPerSecond = 0;
  double flopsPerSecond = 0;  // model FLOPs (Artifact.flops_per_step, times the
                              // ranks) per second; 0 when the artifact does not say
  bool kernelCacheHit = false;
  double kernelLoadSeconds = 0;
  int64_t skippedSteps = 0;   // updates skipped by the non-finite guard
  std::string stopReason;     // empty: all steps ran; else why it stopped early
  bool failed = false;        // stopped by non-finite steps (exit status 1)
  bool lead = true;           // rank 0 (or the only process): prints the summary
  int ranks = 1;              // data-parallel processes
  double communicatedBytesPerStep = 0; // per rank: the artifact's gradient buckets
                                     // and the 4-byte stop flag
};

// Runs training as `options` say. Progress and informational lines go to
// `out` (unless options.quiet); the caller prints the summary.
StatusOr<TrainSummary> runTraining(const RunOptions &options, FILE *out);

} // namespace kiln::rt

#endif // KILN_RUNTIME_TRAINER_H
