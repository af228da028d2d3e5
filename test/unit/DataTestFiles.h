//===- DataTestFiles.h - Token files written by the data layer's tests ----===//
//
// Builds the bytes of llm.c shards and nanoGPT files from token lists, so a
// test states its tokens and reads them back through the real open path.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNIT_DATATESTFILES_H
#define KILN_TEST_UNIT_DATATESTFILES_H

#include "runtime/data/LlmcShard.h"

#include <cstdint>
#include <vector>

namespace kiln::rt::test {

inline void appendLE(std::vector<uint8_t> &bytes, uint32_t value, int width) {
  for (int b = 0; b < width; ++b)
    bytes.push_back(static_cast<uint8_t>(value >> (8 * b)));
}

// An llm.c shard holding `tokens`. version/count < 0 mean "the right one".
inline std::vector<uint8_t> llmcShardBytes(const std::vector<uint32_t> &tokens,
                                           int32_t magic = data::kLlmcGpt2Magic,
                                           int32_t version = -1,
                                           int32_t count = -1) {
  const bool llama = magic == data::kLlmcLlama3Magic;
  if (version < 0)
    version = llama ? data::kLlmcLlama3Version : data::kLlmcGpt2Version;
  if (count < 0)
    count = static_cast<int32_t>(tokens.size());
  std::vector<uint8_t> bytes;
  std::vector<int32_t> header(data::kLlmcHeaderInts, 0);
  header[0] = magic;
  header[1] = version;
  header[2] = count;
  for (int32_t value : header)
    appendLE(bytes, static_cast<uint32_t>(value), 4);
  for (uint32_t token : tokens)
    appendLE(bytes, token, llama ? 4 : 2);
  return bytes;
}

inline std::vector<uint8_t> nanoGptBytes(const std::vector<uint32_t> &tokens) {
  std::vector<uint8_t> bytes;
  for (uint32_t token : tokens)
    appendLE(bytes, token, 2);
  return bytes;
}

// 0, 1, ..., n-1 plus `offset`.
inline std::vector<uint32_t> countingTokens(uint32_t n, uint32_t offset = 0) {
  std::vector<uint32_t> tokens(n);
  for (uint32_t i = 0; i < n; ++i)
    tokens[i] = offset + i;
  return tokens;
}

} // namespace kiln::rt::test

#endif // KILN_TEST_UNIT_DATATESTFILES_H
