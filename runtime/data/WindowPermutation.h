//===- WindowPermutation.h - A seeded shuffle of [0, n) in O(1) memory ----===//
//
// Each epoch visits the n training windows in a pseudo-random order keyed by
// (seed, epoch). Storing a shuffled array of n indices would cost 8n bytes
// (gigabytes for a large corpus) and would have to be rebuilt on resume;
// instead the order is a keyed bijection computed per index:
//
//   1. Let 2k be the smallest even bit count with 2^(2k) >= n (k >= 1), and
//      split x in [0, 2^(2k)) into halves L (high k bits) and R (low k).
//   2. Run kRounds Feistel rounds: (L, R) <- (R, L xor F_r(R)), where
//      F_r(R) = splitMix64(roundKey_r xor R) masked to k bits. Each round is
//      invertible whatever F is, so the network permutes [0, 2^(2k)).
//   3. Cycle-walk: while the result is >= n, apply the network again. Since
//      the network is a permutation of the larger domain, following its cycle
//      from x < n reaches the next member of [0, n) on that cycle, which makes
//      the result a permutation of [0, n). The domain is under 4n, so a walk
//      takes fewer than 4 steps on average.
//
// Round keys are splitMix64 of (seed, epoch, round), so epochs differ and a
// sampler can jump to any (epoch, index) in O(1).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_DATA_WINDOWPERMUTATION_H
#define KILN_RUNTIME_DATA_WINDOWPERMUTATION_H

#include <cstdint>

namespace kiln::rt::data {

class WindowPermutation {
public:
  static constexpr int kRounds = 6;

  // A permutation of [0, size); size must be > 0.
  WindowPermutation(uint64_t size, uint64_t seed, uint64_t epoch);

  uint64_t size() const { return size_; }

  // The index visited at position `position` (< size) of the epoch.
  uint64_t operator()(uint64_t position) const;

private:
  uint64_t network(uint64_t x) const;

  uint64_t size_ = 0;
  int halfBits_ = 1;
  uint64_t halfMask_ = 1;
  uint64_t roundKeys_[kRounds] = {};
};

} // namespace kiln::rt::data

#endif // KILN_RUNTIME_DATA_WINDOWPERMUTATION_H
