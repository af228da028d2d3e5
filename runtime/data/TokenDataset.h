//===- TokenDataset.h - Training tokens from a text file or llm.c shard ---===//
//
// Two formats:
//   - llm.c token shard: a 256 x int32 header (magic 20240520, version 1,
//     token count at header[2]) followed by `count` uint16 tokens. A file
//     named *.bin must be one: a wrong magic is an error (naming the magic
//     found), not text, since reading a corrupt or foreign shard as bytes
//     would train on garbage without a word. A file of any other name that
//     starts with the magic is a shard too;
//   - anything else: byte-level text, every byte one token (0..255).
// The whole file is held as int32 tokens. Each row of a batch is a window at a
// seeded pseudo-random offset, a pure function of (seed, step, row) with no
// shuffling state, so a run is reproducible and an oracle can rebuild any batch:
//   row r of step s (0-based) starts at
//     o = splitMix64(splitMix64(seed) + s*B + r) mod (N - T - 1),
//   inputs = tokens[o : o+T], targets = tokens[o+1 : o+T+1].
// Random rather than consecutive windows: consecutive ones make neighbouring
// steps all see one region of the file (the upper-case disclaimer of a
// licence, a table), so the gradient is biased by region and the loss swings
// with it; independent windows are the unbiased estimate training assumes.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_DATA_TOKENDATASET_H
#define KILN_RUNTIME_DATA_TOKENDATASET_H

#include "runtime/Status.h"
#include "runtime/data/LlmcShard.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::rt {

constexpr int32_t kShardMagic = data::kLlmcGpt2Magic;
constexpr int32_t kShardVersion = data::kLlmcGpt2Version;
constexpr size_t kShardHeaderInts = data::kLlmcHeaderInts;

class TokenDataset {
public:
  enum class Format { kText, kShard };

  // Loads `path`. Errors name the file: missing, wrong shard magic/version,
  // token count not matching the file size.
  static StatusOr<TokenDataset> open(const std::string &path);
  // Parses in-memory bytes; `path` names the file in messages and, by its
  // extension, decides whether the bytes must be a shard.
  static StatusOr<TokenDataset> fromBytes(const std::vector<uint8_t> &bytes,
                                          const std::string &path);

  // Checks that batches of [batch, seq] can be cut (at least seq + 2
  // tokens) and, when vocabSize > 0, that every token id is below it.
  Status checkFits(int64_t batch, int64_t seq, int64_t vocabSize) const;

  // Token offset of row `row` of step `step`; requires checkFits().
  int64_t rowOffset(uint64_t seed, int64_t step, int64_t row, int64_t batch,
                    int64_t seq) const;

  // Writes the [batch, seq] inputs and targets of step `step`.
  void fillBatch(uint64_t seed, int64_t step, int64_t batch, int64_t seq,
                 int32_t *inputs, int32_t *targets) const;

  Format format() const { return format_; }
  const std::string &path() const { return path_; }
  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }
  const std::vector<int32_t> &tokens() const { return tokens_; }

private:
  std::string path_;
  Format format_ = Format::kText;
  std::vector<int32_t> tokens_;
};

} // namespace kiln::rt

#endif // KILN_RUNTIME_DATA_TOKENDATASET_H
