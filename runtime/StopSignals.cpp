//===- StopSignals.cpp - SIGINT/SIGTERM as a request to checkpoint and stop ===//

#include "runtime/StopSignals.h"

#include <csignal>

namespace kiln::rt {

namespace {

volatile std::sig_atomic_t gReceived = 0;
struct sigaction gPreviousInt, gPreviousTerm;

void onStopSignal(int signal) {
  gReceived = signal;
  // A second signal takes the default action (terminate) immediately.
  std::signal(signal, SIG_DFL);
}

} // namespace

StopSignals::StopSignals() {
  gReceived = 0;
  struct sigaction action = {};
  action.sa_handler = onStopSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &gPreviousInt);
  sigaction(SIGTERM, &action, &gPreviousTerm);
}

StopSignals::~StopSignals() {
  sigaction(SIGINT, &gPreviousInt, nullptr);
  sigaction(SIGTERM, &gPreviousTerm, nullptr);
}

int StopSignals::received() const { return gReceived; }

const char *StopSignals::name(int signal) {
  return signal == SIGINT ? "SIGINT" : signal == SIGTERM ? "SIGTERM" : "signal";
}

} // namespace kiln::rt
