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

} // namespace kiln::rt

#endif // KILN_RUNTIME_HASH_H
