//===- LrSchedule.cpp - Learning-rate schedules of kiln-run -----------------===//

#include "runtime/LrSchedule.h"

namespace kiln::rt {

namespace {

constexpr struct {
  LrScheduleKind kind;
  const char *name;
} kKinds[] = {{LrScheduleKind::kConstant, "constant"},
              {LrScheduleKind::kCosine, "cosine"},
              {LrScheduleKind::kLinear, "linear"},
              {LrScheduleKind::kWsd, "wsd"}};

} // namespace

StatusOr<LrScheduleKind> parseLrScheduleKind(std::string_view name) {
  for (const auto &k : kKinds)
    if (name == k.name)
      return k.kind;
  return invalidArgument("--schedule must be constant, cosine, linear or wsd, "
                         "got '", std::string(name), "'");
}

const char *lrScheduleKindName(LrScheduleKind kind) {
  for (const auto &k : kKinds)
    if (kind == k.kind)
      return k.name;
  return "?";
}

Status validateLrSchedule(const LrSchedule &s) {
  if (!(s.minRatio >= 0 && s.minRatio <= 1))
    return invalidArgument("--min-lr-ratio must be in [0, 1], got ",
                           s.minRatio);
  if (!(s.decayFraction >= 0 && s.decayFraction <= 1))
    return invalidArgument("--decay-fraction must be in [0, 1], got ",
                           s.decayFraction);
  if (s.kind != LrScheduleKind::kConstant && s.warmup >= s.total)
    return invalidArgument("--warmup ", s.warmup,
                           " leaves no steps to decay over (the schedule ends "
                           "at step ", s.total, ": --decay-steps or --steps)");
  return okStatus();
}

} // namespace kiln::rt
