//===- GradientCheck.h - Finite-difference check of an artifact's gradients ===//
//
// `kiln-run ART --check-grads N` compares the gradients a compiled step
// computes (autodiff + VJPs + kernels) with central finite differences of
// the loss the same step computes. It is how a user checks a new model and
// how our tests check each VJP end to end. The algorithm is independent of
// the artifact: `checkGradients` perturbs float buffers in place and calls a
// loss function, so the unit tests can drive it with planted bugs.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_GRADIENTCHECK_H
#define KILN_RUNTIME_GRADIENTCHECK_H

#include "runtime/RunOptions.h"
#include "runtime/Status.h"

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::rt {

struct GradientCheckOptions {
  int64_t entriesPerParameter = 24; // sampled per parameter (all if fewer)
  uint64_t seed = 0;                // picks the entries
  // Step h of the central difference. The loss is float32: rounding it costs
  // about 6e-8 * |L| absolutely, which the difference divides by 2h, while
  // the truncation error of (L(p+h) - L(p-h)) / 2h is O(h^2) * L'''. With
  // |L| ~ 1..50 and third derivatives ~ 1, h = 1e-2 balances the two near
  // 1e-5..1e-4 per entry; h = 1e-3 would let rounding dominate (1e-4..1e-3),
  // h = 1e-1 truncation (1e-3..1e-2).
  double step = 1e-2;
  // Bound on the norm-wise relative error per parameter (see
  // gradientRelativeError). Correct code lands near 1e-4 with the step above;
  // a wrong VJP — a flipped sign, a missing term, a transposed operand —
  // is wrong by O(1) on the entries it touches, so 1e-2 separates the two
  // by two orders of magnitude either way.
  double tolerance = 1e-2;
};

// One parameter as the check sees it.
struct CheckedParameter {
  std::string name;
  std::vector<int64_t> shape; // row-major, for reporting entries
  float *values = nullptr;    // perturbed in place, always restored exactly
  const float *gradient = nullptr; // analytic d loss / d values, valid after
                                   // each loss evaluation
  int64_t elements = 0;
  // The buffer's shape when the compiler padded it (pad-dims): `shape` and
  // `elements` are then the user's, and sampled entries are mapped into the
  // padded layout (the padding itself is never perturbed). Empty otherwise.
  std::vector<int64_t> storageShape;
};

// The verdict on one parameter.
struct ParameterCheck {
  std::string name;
  std::vector<int64_t> shape;
  int64_t entries = 0;     // entries compared
  double relativeError = 0;
  bool ok = false;
  // Not ok, yet every |finite difference - gradient| is within
  // kResolutionMargin x the report's resolution: at this h the differences
  // cannot tell these gradients from the loss's rounding. Reported as such,
  // not a failure; a larger h (--grad-step) checks them.
  bool belowResolution = false;
  // The entry with the largest |finite difference - gradient|.
  int64_t worstEntry = 0;  // flat index
  double worstFiniteDifference = 0, worstGradient = 0;
};

struct GradientCheckReport {
  double loss = 0; // at the unperturbed parameters
  double step = 0, tolerance = 0;
  // One float32 ulp of the loss over 2h: the smallest nonzero difference a
  // central difference can show. Gradients not well above it (a large
  // model's, ~1e-5) cannot be checked at this h; the report says so.
  double resolution = 0;
  std::vector<ParameterCheck> parameters;

  // Each loss evaluation is float32, off by about an ulp or two of the
  // loss (its last roundings), so a central difference is off by up to
  // (2 + 2) ulps / 2h = 4 x `resolution` from rounding alone.
  static constexpr double kResolutionMargin = 4;

  int64_t failures() const;        // neither ok nor below the resolution
  int64_t belowResolution() const; // not checked at this h
  // No failure, and at least one parameter checked: a run where every
  // parameter was below the resolution checked nothing, and does not pass.
  bool passed() const {
    return failures() == 0 &&
           belowResolution() < static_cast<int64_t>(parameters.size());
  }
};

// min(count, elements) distinct flat indices in [0, elements), ascending,
// drawn (Floyd's algorithm, so a 38M-entry table costs O(count)) from a
// generator seeded by `seed` and the parameter's name: the same entries
// for the same seed whatever the other parameters are.
std::vector<int64_t> sampleEntries(int64_t elements, int64_t count,
                                   uint64_t seed, std::string_view name);

// ||fd - g|| / (||g|| + ||fd|| + 1e-3). Norm-wise rather than per entry, so
// one entry whose gradient is near zero (where any relative error explodes)
// cannot fail a correct parameter; symmetric, so neither side is trusted
// more; the 1e-3 floor makes a parameter whose gradient is zero pass when
// the differences are zero up to rounding.
double gradientRelativeError(const std::vector<double> &finiteDifferences,
                             const std::vector<double> &gradients);

// The loss at the current parameter values; also refreshes every
// CheckedParameter::gradient.
using LossFunction = std::function<StatusOr<double>()>;

// The algorithm:
//   1. sample the entries of every parameter;
//   2. evaluate the loss once at the unperturbed values and keep the
//      analytic gradient of every sampled entry;
//   3. for every sampled entry i: values[i] = p + h, L+; values[i] = p - h,
//      L-; restore p; fd = (L+ - L-) / (float(p + h) - float(p - h)) — the
//      denominator is the step actually taken after rounding to float;
//   4. per parameter, compare fd with the gradients norm-wise.
StatusOr<GradientCheckReport>
checkGradients(const std::vector<CheckedParameter> &parameters,
               const LossFunction &loss, const GradientCheckOptions &options);

// One line per parameter (ok, FAIL, or below the resolution), then
// "gradient check: PASS (...)", "gradient check: FAIL (k of n parameters)"
// or "gradient check: NOTHING CHECKED (...)".
std::string formatGradientCheckReport(const GradientCheckReport &report);

// kiln-run --check-grads: loads the artifact, opens the data if the model
// has inputs, initialises the parameters from options.seed, fixes the batch
// of step 0 and checks every parameter with options.checkGrads entries,
// every loss evaluation being one run of the "step" program. The
// kernel load line goes to `out` unless options.quiet.
StatusOr<GradientCheckReport> runGradientCheck(const RunOptions &options,
                                               FILE *out);

} // namespace kiln::rt

#endif // KILN_RUNTIME_GRADIENTCHECK_H
