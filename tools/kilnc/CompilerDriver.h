//===- CompilerDriver.h - kilnc's one entry point -------------------------===//
//
// The whole compilation of one model file: frontend -> named pass phases ->
// codegen -> artifact, with phase dumps, --compile-to and timing. kilnc.cpp only
// parses the command line into `DriverOptions` and calls `runCompiler`.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_TOOLS_KILNC_COMPILERDRIVER_H
#define KILN_TOOLS_KILNC_COMPILERDRIVER_H

#include <map>
#include <string>

namespace kiln {

struct DriverOptions {
  std::string inputPath;                        // the .kiln model file
  std::string outputPath;                       // artifact, or IR with --compile-to ("-" = stdout)
  std::map<std::string, std::string> overrides; // -D name=value
  std::string target = "cpu";                   // code generation target: cpu or cuda
  std::string cudaArchs = "sm_80,sm_90a";       // cuda: comma-separated architectures
  std::string dumpPhasesTo;                     // directory for per-phase IR and kernels, or ""
  std::string compileTo = "artifact";           // last phase to run
  std::string compileFrom;                      // --compile-from=PHASE: inputPath is that phase's dump
  bool noFusion = false;                        // skip the "fusion" phase (one kernel per op)
  bool padDims = true;                          // false: skip the pad-dims phase (--no-pad-dims)
  bool attentionMatch = true;                   // false: skip the attention-match phase (--no-attention-match)
  bool fusedCrossEntropy = true;                // false: keep cross_entropy(x @ w^T) as two ops (--no-fused-cross-entropy)
  int64_t crossEntropyChunkRows = 0;            // > 0: fuse always, this many rows per chunk (--cross-entropy-chunk-rows)
  std::string memoryBudget;                     // --memory-budget=60GiB: -D memory_budget, or ""
  std::string remat;                            // --remat=MODE: -D remat, or ""
  bool memoryBudgetSweep = false;               // print every remat plan's peak (--memory-budget-sweep)
  std::string largestBatch;                     // --largest-batch=80GB: compile at the largest batch that fits, or ""
  int64_t bucketBytes = int64_t(25) << 20;      // data parallelism: all-reduce bucket (--bucket-mib)
};

/// Exit codes of the compiler.
enum ExitCode : int { kSuccess = 0, kUserError = 1, kUsageError = 2 };

/// Runs the compilation; diagnostics go to stderr. Never leaves a partial output.
int runCompiler(const DriverOptions &options);

/// Names accepted by --compile-to, in pipeline order ("kiln", ..., "artifact").
std::string compileToPhaseNames();

} // namespace kiln

#endif // KILN_TOOLS_KILNC_COMPILERDRIVER_H
