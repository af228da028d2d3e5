//===- ValidationSet.cpp - Held-out windows and fixed validation batches --===//

#include "runtime/data/ValidationSet.h"

#include <algorithm>
#include <cmath>

namespace kiln::rt::data {

StatusOr<TrainValidationSplit> splitOffValidation(const TokenWindows &windows,
                                                  double fraction,
                                                  int64_t batch) {
  if (!(fraction > 0.0 && fraction < 1.0))
    return invalidArgument("validation fraction must be in (0, 1), got ",
                           fraction);
  if (batch <= 0)
    return invalidArgument("batch size must be positive, got ", batch);
  const uint64_t total = windows.size();
  const uint64_t held = static_cast<uint64_t>(
      std::llround(fraction * static_cast<double>(total)));
  const uint64_t kept = total - std::min(held, total);
  if (held < uint64_t(batch) || kept < uint64_t(batch))
    return invalidArgument("validation fraction ", fraction, " of the ", total,
                           " windows of ", windows.corpus().spec(), " (seq ",
                           windows.seq(), ") leaves ", kept,
                           " for training and ", held,
                           " for validation, but each side needs at "
                           "least one batch of ",
                           batch);
  TrainValidationSplit split;
  split.train = {0, kept};
  split.validation = {kept, total};
  return split;
}

StatusOr<ValidationBatches> ValidationBatches::create(TokenWindows windows,
                                                      WindowRange range,
                                                      int64_t batch) {
  if (batch <= 0)
    return invalidArgument("batch size must be positive, got ", batch);
  if (range.begin > range.end || range.end > windows.size())
    return invalidArgument("validation windows [", range.begin, ", ", range.end,
                           ") are outside the ", windows.size(),
                           " windows of data ", windows.corpus().spec());
  if (range.size() < uint64_t(batch))
    return invalidArgument("validation data ", windows.corpus().spec(), " has ",
                           range.size(),
                           " windows of seq + 1 = ", windows.seq() + 1,
                           " tokens, fewer than one batch of ", batch);
  return ValidationBatches(std::move(windows), range, batch);
}

uint64_t ValidationBatches::windowOf(uint64_t m, int64_t row) const {
  // (m * B + r) mod n without overflow for any m: reduce m first.
  const uint64_t n = range_.size();
  const uint64_t b = static_cast<uint64_t>(batch_);
  uint64_t start =
      static_cast<uint64_t>((static_cast<unsigned __int128>(m) * b) % n);
  return range_.begin + (start + static_cast<uint64_t>(row)) % n;
}

Status ValidationBatches::fill(uint64_t m, int32_t *tokens,
                               int32_t *targets) const {
  const int64_t seq = windows_.seq();
  for (int64_t row = 0; row < batch_; ++row)
    KILN_RETURN_IF_ERROR(windows_.read(windowOf(m, row), tokens + row * seq,
                                       targets + row * seq));
  return okStatus();
}

} // namespace kiln::rt::data
