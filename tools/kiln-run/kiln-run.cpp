//===- kiln-run.cpp - Run a compiled Kiln training artifact ---------------===//
//
//   kiln-run OUT.kart --data PATH --steps N [--lr X] [--seed S] ...
//   kiln-run OUT.kart [--data PATH] --check-grads N [--seed S]
//   kiln-run OUT.kart --compile-only [--arch sm_80,sm_90a]
//
// A thin main: parse the command line, call kiln::rt::runTraining (or
// kiln::rt::runGradientCheck), print the summary. Exit status: 0 success
// (gradient check passed), 1 error (message on stderr) or gradient check
// failed or (--compile-only) a kernel
// failed to compile or spills, 2 bad usage.
//
//===----------------------------------------------------------------------===//

#include "runtime/GradientCheck.h"
#include "runtime/RunOptions.h"
#include "runtime/Trainer.h"
#include "runtime/Version.h"
#include "runtime/cuda/CompileCheck.h"

#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

namespace {
// Exit status 1 with the error on stderr, after whatever progress was printed.
int reportError(const kiln::rt::Status &status) {
  std::fflush(stdout);
  std::fprintf(stderr, "kiln-run: error: %s\n", status.message().c_str());
  return 1;
}
} // namespace

int main(int argc, char **argv) {
  // A write past the file-size limit (ulimit -f) fails with EFBIG, which the
  // writers report naming the file, instead of killing the process mid-write.
  std::signal(SIGXFSZ, SIG_IGN);
  std::vector<std::string> args(argv + 1, argv + argc);
  auto parsed = kiln::rt::parseRunCommandLine(args);
  if (!parsed.ok()) {
    // One line, not the whole help (which --help prints).
    std::fprintf(stderr, "kiln-run: error: %s (kiln-run --help lists the options)\n",
                 parsed.status().message().c_str());
    return 2;
  }
  if (parsed->help) {
    std::fputs(kiln::rt::runUsageText().c_str(), stdout);
    return 0;
  }
  if (parsed->version) {
    std::fputs(kiln::rt::versionText("kiln-run").c_str(), stdout);
    return 0;
  }
  if (parsed->options.compileOnly) {
    auto report = kiln::rt::cuda::runCompileCheck(parsed->options, stdout);
    if (!report.ok())
      return reportError(report.status());
    for (const std::string &problem : report->problems)
      std::fprintf(stderr, "kiln-run: error: %s\n", problem.c_str());
    return report->passed() ? 0 : 1;
  }
  if (parsed->options.checkGrads > 0) {
    auto report = kiln::rt::runGradientCheck(parsed->options, stdout);
    if (!report.ok())
      return reportError(report.status());
    std::fputs(kiln::rt::formatGradientCheckReport(*report).c_str(), stdout);
    return report->passed() ? 0 : 1;
  }
  auto summary = kiln::rt::runTraining(parsed->options, stdout);
  if (!summary.ok())
    return reportError(summary.status());
  // Data-parallel ranks other than 0 end silently (rank 0 speaks for all).
  if (!summary->lead)
    return summary->failed ? 1 : 0;
  if (!summary->stopReason.empty())
    std::fprintf(summary->failed ? stderr : stdout, "kiln-run: %s%s\n",
                 summary->failed ? "error: " : "",
                 summary->stopReason.c_str());
  if (summary->stepsThisRun == 0)
    return 0; // resumed at --steps: nothing ran, nothing to report
  std::printf("final loss %.6f after %lld steps, %.0f tokens/s, %.1f samples/s",
              summary->finalLoss, static_cast<long long>(summary->steps),
              summary->tokensPerSecond, summary->samplesPerSecond);
  if (summary->flopsPerSecond > 0)
    std::printf(", %.2f GFLOP/s", summary->flopsPerSecond * 1e-9);
  if (summary->ranks > 1 || summary->communicatedBytesPerStep > 0)
    std::printf(", %d rank%s, %.2f MiB communicated per step per rank", summary->ranks,
                summary->ranks == 1 ? "" : "s", summary->communicatedBytesPerStep / (1 << 20));
  if (summary->skippedSteps > 0)
    std::printf(", %lld updates skipped (non-finite)",
                static_cast<long long>(summary->skippedSteps));
  std::printf("\n");
  return summary->failed ? 1 : 0;
}
