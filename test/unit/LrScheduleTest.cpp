//===- LrScheduleTest.cpp - The learning-rate schedules ---------------------===//
//
// Each schedule at the points that define it (end of warmup, middle and end
// of the decay, past the end), computed by hand from the formulas in
// LrSchedule.h. Tolerance 1e-12 relative: double arithmetic on a handful of
// operations, far below any difference a wrong formula would make.
//
//===----------------------------------------------------------------------===//

#include "runtime/LrSchedule.h"

#include <cmath>
#include <gtest/gtest.h>

namespace kiln::rt {
namespace {

LrSchedule schedule(LrScheduleKind kind) {
  LrSchedule s;
  s.kind = kind;
  s.peak = 6e-4;
  s.warmup = 10;
  s.total = 110;
  s.minRatio = 0.1;
  s.decayFraction = 0.2;
  return s;
}

void expectLr(const LrSchedule &s, int64_t step, double expected) {
  EXPECT_NEAR(learningRateAt(s, step), expected, 1e-12 * 6e-4)
      << lrScheduleKindName(s.kind) << " at step " << step;
}

TEST(LrScheduleTest, WarmupIsLinearToThePeak) {
  for (LrScheduleKind kind : {LrScheduleKind::kConstant, LrScheduleKind::kCosine,
                              LrScheduleKind::kLinear, LrScheduleKind::kWsd}) {
    LrSchedule s = schedule(kind);
    expectLr(s, 1, 6e-4 / 10);
    expectLr(s, 5, 6e-4 * 5 / 10);
    expectLr(s, 10, 6e-4);
  }
}

TEST(LrScheduleTest, Constant) {
  LrSchedule s = schedule(LrScheduleKind::kConstant);
  expectLr(s, 11, 6e-4);
  expectLr(s, 1000, 6e-4);
  s.warmup = 0;
  expectLr(s, 1, 6e-4);
}

TEST(LrScheduleTest, CosineDecaysToTheMinimum) {
  LrSchedule s = schedule(LrScheduleKind::kCosine);
  const double min = 6e-5;
  expectLr(s, 60, min + (6e-4 - min) * 0.5); // halfway: cos(pi/2) = 0
  expectLr(s, 35, min + (6e-4 - min) * 0.5 * (1 + std::cos(M_PI * 0.25)));
  expectLr(s, 110, min);
  expectLr(s, 500, min);
}

TEST(LrScheduleTest, LinearDecaysToTheMinimum) {
  LrSchedule s = schedule(LrScheduleKind::kLinear);
  expectLr(s, 60, 6e-4 - (6e-4 - 6e-5) * 0.5);
  expectLr(s, 110, 6e-5);
}

TEST(LrScheduleTest, WarmupStableDecay) {
  LrSchedule s = schedule(LrScheduleKind::kWsd);
  // 20% of 110 = 22 decay steps, starting after step 88.
  expectLr(s, 50, 6e-4);
  expectLr(s, 88, 6e-4);
  expectLr(s, 99, 6e-4 - (6e-4 - 6e-5) * 11.0 / 22.0);
  expectLr(s, 110, 6e-5);
}

TEST(LrScheduleTest, Validation) {
  LrSchedule s = schedule(LrScheduleKind::kCosine);
  EXPECT_TRUE(validateLrSchedule(s).ok());
  s.warmup = 110;
  EXPECT_FALSE(validateLrSchedule(s).ok());
  s = schedule(LrScheduleKind::kCosine);
  s.minRatio = 1.5;
  EXPECT_FALSE(validateLrSchedule(s).ok());
  EXPECT_FALSE(parseLrScheduleKind("exponential").ok());
  EXPECT_EQ(*parseLrScheduleKind("wsd"), LrScheduleKind::kWsd);
}

} // namespace
} // namespace kiln::rt
