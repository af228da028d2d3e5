//===- WindowPermutation.cpp - A seeded shuffle of [0, n) in O(1) memory --===//

#include "runtime/data/WindowPermutation.h"

#include "runtime/Hash.h"

#include <cassert>

namespace kiln::rt::data {

namespace {

// Salt so the shuffle key differs from other splitMix64(seed) streams.
constexpr uint64_t kShuffleSalt = 0x73687566666c6521ull; // "shuffle!"

} // namespace

WindowPermutation::WindowPermutation(uint64_t size, uint64_t seed,
                                     uint64_t epoch)
    : size_(size) {
  assert(size > 0 && "a permutation of nothing");
  int bits = 0;
  while (bits < 64 && (uint64_t(1) << bits) < size)
    ++bits;
  halfBits_ = bits <= 2 ? 1 : (bits + 1) / 2;
  halfMask_ = halfBits_ >= 32 ? 0xffffffffull : (uint64_t(1) << halfBits_) - 1;
  uint64_t epochKey = splitMix64(splitMix64(seed ^ kShuffleSalt) + epoch);
  for (int r = 0; r < kRounds; ++r)
    roundKeys_[r] = splitMix64(epochKey + uint64_t(r));
}

uint64_t WindowPermutation::network(uint64_t x) const {
  uint64_t left = (x >> halfBits_) & halfMask_;
  uint64_t right = x & halfMask_;
  for (int r = 0; r < kRounds; ++r) {
    uint64_t mixed = left ^ (splitMix64(roundKeys_[r] ^ right) & halfMask_);
    left = right;
    right = mixed;
  }
  return (left << halfBits_) | right;
}

uint64_t WindowPermutation::operator()(uint64_t position) const {
  assert(position < size_);
  uint64_t x = network(position);
  while (x >= size_)
    x = network(x);
  return x;
}

} // namespace kiln::rt::data
