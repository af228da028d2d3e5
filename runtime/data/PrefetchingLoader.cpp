//===- PrefetchingLoader.cpp - Batches filled ahead on a background thread ===//

#include "runtime/data/PrefetchingLoader.h"

#include <algorithm>
#include <cstring>

namespace kiln::rt::data {

PrefetchingLoader::PrefetchingLoader(BatchSampler sampler, int depth)
    : sampler_(std::move(sampler)), batch_(sampler_.batch()),
      seq_(sampler_.seq()), depth_(static_cast<size_t>(std::max(depth, 1))),
      handedOver_(sampler_.position()),
      thread_(&PrefetchingLoader::fillAhead, this) {}

PrefetchingLoader::~PrefetchingLoader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  notFull_.notify_all();
  thread_.join();
}

void PrefetchingLoader::fillAhead() {
  const size_t elements = static_cast<size_t>(batch_ * seq_);
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      notFull_.wait(lock, [&] { return stopping_ || queue_.size() < depth_; });
      if (stopping_)
        return;
    }
    // Filled outside the lock: next() can hand over queued batches meanwhile.
    Filled filled;
    filled.tokens.resize(elements);
    filled.targets.resize(elements);
    filled.status = sampler_.fill(filled.tokens.data(), filled.targets.data());
    filled.after = sampler_.position();
    const bool failed = !filled.status.ok();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(std::move(filled));
    }
    notEmpty_.notify_one();
    if (failed)
      return; // the error is queued; nothing after it is valid
  }
}

Status PrefetchingLoader::next(int32_t *tokens, int32_t *targets) {
  Filled filled;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!firstError_.ok())
      return firstError_;
    notEmpty_.wait(lock, [&] { return !queue_.empty(); });
    filled = std::move(queue_.front());
    queue_.pop_front();
    if (!filled.status.ok()) {
      firstError_ = filled.status;
      return firstError_;
    }
    handedOver_ = filled.after;
  }
  notFull_.notify_one();
  const size_t bytes = filled.tokens.size() * sizeof(int32_t);
  std::memcpy(tokens, filled.tokens.data(), bytes);
  std::memcpy(targets, filled.targets.data(), bytes);
  return okStatus();
}

DataPosition PrefetchingLoader::position() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return handedOver_;
}

} // namespace kiln::rt::data
