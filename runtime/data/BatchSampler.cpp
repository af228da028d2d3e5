//===- BatchSampler.cpp - Seeded, resumable batches of training windows ---===//

#include "runtime/data/BatchSampler.h"

namespace kiln::rt::data {

StatusOr<BatchSampler> BatchSampler::create(TokenWindows windows,
                                            WindowRange range, int64_t batch,
                                            uint64_t seed, DataPosition start,
                                            Shard shard) {
  if (batch <= 0)
    return invalidArgument("batch size must be positive, got ", batch);
  if (shard.count < 1 || shard.rank < 0 || shard.rank >= shard.count)
    return invalidArgument("data shard ", shard.rank, " of ", shard.count,
                           " does not exist");
  if (range.begin >= range.end || range.end > windows.size())
    return invalidArgument("training windows [", range.begin, ", ", range.end,
                           ") are empty or outside the ", windows.size(),
                           " windows of data ", windows.corpus().spec());
  if (start.index >= range.size())
    return invalidArgument(
        "data position {epoch ", start.epoch, ", index ", start.index,
        "} is past the ", range.size(),
        " training windows of an epoch: the data, sequence length or "
        "validation split differ from the run that saved it");
  BatchSampler sampler(std::move(windows), range, batch, seed, start, shard);
  sampler.permutationEpoch_ = start.epoch;
  return sampler;
}

const WindowPermutation &BatchSampler::permutationFor(uint64_t epoch) {
  if (epoch != permutationEpoch_) {
    permutation_ = WindowPermutation(range_.size(), seed_, epoch);
    permutationEpoch_ = epoch;
  }
  return permutation_;
}

uint64_t BatchSampler::windowAt(DataPosition position) const {
  if (position.epoch == permutationEpoch_)
    return range_.begin + permutation_(position.index);
  return range_.begin + WindowPermutation(range_.size(), seed_,
                                          position.epoch)(position.index);
}

Status BatchSampler::fill(int32_t *tokens, int32_t *targets) {
  const int64_t seq = windows_.seq();
  DataPosition at = position_;
  const int64_t first = shard_.rank * batch_; // this rank's rows
  for (int64_t row = 0; row < batch_ * shard_.count; ++row) {
    if (row >= first && row < first + batch_) {
      uint64_t window = range_.begin + permutationFor(at.epoch)(at.index);
      int64_t mine = row - first;
      KILN_RETURN_IF_ERROR(
          windows_.read(window, tokens + mine * seq, targets + mine * seq));
    }
    if (++at.index == range_.size()) {
      ++at.epoch;
      at.index = 0;
    }
  }
  position_ = at;
  return okStatus();
}

} // namespace kiln::rt::data
