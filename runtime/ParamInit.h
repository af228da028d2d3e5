//===- ParamInit.h - Deterministic parameter initialisation ---------------===//
//
// kiln-run initialises parameters itself (the artifact only says how), and
// the oracle tests must be able to reproduce it. Each parameter draws from
// its own std::mt19937_64 seeded by
//     splitMix64(seed) ^ fnv1a64(parameter name),
// so the values depend only on --seed and the name: reordering, adding or
// removing other parameters never changes them. Normal values come from
// Box-Muller in double precision, two per pair of draws:
//     u1 = ((r1 >> 11) + 1) * 2^-53   in (0, 1]
//     u2 =  (r2 >> 11)      * 2^-53   in [0, 1)
//     z0 = sqrt(-2 ln u1) cos(2 pi u2), z1 = sqrt(-2 ln u1) sin(2 pi u2)
// and value[i] = float(std * z).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_PARAMINIT_H
#define KILN_RUNTIME_PARAMINIT_H

#include "runtime/schema/artifact_generated.h"

#include <cstdint>
#include <string_view>

namespace kiln::rt {

uint64_t parameterSeed(uint64_t seed, std::string_view name);

// Writes `count` f32 values for the parameter `name` as `init` describes.
void initializeParameter(const schema::Initializer &init,
                         std::string_view name, uint64_t seed, float *out,
                         int64_t count);

} // namespace kiln::rt

#endif // KILN_RUNTIME_PARAMINIT_H
