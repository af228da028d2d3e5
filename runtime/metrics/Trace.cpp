//===- Trace.cpp - A timeline of the run as Chrome trace events -----------===//

#include "runtime/metrics/Trace.h"

#include "runtime/FileIO.h"
#include "runtime/Metrics.h"
#include "runtime/metrics/ScheduleProfile.h"

#include <cstdio>

namespace kiln::rt {

namespace {

constexpr int kComputeTrack = 1, kCommunicationTrack = 2;

// Microseconds with nanosecond digits, the trace format's unit.
std::string micros(double seconds) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.3f", seconds * 1e6);
  return buf;
}

// A complete ("X") slice on `track`.
std::string slice(const std::string &name, const char *category, int track,
                  double start, double end, const std::string &args) {
  return "{\"name\":" + jsonString(name) + ",\"cat\":\"" + category +
         "\",\"ph\":\"X\",\"pid\":1,\"tid\":" + std::to_string(track) +
         ",\"ts\":" + micros(start) + ",\"dur\":" + micros(end - start) +
         (args.empty() ? "" : ",\"args\":{" + args + "}") + "}";
}

std::string metadata(const char *what, int track, const std::string &name) {
  return std::string("{\"name\":\"") + what + "\",\"ph\":\"M\",\"pid\":1" +
         (track ? ",\"tid\":" + std::to_string(track) : "") +
         ",\"args\":{\"name\":" + jsonString(name) + "}}";
}

} // namespace

TraceRecorder::TraceRecorder(const Artifact &artifact, std::string title)
    : artifact_(artifact), title_(std::move(title)),
      origin_(std::chrono::steady_clock::now()) {}

double TraceRecorder::now() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - origin_)
      .count();
}

void TraceRecorder::beginStep(int64_t step) {
  active_ = true;
  step_ = step;
  microBatch_ = 0;
  stepStart_ = now();
}

void TraceRecorder::endStep(int64_t peakMemoryBytes) {
  if (!active_)
    return;
  double end = now();
  events_.push_back({Kind::kStep, step_, ProgramKind::kStep, 0, stepStart_, end, 0});
  events_.push_back({Kind::kMemory, step_, ProgramKind::kStep, 0, end, end, peakMemoryBytes});
  active_ = false;
  ++tracedSteps_;
}

void TraceRecorder::program(ProgramKind program, double start, double end,
                            const char *timing) {
  if (!active_)
    return;
  int64_t microBatch = program == ProgramKind::kStep ? ++microBatch_ : 0;
  events_.push_back({Kind::kProgram, step_, program, microBatch, start, end, 0, timing});
}

void TraceRecorder::entry(ProgramKind program, size_t index, double start, double end) {
  if (active_)
    events_.push_back({Kind::kEntry, step_, program, static_cast<int64_t>(index), start, end, 0});
}

void TraceRecorder::copy(uint32_t buffer, int64_t bytes, double start, double end) {
  if (active_)
    events_.push_back({Kind::kCopy, step_, ProgramKind::kStep, buffer, start, end, bytes});
}

Status TraceRecorder::write(const std::string &path) const {
  std::string out = "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"traced_steps\":" +
                    std::to_string(tracedSteps_) + "},\"traceEvents\":[\n";
  out += metadata("process_name", 0, title_) + ",\n";
  out += metadata("thread_name", kComputeTrack, "compute") + ",\n";
  out += metadata("thread_name", kCommunicationTrack, "communication");
  const int64_t gradAccum = artifact_.gradAccum();
  for (const Event &e : events_) {
    out += ",\n";
    switch (e.kind) {
    case Kind::kStep:
      out += slice("training step " + std::to_string(e.step), "step", kComputeTrack,
                   e.start, e.end, "\"step\":" + std::to_string(e.step));
      break;
    case Kind::kMemory:
      out += "{\"name\":\"memory\",\"ph\":\"C\",\"pid\":1,\"ts\":" + micros(e.start) +
             ",\"args\":{\"peak_bytes\":" + std::to_string(e.bytes) + "}}";
      break;
    case Kind::kProgram: {
      std::string name = artifact_.program(e.program)->name()->str();
      if (e.program == ProgramKind::kStep && gradAccum > 1)
        name += " (micro-batch " + std::to_string(e.index) + " of " +
                std::to_string(gradAccum) + ")";
      out += slice(name, "program", kComputeTrack, e.start, e.end,
                   "\"step\":" + std::to_string(e.step) +
                       (e.timing ? ",\"timing\":" + jsonString(e.timing) : ""));
      break;
    }
    case Kind::kCopy:
      out += slice("copy " + artifact_.describeBuffer(static_cast<uint32_t>(e.index)), "copy",
                   kComputeTrack, e.start, e.end,
                   "\"step\":" + std::to_string(e.step) + ",\"bytes\":" + std::to_string(e.bytes));
      break;
    case Kind::kEntry: {
      const schema::Program &program = *artifact_.program(e.program);
      const schema::Step &step = *program.schedule()->Get(static_cast<uint32_t>(e.index));
      EntryWork work = describeScheduleEntry(artifact_, step);
      const char *category = step.op_as_GemmCall()         ? "gemm"
                             : step.op_as_CollectiveCall() ? "collective"
                                                           : "kernel";
      int track = step.op_as_CollectiveCall() ? kCommunicationTrack : kComputeTrack;
      // Compiler-made constants have no model line.
      std::string args = "\"program\":" + jsonString(program.name()->str()) +
                         ",\"entry\":" + std::to_string(e.index);
      if (step.location() && step.location()->size() > 0)
        args += ",\"line\":" + jsonString(step.location()->str());
      if (work.flops > 0)
        args += ",\"flops\":" + std::to_string(static_cast<int64_t>(work.flops));
      args += ",\"bytes\":" + std::to_string(static_cast<int64_t>(work.bytes));
      out += slice(work.what, category, track, e.start, e.end, args);
      break;
    }
    }
  }
  out += "\n]}\n";
  return writeFileAtomically(path, {out});
}

} // namespace kiln::rt
