//===- RandomTokens.h - Counter-based random token ids for benchmarks -----===//
//
// `--data random` trains on uniformly random token ids, so a benchmark needs
// no data set. The tokens form a virtual corpus of kRandomCorpusTokens tokens
// in which token i is a pure function of (seed, i):
//   token(i) = splitMix64(splitMix64(seed ^ kRandomStreamSalt) + i) mod vocab
// It is cut into windows and shuffled exactly like a file, so positions,
// resume and validation behave the same, and it costs no memory at all.
// (The modulo bias is below vocab / 2^64, far under anything measurable.)
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_DATA_RANDOMTOKENS_H
#define KILN_RUNTIME_DATA_RANDOMTOKENS_H

#include "runtime/Hash.h"

#include <cstdint>

namespace kiln::rt::data {

// 2^32 tokens: more than any benchmark runs through, so an epoch boundary
// never falls inside a measurement.
constexpr int64_t kRandomCorpusTokens = int64_t(1) << 32;

// Keeps the token stream independent of other users of splitMix64(seed)
// (the training sampler keys its shuffle with the same seed).
constexpr uint64_t kRandomStreamSalt = 0x72616e646f6d746bull; // "randomtk"

inline uint64_t randomTokenKey(uint64_t seed) {
  return splitMix64(seed ^ kRandomStreamSalt);
}

// Token `index` of the random corpus keyed by randomTokenKey(seed).
inline uint32_t randomToken(uint64_t key, uint64_t index, uint64_t vocab) {
  return static_cast<uint32_t>(splitMix64(key + index) % vocab);
}

} // namespace kiln::rt::data

#endif // KILN_RUNTIME_DATA_RANDOMTOKENS_H
