//===- GradientCheckTest.cpp - kiln-run --check-grads ---------------------===//
//
// The pieces of the finite-difference check (entry sampling, the error
// measure, the algorithm on a loss with known gradients and planted bugs),
// then the whole check on the bigram artifact: correct kernels pass, a
// cross-entropy kernel with a flipped gradient sign fails, an optimizer that
// moves parameters at lr 0 is refused, and the tool's exit status follows.
//
//===----------------------------------------------------------------------===//

#include "TestArtifact.h"

#include "runtime/GradientCheck.h"
#include "runtime/PaddedLayout.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <set>
#include <sys/wait.h>

namespace kiln::rt::test {
namespace {

using ::testing::HasSubstr;

TEST(GradientCheckTest, SampleEntriesAreDistinctSortedAndSeeded) {
  std::vector<int64_t> a = sampleEntries(1000000, 24, 5, "wte");
  ASSERT_EQ(a.size(), 24u);
  EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
  EXPECT_EQ(std::set<int64_t>(a.begin(), a.end()).size(), 24u);
  EXPECT_GE(a.front(), 0);
  EXPECT_LT(a.back(), 1000000);
  EXPECT_EQ(sampleEntries(1000000, 24, 5, "wte"), a);
  EXPECT_NE(sampleEntries(1000000, 24, 6, "wte"), a);
  EXPECT_NE(sampleEntries(1000000, 24, 5, "wpe"), a);
  // Without replacement even when nearly every entry is drawn.
  std::vector<int64_t> most = sampleEntries(30, 29, 1, "b");
  EXPECT_EQ(std::set<int64_t>(most.begin(), most.end()).size(), 29u);
}

TEST(GradientCheckTest, SmallTensorsAreCheckedWhole) {
  EXPECT_THAT(sampleEntries(4, 24, 0, "c"), ::testing::ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(sampleEntries(3, 3, 0, "c"), ::testing::ElementsAre(0, 1, 2));
}

TEST(GradientCheckTest, RelativeError) {
  EXPECT_EQ(gradientRelativeError({1, -2, 3}, {1, -2, 3}), 0);
  // A flipped sign is an O(1) error: |2g| / (2|g| + 1e-3).
  EXPECT_NEAR(gradientRelativeError({-1, 2, -3}, {1, -2, 3}), 1.0, 1e-3);
  // A missing factor 2 (say a dropped term of x*x): |g| / 3|g|.
  EXPECT_NEAR(gradientRelativeError({2, 4}, {1, 2}), 1.0 / 3, 1e-3);
  // A zero gradient with differences at rounding level passes on the floor.
  EXPECT_LT(gradientRelativeError({1e-6, -1e-6}, {0, 0}), 2e-3);
  EXPECT_TRUE(std::isnan(gradientRelativeError({NAN}, {1})));
}

// L = sum_i c_i * sin(x_i) + sum_j y_j^3 / 3 over two parameters whose
// gradients a closure writes, like a step writes its Gradient buffers;
// `flipY` plants a sign bug in the gradient of y only.
struct SyntheticModel {
  std::vector<float> x = {0.3f, -1.2f, 2.0f, 0.7f, -0.1f, 1.5f};
  std::vector<float> y = {1.5f, -0.5f, 0.25f};
  std::vector<float> gx = std::vector<float>(6), gy = std::vector<float>(3);
  bool flipY = false;
  int evaluations = 0;

  std::vector<CheckedParameter> parameters() {
    return {{"x", {2, 3}, x.data(), gx.data(), 6},
            {"y", {3}, y.data(), gy.data(), 3}};
  }
  LossFunction loss() {
    return [this]() -> StatusOr<double> {
      ++evaluations;
      double l = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        l += (i + 1) * std::sin(x[i]);
        gx[i] = float((i + 1) * std::cos(x[i]));
      }
      for (size_t j = 0; j < y.size(); ++j) {
        l += double(y[j]) * y[j] * y[j] / 3;
        gy[j] = float(y[j] * y[j]) * (flipY ? -1 : 1);
      }
      return double(float(l)); // the loss is float32 in an artifact
    };
  }
};

TEST(GradientCheckTest, CorrectGradientsPassAndValuesAreRestored) {
  SyntheticModel model;
  std::vector<float> x0 = model.x, y0 = model.y;
  GradientCheckOptions options;
  options.entriesPerParameter = 4;
  auto report = checkGradients(model.parameters(), model.loss(), options);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_TRUE(report->passed());
  ASSERT_EQ(report->parameters.size(), 2u);
  EXPECT_EQ(report->parameters[0].entries, 4); // 4 of 6
  EXPECT_EQ(report->parameters[1].entries, 3); // all of 3
  for (const ParameterCheck &p : report->parameters)
    EXPECT_LT(p.relativeError, 1e-3) << p.name;
  EXPECT_EQ(model.evaluations, 1 + 2 * (4 + 3));
  EXPECT_EQ(model.x, x0); // bit for bit
  EXPECT_EQ(model.y, y0);
}

TEST(GradientCheckTest, PlantedSignBugFailsItsParameterOnly) {
  SyntheticModel model;
  model.flipY = true;
  auto report = checkGradients(model.parameters(), model.loss(), {});
  ASSERT_TRUE(report.ok());
  EXPECT_FALSE(report->passed());
  EXPECT_EQ(report->failures(), 1);
  EXPECT_TRUE(report->parameters[0].ok);
  EXPECT_FALSE(report->parameters[1].ok);
  EXPECT_GT(report->parameters[1].relativeError, 0.5);
  std::string text = formatGradientCheckReport(*report);
  EXPECT_THAT(text, HasSubstr("gradient check: FAIL (1 of 2 parameters)"));
  // y = 1.5 has the largest |2 y^2| error; its entry is named.
  EXPECT_THAT(text, HasSubstr("FAIL (worst entry [0]: finite difference 2.25"));
  EXPECT_THAT(text, HasSubstr("gradient -2.25"));
}

TEST(GradientCheckTest, PaddedParameterIsCheckedInItsLogicalRegion) {
  // A [2, 3] parameter stored padded as [3, 4] (pad-dims). L = sum of
  // (k + 1) * v^2 / 2 over the logical entries k; the padding's gradient is
  // garbage (1000), so reading or perturbing any padded element, or any
  // logical entry at its unpadded offset, would fail the check.
  const std::vector<int64_t> logical = {2, 3}, stored = {3, 4};
  std::vector<float> v(12, 0.0f), g(12, 1000.0f);
  for (int64_t k = 0; k < 6; ++k)
    v[paddedOffset(k, logical, stored)] = 0.5f + 0.25f * k;
  std::vector<float> v0 = v;
  CheckedParameter p{"w", logical, v.data(), g.data(), 6};
  p.storageShape = stored;
  auto loss = [&]() -> StatusOr<double> {
    double l = 0;
    for (int64_t k = 0; k < 6; ++k) {
      int64_t o = paddedOffset(k, logical, stored); // (k / 3) * 4 + k % 3
      l += (k + 1) * double(v[o]) * v[o] / 2;
      g[o] = float((k + 1) * v[o]);
    }
    for (int64_t o : {3, 7, 8, 9, 10, 11}) // the padding: never touched
      EXPECT_EQ(v[o], 0.0f) << o;
    return double(float(l));
  };
  auto report = checkGradients({p}, loss, {});
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_TRUE(report->passed()) << formatGradientCheckReport(*report);
  EXPECT_EQ(report->parameters[0].entries, 6);
  EXPECT_EQ(report->parameters[0].shape, logical);
  EXPECT_EQ(v, v0);
}

TEST(GradientCheckTest, NonFiniteLossIsAnError) {
  std::vector<float> x = {1}, g = {0};
  auto report = checkGradients({{"x", {1}, x.data(), g.data(), 1}},
                               [] { return StatusOr<double>(NAN); }, {});
  ASSERT_FALSE(report.ok());
  EXPECT_THAT(report.status().message(), HasSubstr("the loss is nan"));
}

TEST(GradientCheckTest, ReportFormat) {
  GradientCheckReport report;
  report.loss = 2.5;
  report.step = 1e-2;
  report.tolerance = 1e-2;
  report.resolution = 1.2e-5;
  ParameterCheck a;
  a.name = "wte";
  a.shape = {256, 8};
  a.entries = 24;
  a.relativeError = 3.1e-5;
  a.ok = true;
  report.parameters.push_back(a);
  std::string text = formatGradientCheckReport(report);
  EXPECT_THAT(text, HasSubstr("  wte  [256, 8]     24 entries  rel err 3.10e-05  ok\n"));
  EXPECT_THAT(text, HasSubstr("gradient check: PASS\n"));
  // Differences at the loss's resolution: reported as such, not a failure.
  ParameterCheck b = a;
  b.name = "Block.0.wq";
  b.ok = false;
  b.relativeError = 2e-2;
  b.worstEntry = 9;
  b.worstFiniteDifference = 2.4e-5;
  b.worstGradient = 0.5e-5;
  b.belowResolution = true;
  report.parameters.push_back(b);
  text = formatGradientCheckReport(report);
  EXPECT_THAT(text, HasSubstr("rel err 2.00e-02  below resolution (worst entry [1, 1]: "
                              "finite difference 2.4e-05"));
  EXPECT_THAT(text, HasSubstr("every difference within 4x the resolution: rounding, "
                              "not checked at this h)"));
  EXPECT_EQ(report.failures(), 0);
  EXPECT_TRUE(report.passed());
  EXPECT_THAT(text, HasSubstr("gradient check: PASS (1 of 2 parameters; 1 below the "
                              "resolution at h = 0.01, not checked: a larger "
                              "--grad-step checks them)\n"));
  // A real failure beside it fails the run.
  ParameterCheck c = b;
  c.name = "Block.0.wk";
  c.belowResolution = false;
  report.parameters.push_back(c);
  text = formatGradientCheckReport(report);
  EXPECT_THAT(text, HasSubstr("  Block.0.wk [256, 8]     24 entries  rel err 2.00e-02  FAIL ("));
  EXPECT_THAT(text, HasSubstr("gradient check: FAIL (1 of 3 parameters)\n"));
  EXPECT_FALSE(report.passed());
  // Nothing checked at all does not pass.
  report.parameters = {b};
  text = formatGradientCheckReport(report);
  EXPECT_FALSE(report.passed());
  EXPECT_THAT(text, HasSubstr("gradient check: NOTHING CHECKED (all 1 parameters below the "
                              "resolution at h = 0.01; try a larger --grad-step)\n"));
}

// A planted sign bug on gradients of 1e-3 under a loss of 1000: at
// h = 1e-2 the loss's float32 ulp (6.1e-5) over 2h is 3.1e-3, so the wrong
// and the right gradient are both within rounding (below resolution, not a
// failure); at h = 0.5 the resolution is 6.1e-5 and the bug fails. The loss
// is linear, so a large h costs no truncation error here.
TEST(GradientCheckTest, BelowResolutionUntilTheStepResolvesIt) {
  std::vector<float> x = {0.25f, -0.5f, 0.75f}, g(3, 0.0f);
  auto loss = [&]() -> StatusOr<double> {
    double l = 1000;
    for (size_t i = 0; i < x.size(); ++i) {
      l += 1e-3 * double(i + 1) * x[i];
      g[i] = -float(1e-3 * double(i + 1)); // the planted bug: wrong sign
    }
    return double(float(l));
  };
  std::vector<CheckedParameter> params = {{"x", {3}, x.data(), g.data(), 3}};
  auto fine = checkGradients(params, loss, {});
  ASSERT_TRUE(fine.ok()) << fine.status().message();
  EXPECT_TRUE(fine->parameters[0].belowResolution) << formatGradientCheckReport(*fine);
  EXPECT_EQ(fine->failures(), 0);
  EXPECT_FALSE(fine->passed()); // nothing was checked
  GradientCheckOptions coarse;
  coarse.step = 0.5;
  auto resolved = checkGradients(params, loss, coarse);
  ASSERT_TRUE(resolved.ok());
  EXPECT_FALSE(resolved->parameters[0].belowResolution) << formatGradientCheckReport(*resolved);
  EXPECT_EQ(resolved->failures(), 1);
  EXPECT_GT(resolved->parameters[0].relativeError, 0.5);
}

// The whole check on the bigram artifact (vocabulary 16, so that most
// entries of W sit in rows of tokens the batch uses and have gradients).
class GradientCheckRunTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = makeTempDir();
    ::setenv("KILN_CACHE_DIR", (dir_ + "/cache").c_str(), 1);
    // Byte-level data with ids in [0, 16) from a small LCG.
    std::vector<uint8_t> bytes(200);
    uint32_t state = 12345;
    for (uint8_t &b : bytes) {
      state = state * 1103515245u + 12345u;
      b = static_cast<uint8_t>((state >> 16) % 16);
    }
    writeFile(dir_ + "/data.txt", bytes);
  }

  std::string writeArtifact(const ArtifactSpec &spec) {
    std::string path = dir_ + "/bigram" + std::to_string(count_++) + ".kart";
    writeFile(path, serializeArtifact(spec));
    return path;
  }

  RunOptions options(const std::string &artifact) {
    RunOptions o;
    o.artifactPath = artifact;
    o.dataPath = dir_ + "/data.txt";
    o.checkGrads = 24;
    o.seed = 3;
    o.quiet = true;
    return o;
  }

  // Replaces `from` by `to` in kernel `kernel`'s source.
  static ArtifactSpec patchKernel(ArtifactSpec spec, size_t kernel,
                                  const std::string &from,
                                  const std::string &to) {
    std::string &source = spec.kernels[kernel].source;
    size_t at = source.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos)
      source.replace(at, from.size(), to);
    return spec;
  }

  int runTool(const std::string &args, std::string *output) {
    std::string log = dir_ + "/tool.log";
    std::string cmd =
        std::string(KILN_RUN_PATH) + " " + args + " >" + log + " 2>&1";
    int status = std::system(cmd.c_str());
    std::ifstream in(log);
    output->assign(std::istreambuf_iterator<char>(in), {});
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  std::string dir_;
  int count_ = 0;
};

TEST_F(GradientCheckRunTest, BigramPasses) {
  auto report =
      runGradientCheck(options(writeArtifact(bigramArtifact(2, 8, 16))), stdout);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_NEAR(report->loss, std::log(16.0), 0.1); // W ~ N(0, 0.02)
  ASSERT_EQ(report->parameters.size(), 1u);
  EXPECT_EQ(report->parameters[0].name, "W");
  EXPECT_EQ(report->parameters[0].entries, 24);
  EXPECT_LT(report->parameters[0].relativeError, 1e-2);
  EXPECT_TRUE(report->passed()) << formatGradientCheckReport(*report);
}

TEST_F(GradientCheckRunTest, FlippedCrossEntropyGradientFails) {
  // dlogits = (softmax + onehot) / N instead of (softmax - onehot) / N.
  ArtifactSpec spec = patchKernel(bigramArtifact(2, 8, 16), 1,
                                  "- (j == targets[i])", "+ (j == targets[i])");
  // The bug touches only the 16 entries W[token, next token] of the batch;
  // check all 256 so that none is missed.
  RunOptions o = options(writeArtifact(spec));
  o.checkGrads = 256;
  auto report = runGradientCheck(o, stdout);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_FALSE(report->passed());
  EXPECT_GT(report->parameters[0].relativeError, 0.1);
}

TEST_F(GradientCheckRunTest, NeverRunsTheUpdateProgram) {
  // An optimizer that wrecks every parameter: were "update" run between
  // loss evaluations, the differences would be of a moving function.
  ArtifactSpec spec = patchKernel(bigramArtifact(2, 8, 16), 2,
                                  "p[i] -= lr * wd * p[i];",
                                  "p[i] = 1e6f;");
  auto report = runGradientCheck(options(writeArtifact(spec)), stdout);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_TRUE(report->passed()) << formatGradientCheckReport(*report);
}

TEST_F(GradientCheckRunTest, DataIsRequiredExactlyWhenTheModelHasInputs) {
  RunOptions o = options(writeArtifact(bigramArtifact(2, 8, 16)));
  o.dataPath.clear();
  auto report = runGradientCheck(o, stdout);
  ASSERT_FALSE(report.ok());
  EXPECT_THAT(report.status().message(),
              HasSubstr("the model reads inputs (tokens, targets), so --data "
                        "SPEC is required"));
  // minimalArtifact has neither inputs nor parameters: no data needed, and
  // then nothing to check.
  o = options(writeArtifact(minimalArtifact()));
  o.dataPath.clear();
  report = runGradientCheck(o, stdout);
  ASSERT_FALSE(report.ok());
  EXPECT_THAT(report.status().message(), HasSubstr("no parameters to check"));
}

TEST_F(GradientCheckRunTest, ToolExitStatusFollowsTheVerdict) {
  std::string good = writeArtifact(bigramArtifact(2, 8, 16));
  std::string bad = writeArtifact(patchKernel(
      bigramArtifact(2, 8, 16), 1, "- (j == targets[i])", "+ (j == targets[i])"));
  std::string data = " --data " + dir_ + "/data.txt";
  std::string out;
  EXPECT_EQ(runTool(good + data + " --check-grads 8 --seed 1", &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("kernels: "));
  EXPECT_THAT(out, HasSubstr("  W    [16, 16]      8 entries  rel err "));
  EXPECT_THAT(out, HasSubstr("gradient check: PASS\n"));
  EXPECT_EQ(runTool(bad + data + " --check-grads 256 --quiet", &out), 1) << out;
  EXPECT_THAT(out, HasSubstr("gradient check: FAIL (1 of 1 parameters)\n"));
  EXPECT_THAT(out, ::testing::Not(HasSubstr("kernels: ")));
  EXPECT_EQ(runTool(good + " --check-grads 8", &out), 1);
  EXPECT_THAT(out, HasSubstr("kiln-run: error: " + good +
                             ": the model reads inputs"));
  EXPECT_EQ(runTool(good + data + " --check-grads 8 --steps 3", &out), 2);
  EXPECT_THAT(out, HasSubstr("--steps does not apply to --check-grads"));
}

} // namespace
} // namespace kiln::rt::test
