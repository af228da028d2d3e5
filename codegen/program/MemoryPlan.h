//===- MemoryPlan.h - One arena with an offset per buffer -----------------===//
//
// The static memory plan of an artifact. It works on the step program's
// final buffers and schedules (StepProgram.h: after lowering, when copies,
// reshape views, in-place optimizer results and fused kernels' outputs are
// known), so it is independent of MLIR.
//
// The runtime re-derives liveness from the schedules and rejects any plan
// that lets two live buffers overlap (runtime/MemoryPlanCheck.cpp): the two
// must agree on the rules written in MemoryPlan.cpp's algorithm comment.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_MEMORYPLAN_H
#define KILN_CODEGEN_MEMORYPLAN_H

#include "runtime/schema/artifact_generated.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

struct StepProgram;

// Where one buffer's storage lives in time: entries [first, last] of program
// `program` (both -1 for buffers that live through every program). A
// gradient living from "step" to the end of "update"
// (schema::livesStepToUpdate) starts at `first` of `program` and ends at
// `last` of `untilProgram`.
struct LiveRange {
  int32_t program = -1;
  int64_t first = -1, last = -1;
  int32_t untilProgram = -1; // the program of `last` when not `program`
  bool persistent() const { return program < 0; }
  bool spansPrograms() const { return untilProgram >= 0; }
};

// Bytes of the arena by what they hold; they add up to `peak`.
struct MemoryBreakdown {
  int64_t parameters = 0, gradients = 0, optimizerState = 0, activations = 0,
          workspace = 0, other = 0;
  int64_t peak = 0;
};

struct MemoryPlan {
  std::vector<int64_t> offsets;   // per buffer; -1 for aliases
  std::vector<LiveRange> ranges;  // per storage-owning buffer
  std::vector<int32_t> sharesWith; // in-place reuse: the input whose storage
                                   // an output took, else -1
  std::vector<std::string> locations; // per buffer: where it is first written
  int64_t arenaBytes = 0;
  int64_t persistentBytes = 0; // the persistent region [0, persistentBytes)
  MemoryBreakdown breakdown;
  // The moment the live activations (with the gradients living from step
  // to update) are largest: program, schedule entry, their bytes, and those
  // buffers (storage), largest first.
  int32_t peakProgram = -1;
  int64_t peakEntry = -1;
  int64_t peakLiveBytes = 0;
  std::vector<uint32_t> peakTensors;
  // The call whose Workspace buffers (its scratch, placed among the
  // activations) add up to the most bytes: those bytes, its program and
  // schedule entry (-1: no scratch).
  int64_t largestScratchBytes = 0;
  int32_t scratchProgram = -1;
  int64_t scratchEntry = -1;
};

// The arena of `program`'s buffers over its schedules (the entries'
// StepProgram::accessOf).
MemoryPlan planArena(const StepProgram &program);

// kilnc's report of `program.memory`: the peak, its breakdown and the
// `topTensors` largest tensors live at the peak with their model-file lines.
std::string formatMemorySummary(const StepProgram &program,
                                size_t topTensors = 10);

// --dump-phases-to's memory-plan.txt: every buffer of `program` with its
// offset, bytes, live range and location.
std::string formatMemoryPlan(const StepProgram &program);

} // namespace kiln

#endif // KILN_CODEGEN_MEMORYPLAN_H
