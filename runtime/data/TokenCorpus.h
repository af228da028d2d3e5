//===- TokenCorpus.h - The token files of a --data spec, or random tokens -===//
//
// A corpus is what `--data` names: a glob pattern (dir/fineweb_train_*.bin)
// expanded with glob(3) and sorted bytewise, so every rank and every run sees
// the files in the same order; a single path is a pattern matching itself.
// All files must have one format. The spec "random" (or format random) is a
// virtual file of random tokens (RandomTokens.h).
//
// The corpus is a cheap handle to immutable, shared state (the mappings), so
// samplers, validation sets and the prefetch thread can each hold a copy
// without lifetime rules.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_DATA_TOKENCORPUS_H
#define KILN_RUNTIME_DATA_TOKENCORPUS_H

#include "runtime/Status.h"
#include "runtime/data/DataFormat.h"
#include "runtime/data/TokenFile.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::rt::data {

// The spec that selects random tokens.
constexpr const char *kRandomDataSpec = "random";

class TokenCorpus {
public:
  // Opens `patternOrRandom` in `format`. `vocabForRandom` (> 0) and `seed`
  // are used only by random tokens. Errors: no match (naming the pattern),
  // any file's header or size, mixed formats (naming both files).
  static StatusOr<TokenCorpus> open(const std::string &patternOrRandom,
                                    DataFormat format, int64_t vocabForRandom,
                                    uint64_t seed);

  const std::string &spec() const { return state_->spec; }
  bool isRandom() const { return state_->random; }

  // Files in order (random tokens: one virtual file named "random").
  size_t numFiles() const;
  const std::string &filePath(size_t file) const;
  int64_t fileTokens(size_t file) const;
  int64_t totalTokens() const;

  // Token `index` of file `file`, as stored (before any vocabulary check).
  uint32_t token(size_t file, int64_t index) const;

  // How many of `file`'s tokens its mapped file holds now
  // (TokenFile::tokensOnDiskNow): fewer than fileTokens() once it was cut
  // short; random tokens: fileTokens().
  int64_t tokensOnDiskNow(size_t file) const;

  // Where token `index` of `file` is, for messages: "token offset 7 (byte
  // offset 1038)" for a shard.
  std::string describeOffset(size_t file, int64_t index) const;

  // "3 files of an llm.c GPT-2 shard (uint16 tokens), 300000 tokens".
  std::string describe() const;

private:
  struct State {
    std::string spec;
    bool random = false;
    uint64_t randomKey = 0;
    uint64_t randomVocab = 0;
    std::vector<TokenFile> files;
  };
  explicit TokenCorpus(std::shared_ptr<const State> state)
      : state_(std::move(state)) {}

  std::shared_ptr<const State> state_;
};

// Expands `pattern` with glob(3), sorted bytewise. No match is an error
// naming the pattern.
StatusOr<std::vector<std::string>>
expandDataPattern(const std::string &pattern);

} // namespace kiln::rt::data

#endif // KILN_RUNTIME_DATA_TOKENCORPUS_H
