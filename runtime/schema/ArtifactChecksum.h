//===- ArtifactChecksum.h - The integrity trailer of a .kart file ---------===//
//
// A .kart file is the flatbuffer followed by a 16-byte trailer:
//
//   bytes [0, n)      the flatbuffer (artifact.fbs, identifier "KART")
//   bytes [n, n+4)    "KSUM"
//   bytes [n+4, n+8)  zero
//   bytes [n+8, n+16) FNV-1a 64 of bytes [0, n), little-endian
//
// Why: the flatbuffers verifier proves the structure is safe to read and the
// content checks prove indices and sizes are consistent, but a flipped byte
// inside a kernel's source or a float of a constant passes both and would run
// as wrong code or wrong numbers. The checksum turns every such corruption
// into a clear error before anything runs. Shared by the writer (codegen) and
// the reader (runtime/Artifact); header-only and dependency-free so codegen
// can include it without the runtime.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SCHEMA_ARTIFACTCHECKSUM_H
#define KILN_RUNTIME_SCHEMA_ARTIFACTCHECKSUM_H

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace kiln::schema {

constexpr char kChecksumMagic[4] = {'K', 'S', 'U', 'M'};
constexpr size_t kChecksumTrailerBytes = 16;

// FNV-1a 64 of `size` bytes.
inline uint64_t artifactChecksum(const uint8_t *data, size_t size) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < size; ++i) {
    hash ^= data[i];
    hash *= 0x100000001b3ull;
  }
  return hash;
}

// The trailer for a flatbuffer of `size` bytes.
inline std::string checksumTrailer(const uint8_t *data, size_t size) {
  std::string trailer(kChecksumTrailerBytes, '\0');
  std::memcpy(&trailer[0], kChecksumMagic, sizeof(kChecksumMagic));
  uint64_t hash = artifactChecksum(data, size);
  for (int i = 0; i < 8; ++i)
    trailer[8 + i] = static_cast<char>((hash >> (8 * i)) & 0xff);
  return trailer;
}

// Reads the trailer at the end of `size` bytes. Returns false when there is
// none (too short, or no "KSUM"); otherwise sets the stored checksum.
inline bool readChecksumTrailer(const uint8_t *data, size_t size,
                                uint64_t &stored) {
  if (size < kChecksumTrailerBytes)
    return false;
  const uint8_t *trailer = data + size - kChecksumTrailerBytes;
  if (std::memcmp(trailer, kChecksumMagic, sizeof(kChecksumMagic)) != 0)
    return false;
  stored = 0;
  for (int i = 0; i < 8; ++i)
    stored |= static_cast<uint64_t>(trailer[8 + i]) << (8 * i);
  return true;
}

} // namespace kiln::schema

#endif // KILN_RUNTIME_SCHEMA_ARTIFACTCHECKSUM_H
