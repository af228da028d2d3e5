//===- MetricsJsonTest.cpp - JSONL lines and the shared metric mapping ----===//

#include "runtime/Metrics.h"

#include <cmath>
#include <fstream>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <limits>
#include <unistd.h>

namespace kiln::rt::test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

StepMetrics basicStep() {
  StepMetrics m;
  m.step = 7;
  m.loss = 2.5;
  m.lr = 0.001;
  m.stepMs = 12.5;
  m.tokensPerStep = 1024;
  m.tokensPerSecond = 81920;
  return m;
}

TEST(MetricsJsonTest, RequiredFieldsOnly) {
  // Optional metrics that were not measured are omitted, not null.
  EXPECT_EQ(metricsJsonLine(basicStep()),
            "{\"step\":7,\"loss\":2.5,\"lr\":0.001,\"step_ms\":12.5,"
            "\"tokens\":1024,\"tokens_per_s\":81920,\"skipped\":false}");
}

TEST(MetricsJsonTest, AllFields) {
  StepMetrics m = basicStep();
  m.gradNorm = 1.25;
  m.updateNorm = 0.5;
  m.paramNorm = 100;
  m.modelMetrics = {{"blocks.0.attn", 0.75}, {"final_norm", 1.5}};
  m.mfu = 0.375;
  m.peakMemoryBytes = int64_t(5) << 32; // beyond 32 bits, written exactly
  m.skipped = true;
  m.valLoss = 2.25;
  EXPECT_EQ(metricsJsonLine(m),
            "{\"step\":7,\"loss\":2.5,\"lr\":0.001,\"grad_norm\":1.25,"
            "\"update_norm\":0.5,\"param_norm\":100,\"update_ratio\":0.005,"
            "\"metric/blocks.0.attn\":0.75,\"metric/final_norm\":1.5,"
            "\"step_ms\":12.5,\"tokens\":1024,\"tokens_per_s\":81920,"
            "\"mfu\":0.375,\"peak_memory_bytes\":21474836480,"
            "\"skipped\":true,\"val_loss\":2.25}");
}

TEST(MetricsJsonTest, NonFiniteIsNull) {
  StepMetrics m = basicStep();
  m.loss = std::numeric_limits<double>::quiet_NaN();
  m.gradNorm = std::numeric_limits<double>::infinity();
  m.updateNorm = 1;
  m.paramNorm = 0; // ratio is inf: null, like any non-finite value
  m.skipped = true;
  std::string line = metricsJsonLine(m);
  EXPECT_THAT(line, HasSubstr("\"loss\":null,"));
  EXPECT_THAT(line, HasSubstr("\"grad_norm\":null,"));
  EXPECT_THAT(line, HasSubstr("\"update_ratio\":null,"));
  EXPECT_THAT(line, HasSubstr("\"skipped\":true"));
  EXPECT_THAT(line, Not(HasSubstr("nan")));
  EXPECT_THAT(line, Not(HasSubstr("inf")));
}

TEST(MetricsJsonTest, UpdateRatioNeedsBothNorms) {
  StepMetrics m = basicStep();
  m.updateNorm = 2;
  EXPECT_FALSE(m.updateRatio());
  EXPECT_THAT(metricsJsonLine(m), Not(HasSubstr("update_ratio")));
  m.paramNorm = 8;
  ASSERT_TRUE(m.updateRatio());
  EXPECT_EQ(*m.updateRatio(), 0.25);
}

TEST(MetricsJsonTest, LayerNamesAreEscaped) {
  StepMetrics m = basicStep();
  m.modelMetrics = {{"we\"ird\\na\tme", 1}};
  EXPECT_THAT(metricsJsonLine(m),
              HasSubstr("\"metric/we\\\"ird\\\\na\\u0009me\":1,"));
}

TEST(MetricsJsonTest, ValLossOnlyWhenValidationRan) {
  StepMetrics m = basicStep();
  EXPECT_THAT(metricsJsonLine(m), Not(HasSubstr("val_loss")));
  m.valLoss = 3.0;
  EXPECT_THAT(metricsJsonLine(m), HasSubstr(",\"val_loss\":3}"));
}

// Both sinks come from stepMetricFields: the TensorBoard tags pair with the
// JSON keys one to one, with the same values.
TEST(MetricsMappingTest, TensorBoardTagsMatchJsonKeys) {
  StepMetrics m = basicStep();
  m.gradNorm = 1.25;
  m.updateNorm = 0.5;
  m.paramNorm = 100;
  m.modelMetrics = {{"blocks.3.mlp", 0.75}};
  m.mfu = 0.4;
  m.peakMemoryBytes = 1 << 20;
  m.skipped = true;
  m.valLoss = 2.25;
  std::vector<std::pair<std::string, double>> expected = {
      {"train/loss", 2.5},
      {"train/lr", 0.001},
      {"train/grad_norm", 1.25},
      {"train/update_norm", 0.5},
      {"train/param_norm", 100},
      {"train/update_ratio", 0.005},
      {"metric/blocks.3.mlp", 0.75},
      {"perf/step_ms", 12.5},
      {"perf/tokens_per_step", 1024},
      {"perf/tokens_per_s", 81920},
      {"perf/mfu", 0.4},
      {"mem/peak_bytes", 1 << 20},
      {"train/skipped", 1},
      {"val/loss", 2.25},
  };
  EXPECT_EQ(tensorBoardScalars(m), expected);

  std::vector<MetricField> fields = stepMetricFields(m);
  ASSERT_EQ(fields.size(), expected.size());
  std::string line = metricsJsonLine(m);
  for (const MetricField &field : fields)
    EXPECT_THAT(line, HasSubstr("\"" + field.jsonKey + "\":"))
        << field.tensorBoardTag;

  // Absent metrics are absent from both.
  std::vector<std::pair<std::string, double>> minimal =
      tensorBoardScalars(basicStep());
  EXPECT_EQ(minimal.size(), 6u);
  EXPECT_EQ(minimal.back(),
            (std::pair<std::string, double>{"train/skipped", 0}));
}

TEST(MetricsFileTest, OneFlushedLinePerStep) {
  char tmpl[] = "/tmp/kiln-metrics-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  std::string path = std::string(tmpl) + "/m.jsonl";
  {
    auto file = MetricsFile::open(path);
    ASSERT_TRUE(file.ok()) << file.status().message();
    StepMetrics m = basicStep();
    ASSERT_TRUE(file->write(m).ok());
    // Readable before the file is closed (flushed per line).
    std::ifstream early(path);
    std::string line;
    ASSERT_TRUE(std::getline(early, line));
    EXPECT_EQ(line, metricsJsonLine(m));
    m.step = 8;
    ASSERT_TRUE(file->write(m).ok());
  }
  std::ifstream in(path);
  std::string line;
  int lines = 0;
  while (std::getline(in, line))
    ++lines;
  EXPECT_EQ(lines, 2);
  std::system((std::string("rm -rf ") + tmpl).c_str());

  auto bad = MetricsFile::open("/nonexistent-dir/m.jsonl");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(
      bad.status().message(),
      HasSubstr("metrics file /nonexistent-dir/m.jsonl: cannot create"));
}

} // namespace
} // namespace kiln::rt::test
