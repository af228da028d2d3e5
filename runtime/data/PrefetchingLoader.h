//===- PrefetchingLoader.h - Batches filled ahead on a background thread --===//
//
// Reading a batch touches seq * batch tokens of mapped files, which may fault
// pages in from disk; a background thread does that while the step runs. It
// owns the sampler and keeps up to `depth` filled batches in a queue (mutex +
// two condition variables: "not full" wakes the thread, "not empty" wakes
// next()).
//
// position() is the position after the last batch *handed over* by next(),
// not after what the thread has prefetched, so a checkpoint taken between
// steps resumes at exactly the next batch the step would have consumed. The
// batches are bit-identical to the sampler's without the thread: one thread
// fills them in sampler order.
//
// An error found by the thread (a token id >= vocab) is queued in place of
// the batch and returned by that next() call, and by every later one; the
// thread stops at the first error.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_DATA_PREFETCHINGLOADER_H
#define KILN_RUNTIME_DATA_PREFETCHINGLOADER_H

#include "runtime/Status.h"
#include "runtime/data/BatchSampler.h"
#include "runtime/data/DataPosition.h"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln::rt::data {

class PrefetchingLoader {
public:
  static constexpr int kDefaultDepth = 2;

  // Starts the thread; it fills at most max(depth, 1) batches ahead.
  explicit PrefetchingLoader(BatchSampler sampler, int depth = kDefaultDepth);
  // Stops and joins the thread (it finishes the batch it is filling).
  ~PrefetchingLoader();

  PrefetchingLoader(const PrefetchingLoader &) = delete;
  PrefetchingLoader &operator=(const PrefetchingLoader &) = delete;

  // Copies the next batch into tokens and targets (each [batch, seq] int32),
  // waiting for the thread if needed.
  Status next(int32_t *tokens, int32_t *targets);

  // The position after the last batch handed over by next().
  DataPosition position() const;

  int64_t batch() const { return batch_; }
  int64_t seq() const { return seq_; }

private:
  struct Filled {
    std::vector<int32_t> tokens;  // [batch, seq]
    std::vector<int32_t> targets; // [batch, seq]
    Status status;
    DataPosition after; // the sampler's position after this batch
  };

  void fillAhead();

  BatchSampler sampler_; // used only by the thread once it has started
  const int64_t batch_;
  const int64_t seq_;
  const size_t depth_;

  mutable std::mutex mutex_;
  std::condition_variable notFull_;
  std::condition_variable notEmpty_;
  std::deque<Filled> queue_;
  bool stopping_ = false;
  Status firstError_;       // sticky once next() has returned an error
  DataPosition handedOver_; // position after the last batch handed over

  std::thread thread_; // last: started after every other member exists
};

} // namespace kiln::rt::data

#endif // KILN_RUNTIME_DATA_PREFETCHINGLOADER_H
