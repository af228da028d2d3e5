//===- RunOptionsTest.cpp - kiln-run command-line parsing ----------------===//

#include "runtime/RunOptions.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kiln::rt {
namespace {

StatusOr<ParsedCommandLine> parse(std::vector<std::string> args) {
  return parseRunCommandLine(args);
}

TEST(RunOptionsTest, AllFlags) {
  auto parsed = parse({"m.kart", "--data", "d.txt", "--steps", "30", "--lr=3e-4",
                       "--seed", "7", "--metrics", "m.jsonl", "--save-init",
                       "i.st", "--save-grads", "g.st", "--log-every", "5",
                       "--quiet", "--profile"});
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  const RunOptions &o = parsed->options;
  EXPECT_EQ(o.artifactPath, "m.kart");
  EXPECT_EQ(o.dataPath, "d.txt");
  EXPECT_EQ(o.steps, 30);
  EXPECT_DOUBLE_EQ(o.schedule.peak, 3e-4);
  EXPECT_EQ(o.seed, 7u);
  EXPECT_EQ(o.metricsPath, "m.jsonl");
  EXPECT_EQ(o.saveInitPath, "i.st");
  EXPECT_EQ(o.saveGradsPath, "g.st");
  EXPECT_EQ(o.logEvery, 5);
  EXPECT_TRUE(o.quiet);
  EXPECT_TRUE(o.profile);
}

TEST(RunOptionsTest, Defaults) {
  auto parsed = parse({"--steps", "1", "--data", "d", "m.kart"});
  ASSERT_TRUE(parsed.ok());
  EXPECT_DOUBLE_EQ(parsed->options.schedule.peak, 1e-3);
  EXPECT_EQ(parsed->options.seed, 0u);
  EXPECT_FALSE(parsed->options.quiet);
}

// --data is checked against the artifact's inputs when it is loaded (an
// artifact without Input buffers needs none), so parsing accepts its absence.
TEST(RunOptionsTest, DataIsOptionalAtParseTime) {
  auto parsed = parse({"m.kart", "--steps", "2"});
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->options.dataPath, "");
  EXPECT_EQ(parsed->options.checkGrads, 0);
}

TEST(RunOptionsTest, CheckGradsNeedsNoSteps) {
  auto parsed = parse({"m.kart", "--check-grads", "24", "--seed", "5",
                       "--data", "d.txt", "--quiet"});
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->options.checkGrads, 24);
  EXPECT_EQ(parsed->options.seed, 5u);
  EXPECT_EQ(parsed->options.dataPath, "d.txt");
  EXPECT_EQ(parsed->options.steps, 0);
  EXPECT_TRUE(parse({"m.kart", "--check-grads=1"}).ok());
  EXPECT_EQ(parsed->options.gradStep, 0); // GradientCheckOptions' default
  auto stepped = parse({"m.kart", "--check-grads", "4", "--grad-step", "0.05"});
  ASSERT_TRUE(stepped.ok()) << stepped.status().message();
  EXPECT_EQ(stepped->options.gradStep, 0.05);
}

// --compile-only needs no --steps; --arch is a comma-separated list.
TEST(RunOptionsTest, CompileOnlyAndArch) {
  auto parsed = parse({"m.kart", "--compile-only", "--arch", "sm_80,sm_90a"});
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_TRUE(parsed->options.compileOnly);
  EXPECT_EQ(parsed->options.archs, (std::vector<std::string>{"sm_80", "sm_90a"}));
  EXPECT_TRUE(parse({"m.kart", "--steps", "3", "--tf32"})->options.tf32);
}

TEST(RunOptionsTest, CompileOnlyRefusesWhatItWouldIgnore) {
  EXPECT_THAT(parse({"m.kart", "--compile-only", "--steps", "3"}).status().message(),
              ::testing::HasSubstr("--steps does not apply to --compile-only"));
  EXPECT_THAT(parse({"m.kart", "--steps", "3", "--arch", "sm_80"}).status().message(),
              ::testing::HasSubstr("--arch applies to --compile-only"));
  EXPECT_THAT(parse({"m.kart", "--compile-only", "--arch", "sm_80,"}).status().message(),
              ::testing::HasSubstr("empty architecture"));
  EXPECT_THAT(parse({"m.kart", "--compile-only", "--check-grads", "2"}).status().message(),
              ::testing::HasSubstr("exclude each other"));
}

TEST(RunOptionsTest, Help) {
  auto parsed = parse({"--bogus-later-ignored", "--help"});
  EXPECT_FALSE(parsed.ok()); // the unknown flag comes first
  parsed = parse({"--help"});
  ASSERT_TRUE(parsed.ok());
  EXPECT_TRUE(parsed->help);
}

TEST(RunOptionsTest, UsageErrors) {
  struct Case {
    std::vector<std::string> args;
    const char *message;
  } cases[] = {
      {{"m.kart", "--data", "d", "--steps", "1", "--bogus"},
       "unknown option '--bogus'"},
      {{"m.kart", "--data", "d", "--steps", "1", "-x"}, "unknown option '-x'"},
      {{"m.kart", "--data", "d", "--steps"}, "--steps expects a value"},
      {{"m.kart", "--data", "d", "--steps", "ten"},
       "--steps expects an integer, got 'ten'"},
      {{"m.kart", "--data", "d", "--steps", "0"}, "--steps must be >= 1"},
      {{"m.kart", "--data", "d", "--steps", "1", "--lr", "-1"},
       "--lr must be a finite number in [0, inf]"},
      {{"m.kart", "--data", "d", "--steps", "1", "--seed", "-3"},
       "--seed expects a non-negative integer"},
      {{"m.kart", "--data=", "--steps", "1"}, "--data expects a non-empty value"},
      {{"m.kart", "--data", "d"}, "missing --steps N (or --check-grads N)"},
      {{"m.kart", "--check-grads", "0"}, "--check-grads must be >= 1"},
      {{"m.kart", "--check-grads", "many"},
       "--check-grads expects an integer, got 'many'"},
      {{"m.kart", "--data", "d", "--steps", "1", "--grad-step", "0.1"},
       "--grad-step applies to --check-grads"},
      {{"m.kart", "--check-grads", "4", "--grad-step", "0"},
       "--grad-step must be a finite number in [1e-06, 1], got 0"},
      {{"m.kart", "--check-grads", "4", "--steps", "3"},
       "--steps does not apply to --check-grads"},
      {{"m.kart", "--lr", "0.1", "--check-grads", "4"},
       "--lr does not apply to --check-grads"},
      {{"m.kart", "--check-grads", "4", "--profile"},
       "--profile does not apply to --check-grads"},
      {{"m.kart", "--check-grads", "4", "--metrics", "m.jsonl"},
       "--metrics does not apply to --check-grads"},
      {{"--data", "d", "--steps", "1"}, "missing the artifact to run"},
      {{"a.kart", "b.kart", "--data", "d", "--steps", "1"},
       "unexpected argument 'b.kart'"},
      {{"m.kart", "--data", "d", "--steps", "1", "--quiet=yes"},
       "--quiet takes no value"},
      {{"m.kart", "--steps", "1", "--resume"}, "--resume needs --checkpoint-dir D"},
      {{"m.kart", "--steps", "1", "--checkpoint-every", "5"},
       "--checkpoint-every needs --checkpoint-dir D"},
      {{"m.kart", "--steps", "1", "--checkpoint-dir", "d", "--resume",
        "--init-from", "w.safetensors"},
       "--resume and --init-from exclude each other"},
      {{"m.kart", "--steps", "1", "--val-data", "v", "--val-fraction", "0.1"},
       "--val-data and --val-fraction exclude each other"},
      {{"m.kart", "--steps", "1", "--val-every", "5"},
       "--val-every needs --val-data or --val-fraction"},
      {{"m.kart", "--steps", "5", "--trace", "t.json", "--trace-steps", "10..20"},
       "--trace-steps 10..20 starts after the last step (--steps 5): the trace would be "
       "empty"},
      {{"m.kart", "--steps", "2", "--metrics", "same.json", "--trace", "same.json"},
       "--metrics and --trace both write same.json; give each its own file"},
      {{"m.kart", "--steps", "10", "--schedule", "cosine", "--warmup", "10"},
       "--warmup 10 leaves no steps to decay over"},
      {{"m.kart", "--steps", "10", "--schedule", "step"},
       "--schedule must be constant, cosine, linear or wsd"},
      {{"m.kart", "--steps", "10", "--min-lr-ratio", "2"},
       "--min-lr-ratio must be a finite number in [0, 1]"},
      {{"m.kart", "--check-grads", "3", "--schedule", "cosine"},
       "--schedule does not apply to --check-grads"},
  };
  for (const Case &c : cases) {
    auto parsed = parse(c.args);
    ASSERT_FALSE(parsed.ok()) << c.message;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(parsed.status().message(), ::testing::HasSubstr(c.message));
  }
}

} // namespace
} // namespace kiln::rt
