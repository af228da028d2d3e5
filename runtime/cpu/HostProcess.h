//===- HostProcess.h - Running a host tool and capturing its output -------===//
//
// The CPU backend runs the host C++ compiler. posix_spawnp with an argv
// vector (no shell) so that paths with spaces or quotes in $KILN_CACHE_DIR
// cannot break or inject into the command line.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPU_HOSTPROCESS_H
#define KILN_RUNTIME_CPU_HOSTPROCESS_H

#include "runtime/Status.h"

#include <string>
#include <vector>

namespace kiln::rt::cpu {

struct ProcessResult {
  int exitCode = 0;   // exit status, or 128 + signal when killed
  std::string output; // stdout and stderr, interleaved
};

// Runs argv[0] (looked up in $PATH) and waits. Fails only when the program
// cannot be started; a non-zero exit is reported in the result.
StatusOr<ProcessResult> runHostProcess(const std::vector<std::string> &argv);

// The last `maxLines` lines of `text`, for error messages.
std::string lastLines(const std::string &text, size_t maxLines);

} // namespace kiln::rt::cpu

#endif // KILN_RUNTIME_CPU_HOSTPROCESS_H
