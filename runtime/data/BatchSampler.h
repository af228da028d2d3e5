//===- BatchSampler.h - Seeded, resumable batches of training windows -----===//
//
// Epoch e visits the windows of the training range in the order of
// WindowPermutation(range size, seed, e). A batch is the next `batch` windows
// of that stream; an epoch boundary may fall inside a batch, which simply
// continues into epoch e + 1. Row r of a batch is
//   window  = range.begin + permutation_e(index)   (index, e advancing)
//   tokens  [r, 0:seq] = window[0:seq]
//   targets [r, 0:seq] = window[1:seq+1]
// The position {epoch, index} after any batch fully determines all later
// batches, so create(..., position()) resumes bit-exactly.
//
// Data parallelism: with a Shard {rank, count}, the stream is cut into
// global batches of count * batch windows and rank r fills its batch with
// rows [r * batch, (r + 1) * batch) of each; the position advances by the
// whole global batch on every rank. So N ranks of batch B read exactly the
// windows one process of batch N * B reads, and the position stays global
// (a checkpoint resumes on any number of ranks).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_DATA_BATCHSAMPLER_H
#define KILN_RUNTIME_DATA_BATCHSAMPLER_H

#include "runtime/Status.h"
#include "runtime/data/DataPosition.h"
#include "runtime/data/TokenWindows.h"
#include "runtime/data/WindowPermutation.h"

#include <cstdint>

namespace kiln::rt::data {

// This process's share of each global batch (see above).
struct Shard {
  int64_t rank = 0;
  int64_t count = 1;
};

class BatchSampler {
public:
  // Errors: batch <= 0, an empty or out-of-bounds range, or a start index
  // past the range (a position saved against different data).
  static StatusOr<BatchSampler> create(TokenWindows windows, WindowRange range,
                                       int64_t batch, uint64_t seed,
                                       DataPosition start = {},
                                       Shard shard = {});

  // Fills tokens and targets, each [batch, seq] int32, and advances the
  // position. On an error (a token id >= vocab) the position is unchanged.
  Status fill(int32_t *tokens, int32_t *targets);

  // The position of the next window to be read.
  DataPosition position() const { return position_; }

  // The window (file order) read at `position`.
  uint64_t windowAt(DataPosition position) const;

  int64_t batch() const { return batch_; }
  int64_t seq() const { return windows_.seq(); }
  const WindowRange &range() const { return range_; }
  const TokenWindows &windows() const { return windows_; }

private:
  BatchSampler(TokenWindows windows, WindowRange range, int64_t batch,
               uint64_t seed, DataPosition start, Shard shard)
      : windows_(std::move(windows)), range_(range), batch_(batch), seed_(seed),
        shard_(shard), position_(start),
        permutation_(range.size(), seed, start.epoch) {}

  const WindowPermutation &permutationFor(uint64_t epoch);

  TokenWindows windows_;
  WindowRange range_;
  int64_t batch_ = 0;
  uint64_t seed_ = 0;
  Shard shard_;
  DataPosition position_;
  WindowPermutation permutation_; // of epoch permutationEpoch_
  uint64_t permutationEpoch_ = 0;
};

} // namespace kiln::rt::data

#endif // KILN_RUNTIME_DATA_BATCHSAMPLER_H
