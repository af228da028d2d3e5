//===- ProgressPrinter.cpp - Training progress on the console -------------===//

#include "runtime/metrics/ProgressPrinter.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <sys/ioctl.h>
#include <unistd.h>
#include <vector>

namespace kiln::rt {

namespace {

constexpr const char *kGreen = "\033[32m";
constexpr const char *kYellow = "\033[33m";
constexpr const char *kReset = "\033[0m";
constexpr int kBarCells = 24;
constexpr int kMinBarCells = 8; // a narrower bar is gone instead

std::string printfString(const char *format, ...)
    __attribute__((format(printf, 1, 2)));
std::string printfString(const char *format, ...) {
  char buf[256];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buf, sizeof(buf), format, args);
  va_end(args);
  return buf;
}

// 950, 12.3k, 4.56M: a rate readable at a glance on the in-place line.
std::string compactRate(double perSecond) {
  if (!std::isfinite(perSecond))
    return "?";
  if (perSecond >= 1e6)
    return printfString("%.2fM", perSecond / 1e6);
  if (perSecond >= 1e3)
    return printfString("%.1fk", perSecond / 1e3);
  return printfString("%.0f", perSecond);
}

const char *kSkippedNote = "skipped (non-finite loss or gradients)";

} // namespace

StatusOr<int64_t> rankFromEnvironment(const EnvironmentLookup &lookup) {
  for (const char *name : {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"}) {
    const char *value = lookup(name);
    if (!value || *value == '\0')
      continue;
    errno = 0;
    char *end = nullptr;
    long long rank = std::strtoll(value, &end, 10);
    if (errno != 0 || *end != '\0' || rank < 0 || value[0] == '-' ||
        value[0] == '+' || value[0] == ' ')
      return invalidArgument("environment variable ", name, "=\"", value,
                             "\" is not a rank (a non-negative integer)");
    return static_cast<int64_t>(rank);
  }
  return int64_t(0);
}

StatusOr<int64_t> rankFromEnvironment() {
  return rankFromEnvironment(
      [](const char *name) { return std::getenv(name); });
}

std::string formatEta(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0)
    return "?";
  long long total = std::llround(seconds);
  long long hours = total / 3600, minutes = (total % 3600) / 60,
            secs = total % 60;
  if (hours > 0)
    return printfString("%lldh%02lldm", hours, minutes);
  if (minutes > 0)
    return printfString("%lldm%02llds", minutes, secs);
  return printfString("%llds", secs);
}

StatusOr<ConsoleEnvironment>
ConsoleEnvironment::fromLookup(const EnvironmentLookup &lookup) {
  ConsoleEnvironment environment;
  const char *noColor = lookup("NO_COLOR");
  environment.noColor = noColor && *noColor != '\0';
  KILN_ASSIGN_OR_RETURN(environment.rank, rankFromEnvironment(lookup));
  if (const char *columns = lookup("COLUMNS")) {
    char *end = nullptr;
    long long value = std::strtoll(columns, &end, 10);
    if (*columns && end && *end == '\0' && value > 0 && value < 100000)
      environment.columns = value;
  }
  return environment;
}

StatusOr<ConsoleEnvironment> ConsoleEnvironment::current() {
  KILN_ASSIGN_OR_RETURN(ConsoleEnvironment environment,
                        fromLookup([](const char *name) { return std::getenv(name); }));
  struct winsize size {};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0)
    environment.columns = size.ws_col;
  return environment;
}

ProgressPrinter::ProgressPrinter(FILE *out, bool interactive,
                                 int64_t totalSteps, int64_t logEvery,
                                 ConsoleEnvironment environment)
    : out_(out), interactive_(interactive),
      color_(interactive && !environment.noColor),
      silent_(environment.rank != 0), columns_(std::max<int64_t>(environment.columns, 2)),
      totalSteps_(totalSteps),
      logEvery_(logEvery < 1 ? 1 : logEvery) {}

void ProgressPrinter::report(const StepMetrics &m) {
  if (silent_)
    return;
  stepMsSum_ += m.stepMs;
  ++stepsSeen_;
  double eta = -1;
  if (totalSteps_ > 0 && m.step <= totalSteps_)
    eta =
        (stepMsSum_ / double(stepsSeen_)) * 1e-3 * double(totalSteps_ - m.step);
  if (interactive_)
    printInteractive(m, eta);
  else
    printPlain(m, eta);
  if (m.valLoss)
    reportValidation(m.step, *m.valLoss);
}

void ProgressPrinter::printInteractive(const StepMetrics &m,
                                       double etaSeconds) {
  // The line's pieces, each as seen (visible) and as printed (with colour);
  // `drop` orders what goes first when the terminal is too narrow (0: kept).
  struct Piece {
    std::string visible, shown;
    int drop;
  };
  std::vector<Piece> pieces;
  std::string text = printfString("%lld", static_cast<long long>(m.step));
  if (totalSteps_ > 0)
    text += printfString("/%lld", static_cast<long long>(totalSteps_));
  text += printfString(" | loss %.4f", m.loss);
  pieces.push_back({text, text, 0});
  auto plain = [&](std::string piece, int drop) { pieces.push_back({piece, piece, drop}); };
  plain(printfString(" | lr %.2e", m.lr), 2);
  plain(printfString(" | %s tok/s", compactRate(m.tokensPerSecond).c_str()), 4);
  if (m.mfu)
    plain(printfString(" | mfu %.1f%%", *m.mfu * 100), 3);
  if (etaSeconds >= 0)
    plain(" | ETA " + formatEta(etaSeconds), 5);
  if (m.skipped) {
    std::string note = std::string(" | ") + kSkippedNote;
    pieces.push_back({note, color_ ? " | " + std::string(kYellow) + kSkippedNote + kReset : note, 0});
  }
  // Fit the terminal, one column spare so the line never wraps: the bar
  // narrows (to kMinBarCells), then goes, then the droppable pieces go.
  const size_t limit = static_cast<size_t>(columns_ - 1);
  auto width = [&] {
    size_t w = 0;
    for (const Piece &p : pieces)
      w += p.visible.size();
    return w;
  };
  if (totalSteps_ > 0) {
    int room = static_cast<int>(limit) - static_cast<int>(width()) - 3; // "[", "] "
    int barCells = std::min(kBarCells, room);
    if (barCells >= kMinBarCells) {
      double fraction = std::clamp(double(m.step) / double(totalSteps_), 0.0, 1.0);
      int filled = static_cast<int>(fraction * barCells);
      std::string cells(filled, '=');
      if (filled < barCells)
        cells += '>';
      cells.resize(barCells, ' ');
      pieces.insert(pieces.begin(),
                    {"[" + cells + "] ",
                     color_ ? "[" + std::string(kGreen) + cells + kReset + "] "
                            : "[" + cells + "] ",
                     0});
    }
  }
  for (int rank = 2; rank <= 5 && width() > limit; ++rank)
    pieces.erase(std::remove_if(pieces.begin(), pieces.end(),
                                [&](const Piece &p) { return p.drop == rank; }),
                 pieces.end());
  std::string visible, line;
  for (const Piece &p : pieces) {
    visible += p.visible;
    line += p.shown;
  }
  if (visible.size() > limit) { // still too wide: cut it, without colour
    visible.resize(limit);
    line = visible;
  }
  // Spaces erase what a longer previous line left behind.
  if (visible.size() < openLineWidth_)
    line.append(openLineWidth_ - visible.size(), ' ');
  std::fprintf(out_, "\r%s", line.c_str());
  if (m.skipped) {
    // Keep the skipped step on screen: the next step starts a new line.
    std::fputc('\n', out_);
    lineOpen_ = false;
    openLineWidth_ = 0;
  } else {
    lineOpen_ = true;
    openLineWidth_ = visible.size();
  }
  std::fflush(out_);
}

void ProgressPrinter::printPlain(const StepMetrics &m, double etaSeconds) {
  bool due = m.step == 1 || m.step == totalSteps_ || m.step % logEvery_ == 0 ||
             m.skipped || m.valLoss;
  if (!due)
    return;
  std::string line = printfString("step %lld", static_cast<long long>(m.step));
  if (totalSteps_ > 0)
    line += printfString("/%lld", static_cast<long long>(totalSteps_));
  line += printfString(" loss %.6f lr %.3g", m.loss, m.lr);
  if (m.gradNorm)
    line += printfString(" grad_norm %.4f", *m.gradNorm);
  line += printfString(" %.2f ms %.0f tok/s", m.stepMs, m.tokensPerSecond);
  if (m.mfu)
    line += printfString(" mfu %.1f%%", *m.mfu * 100);
  if (etaSeconds >= 0)
    line += " ETA " + formatEta(etaSeconds);
  if (m.skipped)
    line += std::string(" ") + kSkippedNote;
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
}

void ProgressPrinter::reportValidation(int64_t step, double valLoss) {
  if (silent_)
    return;
  finish();
  std::fprintf(out_, "val loss %.4g at step %lld\n", valLoss,
               static_cast<long long>(step));
  std::fflush(out_);
}

void ProgressPrinter::finish() {
  if (silent_ || !lineOpen_)
    return;
  std::fputc('\n', out_);
  std::fflush(out_);
  lineOpen_ = false;
  openLineWidth_ = 0;
}

} // namespace kiln::rt
