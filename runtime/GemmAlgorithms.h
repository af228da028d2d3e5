//===- GemmAlgorithms.h - kiln-run --gemm-algos=heuristic|timed -----------===//
//
// Which of cuBLASLt's algorithms a CUDA GemmCall runs:
//   heuristic  the first cuBLASLt's heuristic returns (what cuBLAS and
//              PyTorch run by default);
//   timed      up to kGemmCandidates of the heuristic's algorithms are timed
//              on the real buffers at the first run of each program (as
//              XLA's GEMM autotuner does), and the fastest is kept when it
//              beats the heuristic's first by kGemmTimedMargin; the choices
//              are kept in the kernel cache (per GPU and GEMM), so later runs
//              on this machine start with them and stay bit-identical
//              (GemmTuning.cpp says the one exception).
// The CPU backend has one GEMM (OpenBLAS) and ignores it.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_GEMMALGORITHMS_H
#define KILN_RUNTIME_GEMMALGORITHMS_H

#include "runtime/Status.h"

#include <string>

namespace kiln::rt {

enum class GemmAlgorithms { kHeuristic, kTimed };

// Algorithms timed per GEMM under --gemm-algos=timed.
constexpr int kGemmCandidates = 8;
// Another algorithm replaces the heuristic's first only when it takes at
// most this fraction of its time: near-ties keep cuBLASLt's pick, so timing
// noise does not change the numerics from run to run.
constexpr double kGemmTimedMargin = 0.97;

inline StatusOr<GemmAlgorithms> parseGemmAlgorithms(const std::string &text) {
  if (text == "heuristic")
    return GemmAlgorithms::kHeuristic;
  if (text == "timed")
    return GemmAlgorithms::kTimed;
  return invalidArgument("--gemm-algos: unknown value '", text,
                         "' (expected heuristic or timed)");
}

} // namespace kiln::rt

#endif // KILN_RUNTIME_GEMMALGORITHMS_H
