//===- ParamInit.cpp - Deterministic parameter initialisation -------------===//

#include "runtime/ParamInit.h"

#include "runtime/Hash.h"

#include <cmath>
#include <random>

namespace kiln::rt {

uint64_t parameterSeed(uint64_t seed, std::string_view name) {
  return splitMix64(seed) ^ fnv1a64(name);
}

void initializeParameter(const schema::Initializer &init,
                         std::string_view name, uint64_t seed, float *out,
                         int64_t count) {
  switch (init.kind()) {
  case schema::InitKind_Zeros:
    std::fill(out, out + count, 0.0f);
    return;
  case schema::InitKind_Ones:
    std::fill(out, out + count, 1.0f);
    return;
  case schema::InitKind_Normal:
    break;
  }
  std::mt19937_64 rng(parameterSeed(seed, name));
  const double stddev = init.std();
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  constexpr double kInv53 = 1.0 / 9007199254740992.0; // 2^-53
  for (int64_t i = 0; i < count; i += 2) {
    double u1 = static_cast<double>((rng() >> 11) + 1) * kInv53;
    double u2 = static_cast<double>(rng() >> 11) * kInv53;
    double radius = std::sqrt(-2.0 * std::log(u1));
    out[i] = static_cast<float>(stddev * radius * std::cos(kTwoPi * u2));
    if (i + 1 < count)
      out[i + 1] = static_cast<float>(stddev * radius * std::sin(kTwoPi * u2));
  }
}

} // namespace kiln::rt
