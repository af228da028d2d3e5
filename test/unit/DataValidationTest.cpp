//===- DataValidationTest.cpp - Validation split and fixed batches --------===//

#include "DataTestFiles.h"
#include "TestArtifact.h"

#include "runtime/data/BatchSampler.h"
#include "runtime/data/ValidationSet.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

namespace kiln::rt::test {
namespace {

using data::BatchSampler;
using data::DataFormat;
using data::TokenCorpus;
using data::TokenWindows;
using data::ValidationBatches;
using data::WindowRange;
using ::testing::HasSubstr;

// One text file of tokens 0, 1, 2, ... (under 256 of them, so each byte is
// its own offset): window w starts with token w * seq.
TokenWindows textWindows(int windows, int64_t seq = 2) {
  std::string dir = makeTempDir();
  std::vector<uint8_t> bytes;
  for (int i = 0; i < windows * seq + 1; ++i)
    bytes.push_back(static_cast<uint8_t>(i));
  writeFile(dir + "/corpus.txt", bytes);
  auto corpus = TokenCorpus::open(dir + "/corpus.txt", DataFormat::kAuto, 0, 0);
  EXPECT_TRUE(corpus.ok()) << corpus.status().message();
  auto result = TokenWindows::create(*corpus, seq, 256);
  EXPECT_TRUE(result.ok()) << result.status().message();
  return *result;
}

TEST(DataValidationTest, SplitHoldsOutTheLastWindows) {
  TokenWindows windows = textWindows(100);
  auto split = data::splitOffValidation(windows, 0.1, 4);
  ASSERT_TRUE(split.ok()) << split.status().message();
  EXPECT_EQ(split->train, (WindowRange{0, 90}));
  EXPECT_EQ(split->validation, (WindowRange{90, 100}));
  // Rounded to the nearest window: 0.125 * 100 = 12.5 -> 13 held out.
  split = data::splitOffValidation(windows, 0.125, 4);
  ASSERT_TRUE(split.ok());
  EXPECT_EQ(split->validation.size(), 13u);
  EXPECT_EQ(split->train.size() + split->validation.size(), 100u);
}

TEST(DataValidationTest, SplitWithoutAFullBatchOnEitherSideIsAnError) {
  TokenWindows windows = textWindows(20);
  auto split = data::splitOffValidation(windows, 0.1, 4); // 2 held out
  ASSERT_FALSE(split.ok());
  EXPECT_THAT(split.status().message(),
              HasSubstr("of the 20 windows of " + windows.corpus().spec() +
                        " (seq 2) leaves 18 for training and 2 for "
                        "validation, but each side needs at least one batch "
                        "of 4"));
  split = data::splitOffValidation(windows, 0.9, 4); // 2 left for training
  ASSERT_FALSE(split.ok());
  EXPECT_THAT(split.status().message(), HasSubstr("leaves 2 for training"));
  EXPECT_FALSE(data::splitOffValidation(windows, 0.0, 1).ok());
  EXPECT_FALSE(data::splitOffValidation(windows, 1.0, 1).ok());
  EXPECT_FALSE(data::splitOffValidation(windows, -0.5, 1).ok());
}

TEST(DataValidationTest, TrainingNeverSeesValidationWindows) {
  TokenWindows windows = textWindows(50);
  auto split = data::splitOffValidation(windows, 0.2, 5);
  ASSERT_TRUE(split.ok());
  auto sampler = BatchSampler::create(windows, split->train, 5, 3);
  ASSERT_TRUE(sampler.ok());
  std::vector<int32_t> tokens(10), targets(10);
  std::set<int32_t> seen;
  for (int b = 0; b < 8; ++b) { // one epoch of 40 windows
    ASSERT_TRUE(sampler->fill(tokens.data(), targets.data()).ok());
    for (int r = 0; r < 5; ++r)
      seen.insert(tokens[r * 2] / 2);
  }
  EXPECT_EQ(seen.size(), 40u);
  EXPECT_EQ(*seen.rbegin(), 39);
}

TEST(DataValidationTest, BatchesAreFixedAndWrap) {
  TokenWindows windows = textWindows(100);
  auto split = data::splitOffValidation(windows, 0.1, 4);
  ASSERT_TRUE(split.ok());
  auto validation = ValidationBatches::create(windows, split->validation, 4);
  ASSERT_TRUE(validation.ok()) << validation.status().message();
  // batch m, row r = window 90 + (4m + r) mod 10.
  EXPECT_EQ(validation->windowOf(0, 0), 90u);
  EXPECT_EQ(validation->windowOf(1, 3), 97u);
  EXPECT_EQ(validation->windowOf(2, 1), 99u);
  EXPECT_EQ(validation->windowOf(2, 2), 90u); // wraps
  EXPECT_EQ(validation->windowOf(~0ull, 0),
            90u + static_cast<uint64_t>(
                      (static_cast<unsigned __int128>(~0ull) * 4) % 10));

  std::vector<int32_t> tokens(8), targets(8), again(8), againTargets(8);
  for (uint64_t m = 0; m < 6; ++m) {
    ASSERT_TRUE(validation->fill(m, tokens.data(), targets.data()).ok());
    ASSERT_TRUE(validation->fill(m, again.data(), againTargets.data()).ok());
    EXPECT_EQ(tokens, again);
    EXPECT_EQ(targets, againTargets);
    for (int r = 0; r < 4; ++r) {
      int32_t window = static_cast<int32_t>(validation->windowOf(m, r));
      EXPECT_EQ(tokens[r * 2], window * 2);
      EXPECT_EQ(targets[r * 2 + 1], window * 2 + 2);
    }
  }
}

TEST(DataValidationTest, SeparateCorpusUsesAllItsWindows) {
  TokenWindows windows = textWindows(7);
  auto validation = ValidationBatches::create(windows, windows.all(), 3);
  ASSERT_TRUE(validation.ok());
  EXPECT_EQ(validation->range(), (WindowRange{0, 7}));
  auto tooSmall = ValidationBatches::create(windows, windows.all(), 8);
  ASSERT_FALSE(tooSmall.ok());
  EXPECT_EQ(tooSmall.status().message(),
            "validation data " + windows.corpus().spec() +
                " has 7 windows of seq + 1 = 3 tokens, fewer than one batch "
                "of 8");
}

} // namespace
} // namespace kiln::rt::test
