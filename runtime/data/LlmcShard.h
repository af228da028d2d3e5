//===- LlmcShard.h - The header of an llm.c token shard -------------------===//
//
// llm.c's data scripts (dev/data/*.py) write token shards as a header of 256
// little-endian int32 followed by the tokens:
//   header[0] magic:   20240520 for GPT-2 shards, 20240801 for Llama-3 shards
//   header[1] version: 1 (GPT-2, uint16 tokens) or 7 (Llama-3, uint32 tokens)
//   header[2] count:   number of tokens after the header
// The file size must be exactly 1024 + count * token bytes: a shard cut short
// by a failed download or a header from another tokenizer is caught here,
// before training starts, with both numbers in the message.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_DATA_LLMCSHARD_H
#define KILN_RUNTIME_DATA_LLMCSHARD_H

#include "runtime/Status.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace kiln::rt::data {

constexpr int32_t kLlmcGpt2Magic = 20240520;
constexpr int32_t kLlmcGpt2Version = 1;
constexpr int32_t kLlmcLlama3Magic = 20240801;
constexpr int32_t kLlmcLlama3Version = 7;
constexpr size_t kLlmcHeaderInts = 256;
constexpr size_t kLlmcHeaderBytes = kLlmcHeaderInts * sizeof(int32_t);

// Where the tokens of a checked shard are.
struct LlmcShardLayout {
  int32_t magic = 0;
  int tokenBytes = 0;     // 2 (GPT-2) or 4 (Llama-3)
  int64_t tokenCount = 0; // header[2]
};

// The little-endian int32 at `bytes`.
int32_t readInt32LE(const uint8_t *bytes);

// True when the file starts with one of the two llm.c magics.
bool startsWithLlmcMagic(const uint8_t *bytes, size_t size);

// Checks the header of the `size` bytes at `bytes` (the whole file `path`):
// a known magic, the version that magic requires, a non-negative count and
// a file size of exactly header + count * token bytes. Errors name the file.
StatusOr<LlmcShardLayout> parseLlmcShardHeader(const uint8_t *bytes,
                                               size_t size,
                                               const std::string &path);

} // namespace kiln::rt::data

#endif // KILN_RUNTIME_DATA_LLMCSHARD_H
