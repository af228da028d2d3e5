//===- TokenFile.h - One mapped token file and how its tokens are stored --===//
//
// Opens one file of a --data pattern in the requested format (or detects it,
// see DataFormat.h), checks its header and size strictly, and maps it. Tokens
// are decoded on demand from the mapping (little-endian uint8/uint16/uint32),
// never copied, so opening a shard costs O(1) memory and no scan.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_DATA_TOKENFILE_H
#define KILN_RUNTIME_DATA_TOKENFILE_H

#include "runtime/Status.h"
#include "runtime/data/DataFormat.h"
#include "runtime/data/MappedFile.h"

#include <cstdint>
#include <string>

namespace kiln::rt::data {

// The concrete storage of a file: what `auto` resolved to. Files of one
// pattern must all have the same kind.
enum class TokenFileKind {
  kText,       // uint8, no header
  kLlmcGpt2,   // uint16 after a 1024-byte header
  kLlmcLlama3, // uint32 after a 1024-byte header
  kNanoGpt,    // uint16, no header
};

// "byte-level text", "an llm.c GPT-2 shard (uint16 tokens)", ...
const char *describeTokenFileKind(TokenFileKind kind);

class TokenFile {
public:
  // `format` must not be kRandom. Errors name `path` and the problem.
  static StatusOr<TokenFile> open(const std::string &path, DataFormat format);

  const std::string &path() const { return path_; }
  TokenFileKind kind() const { return kind_; }
  int64_t size() const { return tokenCount_; } // tokens
  int tokenBytes() const { return tokenBytes_; }

  // Token `index` (0 <= index < size()), as stored.
  uint32_t token(int64_t index) const {
    const uint8_t *p = tokens_ + index * tokenBytes_;
    switch (tokenBytes_) {
    case 1:
      return p[0];
    case 2:
      return uint32_t(p[0]) | uint32_t(p[1]) << 8;
    default:
      return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 |
             uint32_t(p[3]) << 24;
    }
  }

  // How many tokens the mapped file holds now: fewer than size() when it was
  // cut short since it was opened (the same file, by st_dev and st_ino, is
  // still at path()). A path that names another file now (a shard replaced
  // by rename) or nothing (deleted) leaves the mapping reading the old file,
  // whole: size().
  int64_t tokensOnDiskNow() const;

  // Byte offset of token `index` in the file (header included), for errors.
  int64_t byteOffset(int64_t index) const {
    return headerBytes_ + index * tokenBytes_;
  }

private:
  std::string path_;
  TokenFileKind kind_ = TokenFileKind::kText;
  MappedFile mapping_;
  const uint8_t *tokens_ = nullptr;
  int tokenBytes_ = 1;
  int64_t headerBytes_ = 0;
  int64_t tokenCount_ = 0;
};

} // namespace kiln::rt::data

#endif // KILN_RUNTIME_DATA_TOKENFILE_H
