//===- ValidationSet.h - Held-out windows and fixed validation batches ----===//
//
// Validation data is either a separate corpus (--val-data, opened like the
// training data; all its windows) or the last `fraction` of the training
// corpus's windows in file order, which are then removed from training. The
// tail, not a random subset, so the held-out text is contiguous and shares no
// window boundary tokens with training except at the one split point.
//
// Validation batches are a fixed sequence, not shuffled and not advancing:
//   batch m, row r = window range.begin + (m * B + r) mod range.size()
// so every evaluation of "mean loss over M batches" reads the same tokens and
// losses from different steps (or runs) are comparable.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_DATA_VALIDATIONSET_H
#define KILN_RUNTIME_DATA_VALIDATIONSET_H

#include "runtime/Status.h"
#include "runtime/data/TokenWindows.h"

#include <cstdint>

namespace kiln::rt::data {

struct TrainValidationSplit {
  WindowRange train;
  WindowRange validation;
};

// Holds out the last round(fraction * windows.size()) windows. Errors:
// fraction outside (0, 1), or either side with fewer than `batch` windows
// (the message gives the counts).
StatusOr<TrainValidationSplit>
splitOffValidation(const TokenWindows &windows, double fraction, int64_t batch);

class ValidationBatches {
public:
  // Errors: batch <= 0, a range outside `windows`, or fewer than `batch`
  // windows in it.
  static StatusOr<ValidationBatches> create(TokenWindows windows,
                                            WindowRange range, int64_t batch);

  // Fills batch `m` (any m; the sequence wraps): tokens and targets, each
  // [batch, seq] int32.
  Status fill(uint64_t m, int32_t *tokens, int32_t *targets) const;

  // The window read by row `row` of batch `m`.
  uint64_t windowOf(uint64_t m, int64_t row) const;

  int64_t batch() const { return batch_; }
  int64_t seq() const { return windows_.seq(); }
  const WindowRange &range() const { return range_; }

private:
  ValidationBatches(TokenWindows windows, WindowRange range, int64_t batch)
      : windows_(std::move(windows)), range_(range), batch_(batch) {}

  TokenWindows windows_;
  WindowRange range_;
  int64_t batch_ = 0;
};

} // namespace kiln::rt::data

#endif // KILN_RUNTIME_DATA_VALIDATIONSET_H
