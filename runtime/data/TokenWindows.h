//===- TokenWindows.h - A corpus cut into training windows ----------------===//
//
// Training reads windows of seq + 1 tokens: inputs = window[0:seq], targets =
// window[1:seq+1]. Windows start every seq tokens (they share one boundary
// token, so every token is a target exactly once per epoch) and never cross
// from one file into the next, since the end of one shard and the start of
// another are unrelated documents. A file of n tokens holds
// floor((n - 1) / seq) windows; the tail that does not fill one is unused.
//
// Windows are numbered in file order: all windows of file 0, then file 1, ...
// The sampler shuffles those numbers; a validation split takes the last ones.
//
// Token ids are checked against the model's vocabulary as each window is
// read (O(window)), so a bad id is an error naming the file and offset rather
// than an out-of-bounds embedding read, and a many-GB glob is never scanned
// up front.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_DATA_TOKENWINDOWS_H
#define KILN_RUNTIME_DATA_TOKENWINDOWS_H

#include "runtime/Status.h"
#include "runtime/data/TokenCorpus.h"

#include <cstdint>
#include <vector>

namespace kiln::rt::data {

// Windows [begin, end) in file order.
struct WindowRange {
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t size() const { return end - begin; }
  bool operator==(const WindowRange &other) const {
    return begin == other.begin && end == other.end;
  }
};

class TokenWindows {
public:
  // Cuts `corpus` into windows of seq + 1 tokens, checking ids below `vocab`.
  // Errors: seq or vocab not positive, or no file long enough for a window.
  static StatusOr<TokenWindows> create(TokenCorpus corpus, int64_t seq,
                                       int64_t vocab);

  uint64_t size() const { return firstWindow_.back(); }
  WindowRange all() const { return {0, size()}; }
  int64_t seq() const { return seq_; }
  int64_t vocab() const { return vocab_; }
  const TokenCorpus &corpus() const { return corpus_; }

  // File and first token of window `window` (< size()).
  struct Location {
    size_t file = 0;
    int64_t firstToken = 0;
  };
  Location locate(uint64_t window) const;

  // Writes the seq inputs and seq targets of window `window`. An id >= vocab
  // is an error naming the file and token offset; so is a file cut short
  // since it was opened (a fault past its end, or zeros read from the
  // rest of its last page: its size is checked after each window).
  Status read(uint64_t window, int32_t *inputs, int32_t *targets) const;

private:
  Status cutShort(size_t file, int64_t index) const;

  TokenWindows(TokenCorpus corpus, int64_t seq, int64_t vocab)
      : corpus_(std::move(corpus)), seq_(seq), vocab_(vocab) {}

  TokenCorpus corpus_;
  int64_t seq_ = 0;
  int64_t vocab_ = 0;
  // firstWindow_[f] = number of windows in files before f; size numFiles+1.
  std::vector<uint64_t> firstWindow_;
};

} // namespace kiln::rt::data

#endif // KILN_RUNTIME_DATA_TOKENWINDOWS_H
