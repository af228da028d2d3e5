//===- MetricsProgressTest.cpp - Console progress, ETA, colour, rank ------===//
//
// The printer writes to a FILE* from open_memstream, so each test sees the
// exact bytes a terminal or a log file would receive.
//
//===----------------------------------------------------------------------===//

#include "runtime/metrics/ProgressPrinter.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <limits>
#include <map>

namespace kiln::rt::test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Captures what a ProgressPrinter writes.
class CapturedOutput {
public:
  CapturedOutput() { file_ = ::open_memstream(&buffer_, &size_); }
  ~CapturedOutput() {
    std::fclose(file_);
    std::free(buffer_);
  }
  FILE *file() { return file_; }
  std::string text() {
    std::fflush(file_);
    return std::string(buffer_, size_);
  }

private:
  FILE *file_ = nullptr;
  char *buffer_ = nullptr;
  size_t size_ = 0;
};

StepMetrics stepAt(int64_t step, double stepMs = 100) {
  StepMetrics m;
  m.step = step;
  m.loss = 2.0 + 1.0 / double(step);
  m.lr = 3e-4;
  m.gradNorm = 0.5;
  m.stepMs = stepMs;
  m.tokensPerStep = 4096;
  m.tokensPerSecond = 40960;
  return m;
}

EnvironmentLookup fakeEnvironment(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char *name) -> const char * {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

int countOf(const std::string &text, const std::string &what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos;
       at = text.find(what, at + 1))
    ++n;
  return n;
}

TEST(EtaFormatTest, Formats) {
  EXPECT_EQ(formatEta(0), "0s");
  EXPECT_EQ(formatEta(42), "42s");
  EXPECT_EQ(formatEta(59.4), "59s");
  EXPECT_EQ(formatEta(59.6), "1m00s"); // rounds to whole seconds first
  EXPECT_EQ(formatEta(185), "3m05s");
  EXPECT_EQ(formatEta(3599), "59m59s");
  EXPECT_EQ(formatEta(3600), "1h00m");
  EXPECT_EQ(formatEta(3720), "1h02m");
  EXPECT_EQ(formatEta(27 * 3600), "27h00m");
  EXPECT_EQ(formatEta(-1), "?");
  EXPECT_EQ(formatEta(std::numeric_limits<double>::infinity()), "?");
}

TEST(RankTest, FromEnvironmentInPriorityOrder) {
  auto rank = [](std::map<std::string, std::string> vars) {
    auto r = rankFromEnvironment(fakeEnvironment(std::move(vars)));
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? *r : -1;
  };
  EXPECT_EQ(rank({}), 0);
  EXPECT_EQ(rank({{"SLURM_PROCID", "5"}}), 5);
  EXPECT_EQ(rank({{"OMPI_COMM_WORLD_RANK", "2"}, {"SLURM_PROCID", "5"}}), 2);
  EXPECT_EQ(rank({{"RANK", "3"},
                  {"OMPI_COMM_WORLD_RANK", "2"},
                  {"SLURM_PROCID", "5"}}),
            3);
  EXPECT_EQ(rank({{"RANK", ""}, {"SLURM_PROCID", "1"}}), 1); // empty = unset
  EXPECT_EQ(rank({{"RANK", "0"}, {"SLURM_PROCID", "1"}}), 0);
}

TEST(RankTest, RejectsGarbage) {
  for (const char *value : {"abc", "-1", "1x", " 1", "99999999999999999999"}) {
    auto r =
        rankFromEnvironment(fakeEnvironment({{"OMPI_COMM_WORLD_RANK", value}}));
    ASSERT_FALSE(r.ok()) << value;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(),
                HasSubstr(std::string("OMPI_COMM_WORLD_RANK=\"") + value));
  }
}

TEST(RankTest, ReadsProcessEnvironment) {
  // The process-environment overload reads the real variables.
  const char *saved = std::getenv("RANK");
  std::string savedValue = saved ? saved : "";
  ::setenv("RANK", "4", 1);
  auto r = rankFromEnvironment();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 4);
  if (saved)
    ::setenv("RANK", savedValue.c_str(), 1);
  else
    ::unsetenv("RANK");
}

TEST(ConsoleEnvironmentTest, NoColorMustBeNonEmpty) {
  auto set =
      ConsoleEnvironment::fromLookup(fakeEnvironment({{"NO_COLOR", "1"}}));
  ASSERT_TRUE(set.ok());
  EXPECT_TRUE(set->noColor);
  auto empty =
      ConsoleEnvironment::fromLookup(fakeEnvironment({{"NO_COLOR", ""}}));
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->noColor);
  auto rank = ConsoleEnvironment::fromLookup(fakeEnvironment({{"RANK", "2"}}));
  ASSERT_TRUE(rank.ok());
  EXPECT_EQ(rank->rank, 2);
  EXPECT_FALSE(
      ConsoleEnvironment::fromLookup(fakeEnvironment({{"RANK", "x"}})).ok());
}

TEST(ProgressPrinterTest, TerminalColourUnlessNoColor) {
  CapturedOutput colour, plain, logFile;
  ProgressPrinter a(colour.file(), /*interactive=*/true, 10, 1,
                    ConsoleEnvironment{/*noColor=*/false, 0});
  ProgressPrinter b(plain.file(), /*interactive=*/true, 10, 1,
                    ConsoleEnvironment{/*noColor=*/true, 0});
  ProgressPrinter c(logFile.file(), /*interactive=*/false, 10, 1,
                    ConsoleEnvironment{/*noColor=*/false, 0});
  EXPECT_TRUE(a.usesColor());
  EXPECT_FALSE(b.usesColor());
  EXPECT_FALSE(c.usesColor()); // never colour into a file
  for (ProgressPrinter *p : {&a, &b, &c}) {
    StepMetrics m = stepAt(1);
    p->report(m);
    m = stepAt(2);
    m.skipped = true;
    p->report(m);
    p->finish();
  }
  EXPECT_THAT(colour.text(), HasSubstr("\033[32m"));
  EXPECT_THAT(colour.text(), HasSubstr("\033[33mskipped"));
  EXPECT_THAT(plain.text(), Not(HasSubstr("\033")));
  EXPECT_THAT(logFile.text(), Not(HasSubstr("\033")));
  // Same visible text with and without colour.
  std::string stripped = colour.text();
  for (const char *code : {"\033[32m", "\033[33m", "\033[0m"})
    for (size_t at; (at = stripped.find(code)) != std::string::npos;)
      stripped.erase(at, std::strlen(code));
  EXPECT_EQ(stripped, plain.text());
}

// The in-place line fits the terminal, one column spare. 80 columns: a
// 24-cell bar would not fit beside step 50/100's 59 characters, a 17-cell one
// does; beside step 51234/100000 with its MFU (79 characters) no bar of 8
// cells does, so the bar goes and the rest stays. 50 columns: the learning
// rate, the MFU and the tokens/s go too. 12: what is left is cut.
TEST(ProgressPrinterTest, LineFitsTheTerminal) {
  auto line = [](int64_t columns, int64_t total, int64_t step, bool mfu) {
    CapturedOutput out;
    ProgressPrinter p(out.file(), true, total, 10, ConsoleEnvironment{true, 0, columns});
    StepMetrics m = stepAt(step, /*stepMs=*/1000);
    if (mfu)
      m.mfu = 0.4567;
    p.report(m);
    std::string text = out.text();
    return text.substr(text.rfind('\r') + 1);
  };
  std::string wide = line(200, 100000, 51234, true);
  EXPECT_THAT(wide, HasSubstr("[" + std::string(12, '=') + ">" + std::string(11, ' ') + "] 51234/100000"));
  EXPECT_THAT(wide, HasSubstr(" | mfu 45.7% | ETA "));
  std::string narrowBar = line(80, 100, 50, false);
  EXPECT_LE(narrowBar.size(), 79u);
  size_t barEnd = narrowBar.find("] 50/100 | loss 2.0200 | lr 3.00e-04 | 41.0k tok/s | ETA 50s");
  EXPECT_EQ(narrowBar[0], '[') << narrowBar;
  EXPECT_GT(barEnd, 8u) << narrowBar;  // at least 8 cells
  EXPECT_LT(barEnd, 25u) << narrowBar; // fewer than 24
  std::string noBar = line(80, 100000, 51234, true);
  EXPECT_LE(noBar.size(), 79u);
  EXPECT_EQ(noBar.rfind("51234/100000 | loss 2.0000 | lr 3.00e-04 | 41.0k tok/s | mfu 45.7% | ETA ", 0), 0u)
      << noBar;
  std::string fifty = line(50, 100000, 51234, true);
  EXPECT_LE(fifty.size(), 49u);
  EXPECT_EQ(fifty, "51234/100000 | loss 2.0000 | ETA 13h32m"); // lr, MFU, tok/s gone
  EXPECT_EQ(line(12, 100000, 51234, true), "51234/10000");
}

TEST(ConsoleEnvironmentTest, ColumnsFromTheEnvironment) {
  EXPECT_EQ(ConsoleEnvironment::fromLookup(fakeEnvironment({}))->columns, 80);
  EXPECT_EQ(ConsoleEnvironment::fromLookup(fakeEnvironment({{"COLUMNS", "132"}}))->columns, 132);
  EXPECT_EQ(ConsoleEnvironment::fromLookup(fakeEnvironment({{"COLUMNS", "wide"}}))->columns, 80);
  EXPECT_EQ(ConsoleEnvironment::fromLookup(fakeEnvironment({{"COLUMNS", "0"}}))->columns, 80);
}

TEST(ProgressPrinterTest, TerminalLineRewrittenInPlace) {
  CapturedOutput out;
  ProgressPrinter p(out.file(), true, 100, 10, ConsoleEnvironment{true, 0, /*columns=*/200});
  p.report(stepAt(1, /*stepMs=*/1000));  // mean 1 s, 99 steps left: 99 s
  p.report(stepAt(50, /*stepMs=*/3000)); // mean 2 s, 50 steps left: 100 s
  std::string text = out.text();
  EXPECT_EQ(countOf(text, "\r"), 2);
  EXPECT_EQ(countOf(text, "\n"), 0);
  // 24 cells: 1% fills none (the head '>' shows), 50% fills 12.
  std::string bar1 = "[>" + std::string(23, ' ') + "]";
  std::string bar50 =
      "[" + std::string(12, '=') + ">" + std::string(11, ' ') + "]";
  EXPECT_THAT(text, HasSubstr("\r" + bar1 +
                              " 1/100 | loss 3.0000 | "
                              "lr 3.00e-04 | 41.0k tok/s | ETA 1m39s"));
  EXPECT_THAT(text, HasSubstr("\r" + bar50 +
                              " 50/100 | loss 2.0200 | "
                              "lr 3.00e-04 | 41.0k tok/s | ETA 1m40s"));
  p.finish();
  EXPECT_EQ(out.text().back(), '\n');
  p.finish(); // idempotent
  EXPECT_EQ(countOf(out.text(), "\n"), 1);
}

TEST(ProgressPrinterTest, ShorterLinePadsOverLongerOne) {
  CapturedOutput out;
  ProgressPrinter p(out.file(), true, 0, 1, ConsoleEnvironment{true, 0});
  StepMetrics wide = stepAt(1);
  wide.mfu = 0.5;
  p.report(wide);
  std::string first = out.text().substr(1); // after '\r'
  p.report(stepAt(2));
  std::string second = out.text().substr(1 + first.size() + 1);
  EXPECT_EQ(second.size(), first.size()); // trailing spaces erase the rest
  EXPECT_THAT(first, HasSubstr("| mfu 50.0%"));
  EXPECT_THAT(first, Not(HasSubstr("ETA"))); // total unknown: no ETA, no bar
  EXPECT_THAT(first, Not(HasSubstr("[")));
}

TEST(ProgressPrinterTest, SkippedStepStaysOnScreen) {
  CapturedOutput out;
  ProgressPrinter p(out.file(), true, 10, 1, ConsoleEnvironment{true, 0, /*columns=*/200});
  p.report(stepAt(1));
  StepMetrics skipped = stepAt(2);
  skipped.skipped = true;
  p.report(skipped);
  p.report(stepAt(3));
  std::string text = out.text();
  // The skipped step's line ends with a newline, so step 3 starts below it.
  EXPECT_THAT(text, HasSubstr(" 2/10 | loss 2.5000 | "));
  EXPECT_THAT(text,
              HasSubstr(" | skipped (non-finite loss or gradients)\n\r["));
  EXPECT_EQ(countOf(text, "\n"), 1);
}

TEST(ProgressPrinterTest, LogFileEveryNStepsFirstLastAndSkipped) {
  CapturedOutput out;
  ProgressPrinter p(out.file(), false, 25, 10, ConsoleEnvironment{false, 0});
  for (int64_t s = 1; s <= 25; ++s) {
    StepMetrics m = stepAt(s);
    m.skipped = s == 13;
    p.report(m);
  }
  p.finish();
  std::string text = out.text();
  EXPECT_EQ(countOf(text, "\n"), 5); // steps 1, 10, 13, 20, 25
  EXPECT_EQ(countOf(text, "\r"), 0);
  EXPECT_THAT(text, HasSubstr("step 1/25 loss 3.000000 lr 0.0003 grad_norm "
                              "0.5000 100.00 ms 40960 tok/s ETA 2s\n"));
  EXPECT_THAT(text, HasSubstr("step 10/25 "));
  EXPECT_THAT(text, HasSubstr("step 13/25 "));
  EXPECT_THAT(text, HasSubstr("skipped (non-finite loss or gradients)\n"));
  EXPECT_THAT(text, HasSubstr("step 20/25 "));
  EXPECT_THAT(text, HasSubstr("step 25/25 loss 2.040000 lr 0.0003 grad_norm "
                              "0.5000 100.00 ms 40960 tok/s ETA 0s\n"));
  EXPECT_THAT(text, Not(HasSubstr("step 2/25")));
}

TEST(ProgressPrinterTest, ValidationGetsItsOwnLine) {
  CapturedOutput tty, log;
  ProgressPrinter a(tty.file(), true, 1000, 100, ConsoleEnvironment{true, 0});
  ProgressPrinter b(log.file(), false, 1000, 100, ConsoleEnvironment{true, 0});
  for (ProgressPrinter *p : {&a, &b}) {
    p->report(stepAt(549));
    StepMetrics m = stepAt(550);
    m.valLoss = 2.31;
    p->report(m);
    p->reportValidation(600, 2.2);
  }
  // Mean 0.1 s per step, 450 left: 45 s.
  EXPECT_THAT(tty.text(), HasSubstr("ETA 45s\nval loss 2.31 at step 550\n"));
  EXPECT_THAT(tty.text(), HasSubstr("\nval loss 2.2 at step 600\n"));
  // Not a logEvery step, but a validation step: the log shows both lines.
  EXPECT_THAT(log.text(), Not(HasSubstr("step 549/1000 ")));
  EXPECT_THAT(log.text(), HasSubstr(" ETA 45s\nval loss 2.31 at step 550\n"));
  EXPECT_THAT(log.text(), HasSubstr("\nval loss 2.2 at step 600\n"));
}

TEST(ProgressPrinterTest, OnlyRankZeroPrints) {
  CapturedOutput tty, log;
  ProgressPrinter a(tty.file(), true, 10, 1, ConsoleEnvironment{false, 1});
  ProgressPrinter b(log.file(), false, 10, 1, ConsoleEnvironment{false, 3});
  for (ProgressPrinter *p : {&a, &b}) {
    StepMetrics m = stepAt(1);
    m.skipped = true;
    m.valLoss = 1;
    p->report(m);
    p->reportValidation(1, 1);
    p->finish();
  }
  EXPECT_EQ(tty.text(), "");
  EXPECT_EQ(log.text(), "");
}

} // namespace
} // namespace kiln::rt::test
