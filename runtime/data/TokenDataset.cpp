//===- TokenDataset.cpp - Training tokens from a text file or llm.c shard -===//

#include "runtime/data/TokenDataset.h"

#include "runtime/Hash.h"

#include "runtime/FileIO.h"
#include "runtime/data/LlmcShard.h"

#include <algorithm>
#include <cstring>

namespace kiln::rt {

using data::readInt32LE;

StatusOr<TokenDataset> TokenDataset::open(const std::string &path) {
  auto bytes = readFileBytes(path);
  if (!bytes.ok()) {
    if (bytes.status().code() == StatusCode::kNotFound)
      return notFound("data file ", path, ": no such file");
    return bytes.status();
  }
  return fromBytes(*bytes, path);
}

StatusOr<TokenDataset> TokenDataset::fromBytes(const std::vector<uint8_t> &bytes,
                                               const std::string &path) {
  TokenDataset data;
  data.path_ = path;
  constexpr size_t kHeaderBytes = kShardHeaderInts * sizeof(int32_t);
  const bool startsWithMagic =
      bytes.size() >= 4 && readInt32LE(bytes.data()) == kShardMagic;
  const bool namedShard =
      path.size() >= 4 && path.compare(path.size() - 4, 4, ".bin") == 0;
  if (namedShard && !startsWithMagic) {
    if (bytes.size() < 4)
      return dataLoss("data file ", path, ": llm.c token shard is truncated (",
                      bytes.size(), " bytes, the header alone is ",
                      kHeaderBytes, ")");
    return invalidArgument("data file ", path,
                           ": not an llm.c token shard: magic ",
                           readInt32LE(bytes.data()), ", expected ", kShardMagic,
                           " (a .bin file must be a shard; byte-level text "
                           "needs another extension)");
  }
  if (!startsWithMagic) {
    data.format_ = Format::kText;
    data.tokens_.assign(bytes.begin(), bytes.end()); // uint8 -> int32
    return data;
  }

  data.format_ = Format::kShard;
  // The GPT-2 magic (the only one accepted here) fixes uint16 tokens.
  KILN_ASSIGN_OR_RETURN(
      data::LlmcShardLayout layout,
      data::parseLlmcShardHeader(bytes.data(), bytes.size(), path));
  const int64_t count = layout.tokenCount;
  data.tokens_.resize(static_cast<size_t>(count));
  const uint8_t *p = bytes.data() + kHeaderBytes;
  for (int64_t i = 0; i < count; ++i)
    data.tokens_[i] = int32_t(p[2 * i]) | int32_t(p[2 * i + 1]) << 8;
  return data;
}

Status TokenDataset::checkFits(int64_t batch, int64_t seq,
                               int64_t vocabSize) const {
  if (size() < seq + 2)
    return invalidArgument("data file ", path_, " has ", size(),
                           " tokens, but a sequence of ", seq,
                           " needs at least ", seq + 2);
  if (vocabSize > 0) {
    auto it = std::max_element(tokens_.begin(), tokens_.end());
    if (*it >= vocabSize)
      return invalidArgument("data file ", path_, " has token id ", *it,
                             " at position ", it - tokens_.begin(),
                             ", but the model's vocabulary has ", vocabSize,
                             " tokens");
  }
  (void)batch; // any batch size wraps around the data
  return okStatus();
}

int64_t TokenDataset::rowOffset(uint64_t seed, int64_t step, int64_t row,
                                int64_t batch, int64_t seq) const {
  // Unsigned arithmetic wraps mod 2^64, exactly as the documented formula.
  uint64_t index = static_cast<uint64_t>(step) * static_cast<uint64_t>(batch) +
                   static_cast<uint64_t>(row);
  uint64_t modulus = static_cast<uint64_t>(size() - seq - 1);
  return static_cast<int64_t>(splitMix64(splitMix64(seed) + index) % modulus);
}

void TokenDataset::fillBatch(uint64_t seed, int64_t step, int64_t batch,
                             int64_t seq, int32_t *inputs,
                             int32_t *targets) const {
  for (int64_t r = 0; r < batch; ++r) {
    int64_t offset = rowOffset(seed, step, r, batch, seq);
    std::memcpy(inputs + r * seq, tokens_.data() + offset,
                seq * sizeof(int32_t));
    std::memcpy(targets + r * seq, tokens_.data() + offset + 1,
                seq * sizeof(int32_t));
  }
}

} // namespace kiln::rt
