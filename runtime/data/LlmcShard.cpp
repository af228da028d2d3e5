//===- LlmcShard.cpp - The header of an llm.c token shard -----------------===//

#include "runtime/data/LlmcShard.h"

namespace kiln::rt::data {

int32_t readInt32LE(const uint8_t *bytes) {
  return static_cast<int32_t>(uint32_t(bytes[0]) | uint32_t(bytes[1]) << 8 |
                              uint32_t(bytes[2]) << 16 |
                              uint32_t(bytes[3]) << 24);
}

bool startsWithLlmcMagic(const uint8_t *bytes, size_t size) {
  if (size < sizeof(int32_t))
    return false;
  int32_t magic = readInt32LE(bytes);
  return magic == kLlmcGpt2Magic || magic == kLlmcLlama3Magic;
}

StatusOr<LlmcShardLayout> parseLlmcShardHeader(const uint8_t *bytes,
                                               size_t size,
                                               const std::string &path) {
  if (size < kLlmcHeaderBytes)
    return dataLoss("data file ", path, ": llm.c token shard is truncated (",
                    size, " bytes, the header alone is ", kLlmcHeaderBytes,
                    ")");
  LlmcShardLayout layout;
  layout.magic = readInt32LE(bytes);
  int32_t expectedVersion = 0;
  const char *kind = nullptr;
  if (layout.magic == kLlmcGpt2Magic) {
    expectedVersion = kLlmcGpt2Version;
    layout.tokenBytes = 2;
    kind = "GPT-2, uint16 tokens";
  } else if (layout.magic == kLlmcLlama3Magic) {
    expectedVersion = kLlmcLlama3Version;
    layout.tokenBytes = 4;
    kind = "Llama-3, uint32 tokens";
  } else {
    return invalidArgument("data file ", path,
                           ": not an llm.c token shard: magic ", layout.magic,
                           ", expected ", kLlmcGpt2Magic, " (GPT-2) or ",
                           kLlmcLlama3Magic, " (Llama-3)");
  }
  int32_t version = readInt32LE(bytes + 4);
  if (version != expectedVersion)
    return invalidArgument("data file ", path, ": llm.c token shard version ",
                           version, ", expected ", expectedVersion,
                           " for magic ", layout.magic, " (", kind, ")");
  int32_t count = readInt32LE(bytes + 8);
  // 64-bit arithmetic: a count near 2^31 times 4 bytes must not wrap.
  uint64_t expectedSize =
      kLlmcHeaderBytes + uint64_t(count < 0 ? 0 : count) * layout.tokenBytes;
  if (count < 0)
    return dataLoss("data file ", path, ": llm.c token shard header says ", count,
                    " tokens, a negative count");
  if (expectedSize != size)
    return dataLoss("data file ", path, ": llm.c token shard header says ",
                    count, " tokens (", expectedSize,
                    " bytes), but the file has ", size, " bytes");
  layout.tokenCount = count;
  return layout;
}

} // namespace kiln::rt::data
