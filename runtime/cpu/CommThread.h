//===- CommThread.h - Collectives run beside the compute ------------------===//
//
// The CPU executor's thread for the CollectiveCalls an artifact marks
// `overlap` (an all-reduce of gradients nothing later in its program
// touches): the executor hands one over and goes on with the next entries
// -- the rest of the backward -- while this thread waits on MPI or Gloo;
// finish() at the program's end waits for every one handed over. One task
// runs at a time, in the order given, so the ranks still meet in the
// schedule's order, and the communication library is called from one
// thread at a time (MPI_THREAD_SERIALIZED).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPU_COMMTHREAD_H
#define KILN_RUNTIME_CPU_COMMTHREAD_H

#include "runtime/Status.h"

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace kiln::rt {

class CommThread {
public:
  CommThread();
  ~CommThread(); // waits for the tasks handed over, then ends the thread
  CommThread(const CommThread &) = delete;
  CommThread &operator=(const CommThread &) = delete;

  // Runs `task` after the ones before it.
  void submit(std::function<Status()> task);
  // Waits until every task handed over has run; the first one's error.
  Status finish();

private:
  void loop();

  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::deque<std::function<Status()>> tasks_;
  bool running_ = false; // a task is running now
  bool stopping_ = false;
  Status error_ = okStatus();
  std::thread thread_;
};

} // namespace kiln::rt

#endif // KILN_RUNTIME_CPU_COMMTHREAD_H
