//===- DataPrefetchTest.cpp - The prefetching loader's thread -------------===//

#include "DataTestFiles.h"
#include "TestArtifact.h"

#include "runtime/data/PrefetchingLoader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace kiln::rt::test {
namespace {

using data::BatchSampler;
using data::DataFormat;
using data::DataPosition;
using data::PrefetchingLoader;
using data::TokenCorpus;
using data::TokenWindows;
using ::testing::HasSubstr;

TokenWindows shardWindows(const std::vector<std::vector<uint32_t>> &files,
                          int64_t seq, int64_t vocab) {
  std::string dir = makeTempDir();
  for (size_t f = 0; f < files.size(); ++f)
    writeFile(dir + "/part_" + std::to_string(f) + ".bin",
              llmcShardBytes(files[f], data::kLlmcLlama3Magic));
  auto corpus = TokenCorpus::open(dir + "/part_*.bin", DataFormat::kAuto, 0, 0);
  EXPECT_TRUE(corpus.ok()) << corpus.status().message();
  auto windows = TokenWindows::create(*corpus, seq, vocab);
  EXPECT_TRUE(windows.ok()) << windows.status().message();
  return *windows;
}

BatchSampler makeSampler(const TokenWindows &windows, int64_t batch,
                         DataPosition start = {}) {
  auto sampler = BatchSampler::create(windows, windows.all(), batch, 17, start);
  EXPECT_TRUE(sampler.ok()) << sampler.status().message();
  return std::move(sampler).value();
}

TEST(DataPrefetchTest, BatchesAndPositionsEqualTheSamplerBitForBit) {
  TokenWindows windows = shardWindows(
      {countingTokens(400), countingTokens(250, 100000)}, 16, 200000);
  for (int depth : {1, 2, 5}) {
    BatchSampler reference = makeSampler(windows, 3);
    PrefetchingLoader loader(makeSampler(windows, 3), depth);
    EXPECT_EQ(loader.position(), (DataPosition{0, 0}));
    std::vector<int32_t> expected(48), expectedTargets(48), got(48),
        gotTargets(48);
    for (int step = 0; step < 30; ++step) { // 40 windows: crosses 2 epochs
      ASSERT_TRUE(reference.fill(expected.data(), expectedTargets.data()).ok());
      Status status = loader.next(got.data(), gotTargets.data());
      ASSERT_TRUE(status.ok()) << status.message();
      ASSERT_EQ(got, expected) << "depth " << depth << " step " << step;
      ASSERT_EQ(gotTargets, expectedTargets);
      // The position of what was handed over, however far the thread is.
      ASSERT_EQ(loader.position(), reference.position());
    }
  }
}

TEST(DataPrefetchTest, PositionIgnoresBatchesPrefetchedButNotHandedOver) {
  TokenWindows windows = shardWindows({countingTokens(200)}, 4, 1000);
  PrefetchingLoader loader(makeSampler(windows, 2), 4);
  std::vector<int32_t> tokens(8), targets(8);
  ASSERT_TRUE(loader.next(tokens.data(), targets.data()).ok());
  // Give the thread time to fill its queue; the position must not move.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(loader.position(), (DataPosition{0, 2}));

  // A loader resumed at that position continues with the next batch.
  BatchSampler reference = makeSampler(windows, 2);
  std::vector<int32_t> skip(8), skipTargets(8);
  ASSERT_TRUE(reference.fill(skip.data(), skipTargets.data()).ok());
  PrefetchingLoader resumed(makeSampler(windows, 2, loader.position()));
  std::vector<int32_t> fromLoader(8), fromResumed(8), fromReference(8);
  ASSERT_TRUE(loader.next(fromLoader.data(), targets.data()).ok());
  ASSERT_TRUE(resumed.next(fromResumed.data(), targets.data()).ok());
  ASSERT_TRUE(reference.fill(fromReference.data(), targets.data()).ok());
  EXPECT_EQ(fromLoader, fromReference);
  EXPECT_EQ(fromResumed, fromReference);
}

TEST(DataPrefetchTest, ThreadErrorsComeBackFromNext) {
  // Every window but one is clean; whichever batch reaches the bad token
  // fails, the batches before it are delivered, and the error sticks.
  std::vector<uint32_t> tokens = countingTokens(41);
  tokens[21] = 5000;
  TokenWindows windows = shardWindows({tokens}, 4, 1000); // 10 windows
  BatchSampler reference = makeSampler(windows, 2);
  PrefetchingLoader loader(makeSampler(windows, 2));
  std::vector<int32_t> expected(8), got(8), targets(8);
  for (;;) {
    Status want = reference.fill(expected.data(), targets.data());
    Status status = loader.next(got.data(), targets.data());
    if (!want.ok()) {
      ASSERT_FALSE(status.ok());
      EXPECT_EQ(status.message(), want.message());
      EXPECT_THAT(status.message(),
                  HasSubstr("part_0.bin: token id 5000 at token offset 21 "
                            "(byte offset 1108)"));
      break;
    }
    ASSERT_TRUE(status.ok()) << status.message();
    EXPECT_EQ(got, expected);
  }
  DataPosition before = loader.position();
  EXPECT_EQ(before, reference.position());
  Status again = loader.next(got.data(), targets.data());
  EXPECT_FALSE(again.ok());
  EXPECT_EQ(loader.position(), before);
}

TEST(DataPrefetchTest, DestructorStopsAThreadWithAFullQueue) {
  TokenWindows windows = shardWindows({countingTokens(100)}, 4, 1000);
  for (int i = 0; i < 20; ++i) {
    PrefetchingLoader loader(makeSampler(windows, 3), 2);
    if (i % 2 == 0) {
      std::vector<int32_t> tokens(12), targets(12);
      ASSERT_TRUE(loader.next(tokens.data(), targets.data()).ok());
    }
  } // joins without hanging, whether the thread waits or fills
}

} // namespace
} // namespace kiln::rt::test
