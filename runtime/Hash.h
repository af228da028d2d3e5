//===- Hash.h - A stable 64-bit hash (FNV-1a) -----------------------------===//
//
// Used where a hash must be identical across runs, machines and compilers:
// the JIT cache key (a kernel library compiled yesterday must be found today)
// and the per-parameter RNG seed (initialisation must not depend on the order
// of parameters in the artifact). std::hash gives neither guarantee.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_HASH_H
#define KILN_RUNTIME_HASH_H

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kiln::rt {

// Incremental FNV-1a 64. Feed pieces with update(); a length-prefixed
// updateField() keeps ("ab","c") and ("a","bc") from colliding.
class Fnv1a64 {
public:
  static constexpr uint64_t kOffsetBasis = 0xcbf29ce484222325ull;
  static constexpr uint64_t kPrime = 0x100000001b3ull;

  void update(const void *data, size_t size) {
    const auto *bytes = static_cast<const unsigned char *>(data);
    for (size_t i = 0; i < size; ++i) {
      state_ ^= bytes[i];
      state_ *= kPrime;
    }
  }
  void update(std::string_view text) { update(text.data(), text.size()); }
  void updateField(std::string_view text) {
    uint64_t size = text.size();
    update(&size, sizeof(size));
    update(text);
  }
  uint64_t digest() const { return state_; }

private:
  uint64_t state_ = kOffsetBasis;
};

inline uint64_t fnv1a64(std::string_view text) {
  Fnv1a64 h;
  h.update(text);
  return h.digest();
}

// SplitMix64 finaliser: spreads a weak seed (0, 1, 2, ...) over all 64 bits
// before it is combined with another hash.
inline uint64_t splitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A 64-bit hash of many bytes at memory speed, for checkpoint files (FNV-1a
// takes a byte per multiply, about 1 GB/s: 15 s for a 1B model's optimizer
// state). Four independent lanes each take one 8-byte word of every 32-byte
// block (multiply, rotate, multiply), so the multiplies overlap; the tail
// bytes and the length are folded in at the end. Not cryptographic: it is
// for catching corruption, not tampering.
inline uint64_t contentHash64(const void *data, size_t size) {
  constexpr uint64_t kOdd1 = 0x9e3779b97f4a7c15ull, kOdd2 = 0xc2b2ae3d27d4eb4full;
  auto rotate = [](uint64_t x, int r) { return (x << r) | (x >> (64 - r)); };
  const auto *bytes = static_cast<const unsigned char *>(data);
  uint64_t lanes[4] = {kOdd1, kOdd2, kOdd1 ^ kOdd2, ~kOdd1};
  const size_t blocks = size / 32;
  for (size_t b = 0; b < blocks; ++b)
    for (int l = 0; l < 4; ++l) {
      uint64_t word;
      __builtin_memcpy(&word, bytes + 32 * b + 8 * l, sizeof(word));
      lanes[l] = rotate(lanes[l] + word * kOdd2, 31) * kOdd1;
    }
  uint64_t hash = static_cast<uint64_t>(size) * kOdd1;
  for (int l = 0; l < 4; ++l)
    hash = rotate(hash ^ (rotate(lanes[l], 27) * kOdd1), 13 + 8 * l) * kOdd2;
  for (size_t i = 32 * blocks; i < size; ++i)
    hash = (hash ^ bytes[i]) * Fnv1a64::kPrime;
  hash ^= hash >> 33;
  hash *= kOdd2;
  hash ^= hash >> 29;
  hash *= kOdd1;
  return hash ^ (hash >> 32);
}

} // namespace kiln::rt

#endif // KILN_RUNTIME_HASH_H
