//===- StopSignals.h - SIGINT/SIGTERM as a request to checkpoint and stop --===//
//
// A long run killed by Ctrl-C, by a scheduler's SIGTERM before preemption
// or by `timeout` must not lose its work. While a StopSignals object lives,
// the first SIGINT or SIGTERM only sets a flag that the training loop reads
// between steps: it finishes the step, writes a checkpoint and exits 0. The
// handler then restores the default action, so a second signal kills at
// once (the checkpoint being written is atomic, so nothing breaks).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_STOPSIGNALS_H
#define KILN_RUNTIME_STOPSIGNALS_H

namespace kiln::rt {

class StopSignals {
public:
  StopSignals();   // installs the handlers
  ~StopSignals();  // restores the previous ones
  StopSignals(const StopSignals &) = delete;
  StopSignals &operator=(const StopSignals &) = delete;

  // The signal received (SIGINT or SIGTERM), or 0.
  int received() const;
  // "SIGINT" / "SIGTERM".
  static const char *name(int signal);
};

} // namespace kiln::rt

#endif // KILN_RUNTIME_STOPSIGNALS_H
