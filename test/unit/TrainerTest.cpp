//===- TrainerTest.cpp - kiln-run end to end on a hand-built artifact -----===//
//
// Runs the training loop (library entry point and the kiln-run binary) on
// the bigram artifact over a small text file: the loss must fall, runs must
// be deterministic, the requested files must appear, and every user or
// usage error must map to its exit status.
//
//===----------------------------------------------------------------------===//

#include "TestArtifact.h"

#include "runtime/FileIO.h"
#include "runtime/Trainer.h"
#include "runtime/metrics/ScheduleProfile.h"

#include <cstdlib>
#include <fstream>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

namespace kiln::rt::test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class TrainerTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = makeTempDir();
    // The trainer takes the cache from the environment, like kiln-run.
    ::setenv("KILN_CACHE_DIR", (dir_ + "/cache").c_str(), 1);
    writeFile(dir_ + "/bigram.kart", serializeArtifact(bigramArtifact(2, 8, 256)));
    std::string text;
    for (int i = 0; i < 40; ++i)
      text += "the quick brown fox jumps over the lazy dog. ";
    writeFile(dir_ + "/input.txt", text);
  }

  RunOptions options(int64_t steps) {
    RunOptions o;
    o.artifactPath = dir_ + "/bigram.kart";
    o.dataPath = dir_ + "/input.txt";
    o.steps = steps;
    o.schedule.peak = 0.05;
    o.quiet = true;
    return o;
  }

  // Runs the kiln-run binary; returns its exit status, output in `output`.
  int runTool(const std::string &args, std::string *output = nullptr) {
    std::string log = dir_ + "/tool.log";
    std::string cmd = std::string(KILN_RUN_PATH) + " " + args + " >" + log +
                      " 2>&1";
    int status = std::system(cmd.c_str());
    if (output) {
      std::ifstream in(log);
      output->assign(std::istreambuf_iterator<char>(in), {});
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  std::string dir_;
};

TEST_F(TrainerTest, LossFallsAndFilesAreWritten) {
  RunOptions o = options(40);
  o.metricsPath = dir_ + "/metrics.jsonl";
  o.saveInitPath = dir_ + "/init.safetensors";
  o.saveGradsPath = dir_ + "/grads.safetensors";
  auto summary = runTraining(o, stdout);
  ASSERT_TRUE(summary.ok()) << summary.status().message();
  EXPECT_EQ(summary->steps, 40);
  EXPECT_LT(summary->finalLoss, 3.5); // from ln(256) = 5.55
  EXPECT_GT(summary->tokensPerSecond, 0);

  std::ifstream metrics(o.metricsPath);
  std::string line, first;
  int lines = 0;
  while (std::getline(metrics, line))
    if (lines++ == 0)
      first = line;
  EXPECT_EQ(lines, 40);
  EXPECT_THAT(first, HasSubstr("{\"step\":1,\"loss\":5.5"));
  EXPECT_THAT(first, HasSubstr("\"lr\":0.05"));
  EXPECT_THAT(first, HasSubstr("\"grad_norm\":"));
  EXPECT_THAT(first, HasSubstr("\"tokens_per_s\":"));

  auto init = readFileBytes(o.saveInitPath);
  ASSERT_TRUE(init.ok());
  std::string initText(init->begin(), init->end());
  EXPECT_THAT(initText, HasSubstr("\"W\":{\"dtype\":\"F32\",\"shape\":[256,256]"));
  auto grads = readFileBytes(o.saveGradsPath);
  ASSERT_TRUE(grads.ok());
  std::string gradText(grads->begin(), grads->end());
  EXPECT_THAT(gradText, HasSubstr("\"W\":{\"dtype\":\"F32\""));
  EXPECT_THAT(gradText,
              HasSubstr("\"input:tokens\":{\"dtype\":\"I32\",\"shape\":[2,8]"));
  EXPECT_THAT(gradText, HasSubstr("\"input:targets\":{\"dtype\":\"I32\""));
}

TEST_F(TrainerTest, DeterministicForASeedAndSeedMatters) {
  auto a = runTraining(options(5), stdout);
  auto b = runTraining(options(5), stdout);
  RunOptions other = options(5);
  other.seed = 1;
  auto c = runTraining(other, stdout);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->finalLoss, b->finalLoss);
  EXPECT_NE(a->finalLoss, c->finalLoss);
  EXPECT_TRUE(b->kernelCacheHit); // the first run filled the cache
}

TEST_F(TrainerTest, DataTooSmall) {
  writeFile(dir_ + "/tiny.txt", std::string("abc"));
  RunOptions o = options(1);
  o.dataPath = dir_ + "/tiny.txt";
  auto summary = runTraining(o, stdout);
  ASSERT_FALSE(summary.ok());
  EXPECT_THAT(summary.status().message(),
              HasSubstr("has no training window: a window is seq + 1 = 9 tokens within one file, but the longest file has 3 tokens"));
}

TEST_F(TrainerTest, ToolSucceedsAndPrintsSummary) {
  std::string out;
  EXPECT_EQ(runTool(dir_ + "/bigram.kart --data " + dir_ +
                        "/input.txt --steps 3 --lr 0.05 --log-every 1",
                    &out),
            0)
      << out;
  EXPECT_THAT(out, HasSubstr("step 3/3 loss"));
  EXPECT_THAT(out, HasSubstr("final loss "));
  EXPECT_THAT(out, HasSubstr("after 3 steps"));
  EXPECT_THAT(out, HasSubstr("tokens/s"));
}

TEST_F(TrainerTest, ToolProfileAttributesTimeToModelLines) {
  std::string out;
  EXPECT_EQ(runTool(dir_ + "/bigram.kart --data " + dir_ +
                        "/input.txt --steps 2 --quiet --profile",
                    &out),
            0)
      << out;
  EXPECT_THAT(out, HasSubstr("profile of program 'step': 2 timed steps"));
  EXPECT_THAT(out, HasSubstr("gemm 8x256x256 x2 (test.kiln:2:3)"));
  EXPECT_THAT(out, HasSubstr("kernel k_xent [kiln.cross_entropy]"));
  // The time per model line: every entry of "step" comes from line 2 here
  // (all 4 of them, so all of the step's time), "update"'s one from line 9.
  EXPECT_THAT(out, HasSubstr("entries  model line"));
  // Columns: time%, ms/step, GFLOP/s, GB/s, roofline ("-": no peaks known
  // on the CPU without --peak-tflops / --peak-gbps), entries, line.
  EXPECT_THAT(out, testing::ContainsRegex("100.0% +[0-9.]+ +[0-9.]+ +[0-9.]+ +- +4  test.kiln:2:3\n"));
  EXPECT_THAT(out, HasSubstr("no peaks known for the roofline (--peak-tflops, --peak-gbps)"));
  EXPECT_THAT(out, testing::ContainsRegex(" 1  bigram.kiln:9:1\n"));
}

// Times per step come from the runs that were timed: a step program whose
// first run was not (the CUDA backend's attention choice) and that runs
// twice a step (grad_accum 2) over 3 timed runs is 1.5 steps.
TEST(ScheduleProfileTest, PerStepTimesCountOnlyTimedRuns) {
  auto artifact = Artifact::loadBytes(serializeArtifact(bigramArtifact(2, 4, 16)),
                                      "bigram.kart");
  ASSERT_TRUE(artifact.ok()) << artifact.status().message();
  size_t entries = (*artifact)->program(ProgramKind::kStep)->schedule()->size();
  ScheduleTiming timing;
  timing.seconds.assign(entries, 0.0);
  timing.seconds[0] = 0.003; // 3 ms over 3 runs: 1 ms a run, 2 ms a step
  timing.runs = 3;
  std::string out = formatScheduleProfile(**artifact, ProgramKind::kStep, timing,
                                          /*runsPerStep=*/2, /*top=*/1);
  EXPECT_THAT(out, HasSubstr("profile of program 'step': 1.5 timed steps, 2.00 ms/step"));
  EXPECT_THAT(out, testing::ContainsRegex("100.0% +2.000 "));
}

// The roofline columns of the logits GEMM of bigram(2, 4, 16): 4 x 16 x 16
// batched twice is 4,096 FLOPs, and it moves x (8 x 16 f32, 512 bytes), W
// (16 x 16, 1,024) and the logits (512): 2,048 bytes, 2 FLOP/byte. At 1 us
// a run that is 4.096 GFLOP/s and 2.048 GB/s. Under 100 GFLOP/s and 10 GB/s
// the ridge is at 10 FLOP/byte: memory-bound, 20% of 10 GB/s. Under
// 1,000 GB/s the ridge is at 0.1: compute-bound, 4% of 100 GFLOP/s.
TEST(ScheduleProfileTest, RooflineOfAGemm) {
  auto artifact = Artifact::loadBytes(serializeArtifact(bigramArtifact(2, 4, 16)),
                                      "bigram.kart");
  ASSERT_TRUE(artifact.ok()) << artifact.status().message();
  const schema::Step &gemm = *(*artifact)->program(ProgramKind::kStep)->schedule()->Get(1);
  EntryWork work = describeScheduleEntry(**artifact, gemm);
  EXPECT_EQ(work.what, "gemm 4x16x16 x2");
  EXPECT_EQ(work.flops, 4096);
  EXPECT_EQ(work.bytes, 2048);
  size_t entries = (*artifact)->program(ProgramKind::kStep)->schedule()->size();
  ScheduleTiming timing;
  timing.seconds.assign(entries, 0.0);
  timing.seconds[1] = 1e-6;
  timing.runs = 1;
  std::string memoryBound = formatScheduleProfile(**artifact, ProgramKind::kStep, timing, 1, 1,
                                                  DevicePeaks{100e9, 10e9});
  EXPECT_THAT(memoryBound, HasSubstr("roofline under 0.1 TFLOP/s and 10 GB/s"));
  EXPECT_THAT(memoryBound, HasSubstr("    4.10     2.05   20% mem      1  gemm 4x16x16 x2"));
  std::string computeBound = formatScheduleProfile(**artifact, ProgramKind::kStep, timing, 1, 1,
                                                   DevicePeaks{100e9, 1000e9});
  EXPECT_THAT(computeBound, HasSubstr("    4.10     2.05    4% fp       1  gemm 4x16x16 x2"));
  // Only a FLOP peak: the share of it.
  std::string flopsOnly = formatScheduleProfile(**artifact, ProgramKind::kStep, timing, 1, 1,
                                                DevicePeaks{100e9, std::nullopt});
  EXPECT_THAT(flopsOnly, HasSubstr("    4.10     2.05    4% fp       1  gemm 4x16x16 x2"));
}

// Attention's FLOPs from its cuDNN descriptor: causal [T = S = 4] keeps
// 4 + 3 + 2 + 1 = 10 of 16 (query, key) pairs.
TEST(ScheduleProfileTest, AttentionFlopsCountKeptPairs) {
  flatbuffers::FlatBufferBuilder fbb;
  auto forward = schema::CreateCudnnAttention(fbb, /*backward=*/false, /*batch=*/2, /*heads=*/3,
                                              /*kv_heads=*/3, /*q_len=*/4, /*kv_len=*/4,
                                              /*head_dim=*/8, /*value_dim=*/8, 1.0f,
                                              /*causal=*/true);
  fbb.Finish(forward);
  const auto *a = flatbuffers::GetRoot<schema::CudnnAttention>(fbb.GetBufferPointer());
  // 2 B H pairs (D + Dv) = 2 * 2 * 3 * 10 * 16.
  EXPECT_EQ(attentionFlops(*a), 1920);
}

TEST_F(TrainerTest, ToolUserErrorsExitOne) {
  std::string out;
  EXPECT_EQ(runTool(dir_ + "/bigram.kart --data /nonexistent.txt --steps 1",
                    &out),
            1);
  EXPECT_THAT(out, HasSubstr("kiln-run: error: data pattern /nonexistent.txt matches no file"));
  // The bigram model reads tokens and targets: data is required.
  EXPECT_EQ(runTool(dir_ + "/bigram.kart --steps 1", &out), 1);
  EXPECT_THAT(out, HasSubstr("bigram.kart: the model reads inputs (tokens, "
                             "targets), so --data SPEC is required"));
  writeFile(dir_ + "/foreign.kart", std::string("PK\x03\x04 a zip file"));
  EXPECT_EQ(runTool(dir_ + "/foreign.kart --data x --steps 1", &out), 1);
  EXPECT_THAT(out, HasSubstr("not a Kiln artifact"));
}

TEST_F(TrainerTest, ToolUsageErrorsExitTwo) {
  std::string out;
  EXPECT_EQ(runTool("--help", &out), 0);
  EXPECT_THAT(out, HasSubstr("usage: kiln-run"));
  EXPECT_EQ(runTool("", &out), 2);
  EXPECT_EQ(runTool("m.kart --data d --steps 1 --bogus", &out), 2);
  EXPECT_THAT(out, HasSubstr("kiln-run: error: unknown option '--bogus'"));
  // One line pointing at --help, not the whole help.
  EXPECT_THAT(out, HasSubstr("(kiln-run --help lists the options)"));
  EXPECT_THAT(out, Not(HasSubstr("usage: kiln-run")));
  // A near miss names the flag meant.
  EXPECT_EQ(runTool("m.kart --data d --stepz 3", &out), 2);
  EXPECT_THAT(out, HasSubstr("unknown option '--stepz'; did you mean '--steps'?"));
  EXPECT_EQ(runTool("m.kart --data d --steps 3 --checkpoint-evry=2", &out), 2);
  EXPECT_THAT(out, HasSubstr("did you mean '--checkpoint-every'?"));
  EXPECT_EQ(runTool("--version", &out), 0);
  EXPECT_THAT(out, HasSubstr("kiln-run (Kiln) "));
  EXPECT_THAT(out, HasSubstr("artifact format "));
  EXPECT_EQ(runTool("m.kart --data d --steps", &out), 2);
  EXPECT_THAT(out, HasSubstr("--steps expects a value"));
  EXPECT_EQ(runTool("m.kart --data d --steps x", &out), 2);
  EXPECT_EQ(runTool("m.kart --data d --steps 0", &out), 2);
  EXPECT_EQ(runTool("m.kart --data d", &out), 2);
  EXPECT_THAT(out, HasSubstr("missing --steps N"));
  EXPECT_EQ(runTool("m.kart --data d --steps 1 --lr nan", &out), 2);
}

} // namespace
} // namespace kiln::rt::test
