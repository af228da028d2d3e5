//===- Liveness.h - Lifetime rules shared by the planner and the checker --===//
//
// codegen's memory planner (codegen/program/MemoryPlan.cpp) places buffers
// by these rules and the runtime's checker (runtime/MemoryPlanCheck.cpp)
// derives them again from the schedules: one header so the two cannot
// drift. Next to artifact.fbs, like BufferRoles.h, so codegen includes it
// without the runtime.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SCHEMA_LIVENESS_H
#define KILN_RUNTIME_SCHEMA_LIVENESS_H

#include "runtime/schema/artifact_generated.h"

#include <cstdint>
#include <string_view>

namespace kiln::schema {

// The programs' places on one timeline: a training step runs "step" (once
// per micro-batch), then "update"; every other program ("eval") runs
// between training steps, so after both. Ties keep the artifact's order.
constexpr int timelineRank(std::string_view program) {
  return program == "step" ? 0 : program == "update" ? 1 : 2;
}

// Whether a gradient lives from its first entry in "step" to the last entry
// of "update" (its bytes free for other programs' activations before and
// after) rather than through every program. With one micro-batch a step
// (grad_accum 1), "step" writes each gradient whole before anything reads
// it, "update" reads it last, and kiln-run reads it (--save-grads, the
// gradient check) before any other program runs. A gradient no other
// program touches and no collective reduces or gathers (data parallelism
// and ZeRO keep theirs persistent, as their overlapped collectives need).
constexpr bool livesStepToUpdate(BufferRole role, int64_t gradAccum,
                                 bool touchedByStepAndUpdateOnly,
                                 bool touchedByCollective) {
  return role == BufferRole_Gradient && gradAccum == 1 &&
         touchedByStepAndUpdateOnly && !touchedByCollective;
}

} // namespace kiln::schema

#endif // KILN_RUNTIME_SCHEMA_LIVENESS_H
