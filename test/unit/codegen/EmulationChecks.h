//===- EmulationChecks.h - Inputs and comparisons of emulation tests ------===//
//
// What the CUDA host-emulation tests share: seeded random inputs and the
// element-by-element comparison of a kernel's results with reference ones
// (NaN and infinities exact, finite values within 2e-5 * max(1, |reference|):
// the CPU kernels sum in double, the CUDA ones in float, and expf/tanhf
// differ by a few ulp).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNIT_CODEGEN_EMULATIONCHECKS_H
#define KILN_TEST_UNIT_CODEGEN_EMULATIONCHECKS_H

#include "KernelRunner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace kiln::test {

// `n` floats uniform in [lo, hi), the same for the same seed.
inline std::vector<float> randomFloats(size_t n, unsigned seed,
                                       float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

// Every result of `actual` against `expected`: integers equal, floats as
// the banner says.
inline void expectClose(const std::vector<HostTensor> &actual,
                        const std::vector<HostTensor> &expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t r = 0; r < expected.size(); ++r) {
    SCOPED_TRACE("result " + std::to_string(r));
    ASSERT_EQ(actual[r].i, expected[r].i);
    ASSERT_EQ(actual[r].f.size(), expected[r].f.size());
    for (size_t k = 0; k < expected[r].f.size(); ++k) {
      float e = expected[r].f[k], a = actual[r].f[k];
      if (std::isnan(e) || std::isinf(e)) {
        EXPECT_TRUE(std::isnan(e) ? std::isnan(a) : a == e)
            << "element " << k << ": " << a << " vs " << e;
        continue;
      }
      EXPECT_NEAR(a, e, 2e-5 * std::max(1.0f, std::fabs(e)))
          << "element " << k;
    }
  }
}

} // namespace kiln::test

#endif // KILN_TEST_UNIT_CODEGEN_EMULATIONCHECKS_H
