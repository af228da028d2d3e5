//===- LrSchedule.h - Learning-rate schedules of kiln-run -------------------===//
//
// The learning rate of every step is a pure function of the 1-based step
// number and the `--schedule` flags, so a resumed run uses exactly the rates
// the uninterrupted one would have, and the JSONL reports the rate the
// "update" program read back from its buffer. The function is plain
// arithmetic on doubles with no library calls beyond cos(), so the CUDA
// backend can compile the same definition into a device function that reads
// the step counter in device memory (CUDA-graph replay), and the CPU backend
// (where host and device are one) calls it before each update.
//
// Every schedule starts with `warmup` steps rising linearly to `peak`
// (step s <= warmup: peak * s / warmup), then over the steps up to `total`:
//   constant  peak
//   cosine    min + (peak - min) * (1 + cos(pi * p)) / 2,  p = (s - warmup) / (total - warmup)
//   linear    peak - (peak - min) * p
//   wsd       warmup-stable-decay: peak until the last `decayFraction * total`
//             steps, then linear to min over them
// with min = peak * minRatio, and min after `total` (constant: peak).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_LRSCHEDULE_H
#define KILN_RUNTIME_LRSCHEDULE_H

#include "runtime/Status.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::rt {

enum class LrScheduleKind { kConstant, kCosine, kLinear, kWsd };

struct LrSchedule {
  LrScheduleKind kind = LrScheduleKind::kConstant;
  double peak = 1e-3;          // --lr
  int64_t warmup = 0;          // --warmup
  int64_t total = 0;           // --decay-steps (default: --steps)
  double minRatio = 0.0;       // --min-lr-ratio
  double decayFraction = 0.2;  // --decay-fraction (wsd)
};

// The learning rate of 1-based step `step`.
inline double learningRateAt(const LrSchedule &s, int64_t step) {
  if (s.warmup > 0 && step <= s.warmup)
    return s.peak * static_cast<double>(step) / static_cast<double>(s.warmup);
  if (s.kind == LrScheduleKind::kConstant)
    return s.peak;
  const double min = s.peak * s.minRatio;
  if (step >= s.total)
    return min;
  if (s.kind == LrScheduleKind::kWsd) {
    int64_t decay = static_cast<int64_t>(std::llround(s.decayFraction *
                                                      static_cast<double>(s.total)));
    int64_t start = s.total - decay;
    if (decay <= 0 || step <= start)
      return s.peak;
    double q = static_cast<double>(step - start) / static_cast<double>(decay);
    return s.peak - (s.peak - min) * q;
  }
  double span = static_cast<double>(s.total - s.warmup);
  double p = span > 0 ? static_cast<double>(step - s.warmup) / span : 1.0;
  if (s.kind == LrScheduleKind::kCosine)
    return min + (s.peak - min) * 0.5 * (1.0 + std::cos(M_PI * p));
  return s.peak - (s.peak - min) * p; // linear
}

StatusOr<LrScheduleKind> parseLrScheduleKind(std::string_view name);
const char *lrScheduleKindName(LrScheduleKind kind);

// Checks the combination (warmup and decay fraction within total, ratios in
// [0, 1]); messages name the flag.
Status validateLrSchedule(const LrSchedule &schedule);

} // namespace kiln::rt

#endif // KILN_RUNTIME_LRSCHEDULE_H
