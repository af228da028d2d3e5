//===- Trace.h - A timeline of the run as Chrome trace events -------------===//
//
// kiln-run --trace FILE.json: the steps of --trace-steps as Chrome
// trace-event JSON, which Perfetto (ui.perfetto.dev) and chrome://tracing
// open. One process, two tracks: "compute" (every kernel and GEMM) and
// "communication" (the collectives; on the CPU they run between kernels,
// on their own track so they stand out). On the compute track, each traced
// step is a slice enclosing one slice per program run ("step" once per
// micro-batch, "update", "eval"), which encloses one slice per schedule
// entry, named like --profile's rows ("kernel k_... [ops]", "gemm MxNxK")
// with the model-file line, the program and the entry index in its args;
// between the runs, each copy of the step's inputs ("copy input:tokens"). A
// counter track "memory" gives the peak memory after each traced step (the
// device's on CUDA, the process's resident memory on the CPU).
//
// Timing: the backends time entries as --profile does (CPU: a host clock
// around each call; CUDA: events, the graph replaced by launches while a
// step is traced) and report them here on this recorder's clock (now()),
// in seconds; slices are written in microseconds.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_METRICS_TRACE_H
#define KILN_RUNTIME_METRICS_TRACE_H

#include "runtime/Artifact.h"
#include "runtime/Status.h"

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::rt {

class TraceRecorder {
public:
  // `title` names the process in the viewer ("kiln-run model.kart (cpu)").
  TraceRecorder(const Artifact &artifact, std::string title);

  // Seconds since the recorder was made (a steady clock).
  double now() const;

  // Whether the current step is traced: the backends time and report
  // entries only then.
  bool active() const { return active_; }

  // The Trainer brackets every traced step.
  void beginStep(int64_t step);
  void endStep(int64_t peakMemoryBytes);

  // One run of `program` and one of its schedule entries, from the backend.
  // `timing`, where the run was not timed as --profile times it, says how it
  // was (args.timing): CUDA's first run of a program with attention calls
  // times each call against cuDNN and is timed on the host clock; --profile
  // leaves that run out, and so should a comparison with it.
  void program(ProgramKind program, double start, double end,
               const char *timing = nullptr);
  void entry(ProgramKind program, size_t index, double start, double end);
  // One copy of a step's input (`buffer`, `bytes`) into the backend's
  // memory, between program runs (the CPU's arena; on CUDA the host's
  // copy and the upload it enqueues, which the next run waits for).
  void copy(uint32_t buffer, int64_t bytes, double start, double end);

  // How many steps were traced.
  int64_t tracedSteps() const { return tracedSteps_; }

  // Writes the JSON (atomically: a reader never sees half a file).
  Status write(const std::string &path) const;

private:
  enum class Kind { kStep, kProgram, kEntry, kMemory, kCopy };
  struct Event {
    Kind kind;
    int64_t step = 0;          // kStep, kProgram: the training step
    ProgramKind program = ProgramKind::kStep;
    int64_t index = 0;         // kEntry: schedule entry; kProgram: micro-batch;
                               // kCopy: the buffer
    double start = 0, end = 0; // seconds on now()'s clock (kMemory: start)
    int64_t bytes = 0;         // kMemory, kCopy
    const char *timing = nullptr; // kProgram: see program()
  };

  const Artifact &artifact_;
  std::string title_;
  std::chrono::steady_clock::time_point origin_;
  std::vector<Event> events_;
  bool active_ = false;
  int64_t step_ = 0;
  double stepStart_ = 0;
  int64_t microBatch_ = 0;
  int64_t tracedSteps_ = 0;
};

} // namespace kiln::rt

#endif // KILN_RUNTIME_METRICS_TRACE_H
