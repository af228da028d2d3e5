//===- CommThread.cpp - Collectives run beside the compute ----------------===//

#include "runtime/cpu/CommThread.h"

namespace kiln::rt {

CommThread::CommThread() : thread_([this] { loop(); }) {}

CommThread::~CommThread() {
  (void)finish();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void CommThread::submit(std::function<Status()> task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_.push_back(std::move(task));
  }
  wake_.notify_all();
}

Status CommThread::finish() {
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [this] { return tasks_.empty() && !running_; });
  Status error = error_;
  error_ = okStatus();
  return error;
}

void CommThread::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
    if (tasks_.empty())
      return; // stopping, nothing left
    std::function<Status()> task = std::move(tasks_.front());
    tasks_.pop_front();
    running_ = true;
    lock.unlock();
    // After an error the rest still run: every rank must meet in them.
    Status status = task();
    lock.lock();
    running_ = false;
    if (!status.ok() && error_.ok())
      error_ = status;
    done_.notify_all();
  }
}

} // namespace kiln::rt
