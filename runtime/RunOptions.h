//===- RunOptions.h - Command line of kiln-run -----------------------------===//
//
// Parsing lives in the runtime library rather than in the tool's main so the
// unit tests can check every usage error, and so that main stays a thin
// wrapper: parse, run, map errors to exit codes.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_RUNOPTIONS_H
#define KILN_RUNTIME_RUNOPTIONS_H

#include "runtime/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::rt {

struct RunOptions {
  std::string artifactPath;  // positional OUT.kart
  std::string dataPath;      // --data
  int64_t steps = 0;         // --steps (>= 1)
  double lr = 1e-3;          // --lr, constant in this issue
  uint64_t seed = 0;         // --seed
  std::string metricsPath;   // --metrics FILE.jsonl
  std::string saveInitPath;  // --save-init FILE.safetensors
  std::string saveGradsPath; // --save-grads FILE.safetensors
  int64_t logEvery = 10;     // --log-every (non-TTY progress lines)
  bool quiet = false;        // --quiet: only errors and the final line
  bool profile = false;      // --profile: time per schedule entry at the end
};

struct ParsedCommandLine {
  bool help = false; // --help was given: print usage, exit 0
  RunOptions options;
};

// Parses argv[1..]. Usage errors (unknown flag, missing value, bad number,
// missing required argument) are kInvalidArgument with a one-line message.
StatusOr<ParsedCommandLine> parseRunCommandLine(
    const std::vector<std::string> &args);

// The usage text printed by --help and after usage errors.
const char *runUsageText();

} // namespace kiln::rt

#endif // KILN_RUNTIME_RUNOPTIONS_H
