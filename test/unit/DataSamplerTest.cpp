//===- DataSamplerTest.cpp - Windows, the seeded shuffle and positions ----===//

#include "DataTestFiles.h"
#include "TestArtifact.h"

#include "runtime/data/BatchSampler.h"
#include "runtime/data/RandomTokens.h"
#include "runtime/data/TokenWindows.h"
#include "runtime/data/WindowPermutation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <unistd.h>

namespace kiln::rt::test {
namespace {

using data::BatchSampler;
using data::DataFormat;
using data::DataPosition;
using data::TokenCorpus;
using data::TokenWindows;
using data::WindowPermutation;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Shards in a temp dir, one per token list, named shard_00.bin, ...
std::string writeShards(const std::vector<std::vector<uint32_t>> &files) {
  std::string dir = makeTempDir();
  for (size_t f = 0; f < files.size(); ++f)
    writeFile(dir + "/shard_0" + std::to_string(f) + ".bin",
              llmcShardBytes(files[f]));
  return dir + "/shard_*.bin";
}

TokenWindows openWindows(const std::string &pattern, int64_t seq,
                         int64_t vocab = 65536) {
  auto corpus = TokenCorpus::open(pattern, DataFormat::kAuto, 0, 0);
  EXPECT_TRUE(corpus.ok()) << corpus.status().message();
  auto windows = TokenWindows::create(*corpus, seq, vocab);
  EXPECT_TRUE(windows.ok()) << windows.status().message();
  return *windows;
}

struct Batch {
  std::vector<int32_t> tokens, targets;
  bool operator==(const Batch &other) const {
    return tokens == other.tokens && targets == other.targets;
  }
};

Batch nextBatch(BatchSampler &sampler) {
  Batch batch;
  batch.tokens.resize(sampler.batch() * sampler.seq());
  batch.targets.resize(batch.tokens.size());
  Status status = sampler.fill(batch.tokens.data(), batch.targets.data());
  EXPECT_TRUE(status.ok()) << status.message();
  return batch;
}

TEST(DataWindowsTest, WindowsNeverCrossFiles) {
  // seq 3, windows of 4 tokens with stride 3: file 0 (10 tokens) holds 3,
  // file 1 (5 tokens) holds 1 (tokens 104 unused), file 2 (3 tokens) none.
  TokenWindows windows =
      openWindows(writeShards({countingTokens(10), countingTokens(5, 100),
                               countingTokens(3, 200)}),
                  3);
  ASSERT_EQ(windows.size(), 4u);
  std::vector<std::vector<int32_t>> inputs, targets;
  for (uint64_t w = 0; w < windows.size(); ++w) {
    std::vector<int32_t> in(3), out(3);
    ASSERT_TRUE(windows.read(w, in.data(), out.data()).ok());
    inputs.push_back(in);
    targets.push_back(out);
  }
  EXPECT_THAT(inputs,
              ElementsAre(ElementsAre(0, 1, 2), ElementsAre(3, 4, 5),
                          ElementsAre(6, 7, 8), ElementsAre(100, 101, 102)));
  EXPECT_THAT(targets,
              ElementsAre(ElementsAre(1, 2, 3), ElementsAre(4, 5, 6),
                          ElementsAre(7, 8, 9), ElementsAre(101, 102, 103)));
  EXPECT_EQ(windows.locate(3).file, 1u);
  EXPECT_EQ(windows.locate(3).firstToken, 0);
}

TEST(DataWindowsTest, EmptyFilesBetweenOthersAreSkipped) {
  TokenWindows windows = openWindows(writeShards({countingTokens(4),
                                                  {},
                                                  countingTokens(2, 50),
                                                  countingTokens(7, 100)}),
                                     3);
  ASSERT_EQ(windows.size(), 3u); // 1 + 0 + 0 + 2
  EXPECT_EQ(windows.locate(1).file, 3u);
  EXPECT_EQ(windows.locate(2).firstToken, 3);
}

TEST(DataWindowsTest, CorpusWithoutAWindowIsAnError) {
  std::string pattern = writeShards({countingTokens(4), countingTokens(5)});
  auto corpus = TokenCorpus::open(pattern, DataFormat::kAuto, 0, 0);
  ASSERT_TRUE(corpus.ok());
  EXPECT_TRUE(TokenWindows::create(*corpus, 4, 100).ok()); // 5 = seq + 1
  auto windows = TokenWindows::create(*corpus, 5, 100);
  ASSERT_FALSE(windows.ok());
  EXPECT_EQ(windows.status().message(),
            "data " + pattern +
                " (2 files of an llm.c GPT-2 shard (uint16 tokens), 9 tokens) "
                "has no training window: a window is seq + 1 = 6 tokens "
                "within one file, but the longest file has 5 tokens");
  EXPECT_FALSE(TokenWindows::create(*corpus, 0, 100).ok());
  EXPECT_FALSE(TokenWindows::create(*corpus, 4, 0).ok());
}

TEST(DataWindowsTest, TokenAboveVocabularyNamesFileAndOffset) {
  std::vector<uint32_t> tokens = countingTokens(12);
  tokens[5] = 300;
  std::string dir = makeTempDir();
  writeFile(dir + "/a.bin", llmcShardBytes(tokens));
  TokenWindows windows = openWindows(dir + "/a.bin", 3, 256);
  std::vector<int32_t> in(3), out(3);
  EXPECT_TRUE(windows.read(0, in.data(), out.data()).ok()); // tokens 0..3
  Status status = windows.read(1, in.data(), out.data());   // tokens 3..6
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "data file " + dir +
                "/a.bin: token id 300 at token offset 5 (byte offset 1034) "
                "is not below the model's vocabulary size 256");

  // Through a sampler: the error comes back and the position stays put.
  auto sampler = BatchSampler::create(windows, windows.all(), 3, 1);
  ASSERT_TRUE(sampler.ok());
  std::vector<int32_t> batchTokens(9), batchTargets(9);
  status = sampler->fill(batchTokens.data(), batchTargets.data());
  EXPECT_THAT(status.message(), HasSubstr("token id 300 at token offset 5"));
  EXPECT_EQ(sampler->position(), (DataPosition{0, 0}));
}

// A shard rewritten shorter while training (a tokenizer job writing in
// place): its mapping's pages past the new end raise SIGBUS on read, which
// must come back as an error naming the file, not end the process. The
// shard is a few pages long so that the truncation leaves whole pages of
// the mapping without file behind them.
TEST(DataWindowsTest, ShardCutShortWhileMappedIsAnError) {
  // Cut to one page; the window read lies two pages past it whatever the
  // page size (uint16 tokens after the 1024-byte header).
  const int64_t page = ::sysconf(_SC_PAGESIZE);
  const int64_t firstToken = (3 * page - 1024) / 2 / 64 * 64 + 64; // a window start
  const int64_t tokens = firstToken + 4 * page;
  std::string dir = makeTempDir();
  const std::string path = dir + "/a.bin";
  writeFile(path, llmcShardBytes(countingTokens(tokens)));
  TokenWindows windows = openWindows(path, 64);
  std::vector<int32_t> in(64), out(64);
  const uint64_t window = static_cast<uint64_t>(firstToken / 64);
  ASSERT_TRUE(windows.read(window, in.data(), out.data()).ok());
  ASSERT_EQ(::truncate(path.c_str(), page), 0);
  Status status = windows.read(window, in.data(), out.data());
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kDataLoss);
  EXPECT_THAT(status.message(),
              HasSubstr("data file " + path + ": cannot read token offset " +
                        std::to_string(firstToken) + " (byte offset " +
                        std::to_string(1024 + 2 * firstToken) +
                        "): the file was cut short after it was opened (it is " +
                        std::to_string(page) + " bytes now)"));
  // Reads before the cut still work, and a later fault is caught again.
  EXPECT_TRUE(windows.read(0, in.data(), out.data()).ok());
  EXPECT_FALSE(windows.read(window + 1, in.data(), out.data()).ok());
}

// A shard cut inside the page a window reads: the rest of that page reads
// zeros without a fault (the mapping has whole pages), so only the file's
// size tells. Zeros are valid token ids: without the size check the window
// would train on them.
TEST(DataWindowsTest, ShardCutInsideAPageWhileMappedIsAnError) {
  const int64_t page = ::sysconf(_SC_PAGESIZE);
  const int64_t tokens = 4 * page;
  std::string dir = makeTempDir();
  const std::string path = dir + "/a.bin";
  writeFile(path, llmcShardBytes(countingTokens(tokens)));
  TokenWindows windows = openWindows(path, 64);
  // The window of token page (byte 1024 + 2 page, inside the third page);
  // the cut keeps its first 10 tokens.
  const int64_t firstToken = page / 64 * 64;
  const uint64_t window = static_cast<uint64_t>(firstToken / 64);
  const int64_t cutBytes = 1024 + 2 * (firstToken + 10);
  ASSERT_NE(cutBytes % page, 0); // inside a page: no fault on the rest
  std::vector<int32_t> in(64), out(64);
  ASSERT_TRUE(windows.read(window, in.data(), out.data()).ok());
  ASSERT_EQ(::truncate(path.c_str(), cutBytes), 0);
  Status status = windows.read(window, in.data(), out.data());
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kDataLoss);
  EXPECT_THAT(status.message(),
              HasSubstr("data file " + path + ": cannot read token offset " +
                        std::to_string(firstToken + 10) + " (byte offset " +
                        std::to_string(cutBytes) +
                        "): the file was cut short after it was opened (it is " +
                        std::to_string(cutBytes) + " bytes now)"));
  // A window wholly before the cut still reads.
  EXPECT_TRUE(windows.read(window - 1, in.data(), out.data()).ok());
}

// A shard replaced by rename (a new, shorter file at its path) or deleted
// is no cut: the mapping still reads the file it was opened on, whole, and
// the size check looks only at that file (by st_dev and st_ino).
TEST(DataWindowsTest, ShardReplacedOrDeletedWhileMappedStillReads) {
  const int64_t page = ::sysconf(_SC_PAGESIZE);
  std::string dir = makeTempDir();
  const std::string path = dir + "/a.bin";
  writeFile(path, llmcShardBytes(countingTokens(4 * page)));
  TokenWindows windows = openWindows(path, 64);
  const uint64_t window = static_cast<uint64_t>(page / 64);
  std::vector<int32_t> in(64), out(64), before(64);
  ASSERT_TRUE(windows.read(window, before.data(), out.data()).ok());
  writeFile(dir + "/short.bin", llmcShardBytes(countingTokens(100, 7)));
  ASSERT_EQ(::rename((dir + "/short.bin").c_str(), path.c_str()), 0);
  Status status = windows.read(window, in.data(), out.data());
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(in, before);
  ASSERT_EQ(::unlink(path.c_str()), 0);
  status = windows.read(window, in.data(), out.data());
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(in, before);
}

TEST(DataShuffleTest, PermutationIsABijectionForAnySize) {
  for (uint64_t size : {1ull, 2ull, 3ull, 4ull, 5ull, 7ull, 16ull, 17ull,
                        100ull, 1000ull, 4097ull}) {
    for (uint64_t epoch : {0ull, 1ull, 9ull}) {
      WindowPermutation permutation(size, /*seed=*/1234, epoch);
      std::vector<int> seen(size, 0);
      for (uint64_t i = 0; i < size; ++i) {
        uint64_t w = permutation(i);
        ASSERT_LT(w, size);
        ++seen[w];
      }
      for (uint64_t w = 0; w < size; ++w)
        ASSERT_EQ(seen[w], 1)
            << "size " << size << " epoch " << epoch << " window " << w;
    }
  }
}

TEST(DataShuffleTest, SeedsAndEpochsGiveDifferentOrders) {
  const uint64_t size = 1000;
  auto order = [&](uint64_t seed, uint64_t epoch) {
    WindowPermutation permutation(size, seed, epoch);
    std::vector<uint64_t> result;
    for (uint64_t i = 0; i < size; ++i)
      result.push_back(permutation(i));
    return result;
  };
  auto samePlaces = [&](const std::vector<uint64_t> &a,
                        const std::vector<uint64_t> &b) {
    int same = 0;
    for (uint64_t i = 0; i < size; ++i)
      same += a[i] == b[i];
    return same;
  };
  std::vector<uint64_t> base = order(1, 0);
  std::vector<uint64_t> identity(size);
  for (uint64_t i = 0; i < size; ++i)
    identity[i] = i;
  // Two independent random permutations agree in ~1 place on average; 20 is
  // far out in the tail (Poisson(1)), yet far below a broken shuffle.
  EXPECT_LT(samePlaces(base, order(2, 0)), 20);
  EXPECT_LT(samePlaces(base, order(1, 1)), 20);
  EXPECT_LT(samePlaces(base, identity), 20);
  EXPECT_EQ(base, order(1, 0)); // and it is deterministic
}

TEST(DataSamplerTest, OneEpochVisitsEveryWindowOnce) {
  // 1 file of 61 tokens, seq 2: 30 windows; window w starts with token 2w.
  TokenWindows windows = openWindows(writeShards({countingTokens(61)}), 2);
  ASSERT_EQ(windows.size(), 30u);
  auto sampler = BatchSampler::create(windows, windows.all(), 5, 7);
  ASSERT_TRUE(sampler.ok());
  std::multiset<int32_t> firsts;
  for (int b = 0; b < 6; ++b) {
    Batch batch = nextBatch(*sampler);
    for (int r = 0; r < 5; ++r) {
      firsts.insert(batch.tokens[r * 2] / 2);
      EXPECT_EQ(batch.targets[r * 2], batch.tokens[r * 2] + 1);
      EXPECT_EQ(batch.tokens[r * 2 + 1], batch.tokens[r * 2] + 1);
    }
  }
  EXPECT_EQ(sampler->position(), (DataPosition{1, 0}));
  std::multiset<int32_t> all;
  for (int w = 0; w < 30; ++w)
    all.insert(w);
  EXPECT_EQ(firsts, all);
}

TEST(DataSamplerTest, EpochBoundaryInsideABatch) {
  TokenWindows windows = openWindows(writeShards({countingTokens(11)}), 2);
  ASSERT_EQ(windows.size(), 5u);
  auto sampler = BatchSampler::create(windows, windows.all(), 3, 3);
  ASSERT_TRUE(sampler.ok());
  Batch first = nextBatch(*sampler);
  EXPECT_EQ(sampler->position(), (DataPosition{0, 3}));
  Batch second = nextBatch(*sampler);
  // Rows 0-1 finish epoch 0, row 2 starts epoch 1.
  EXPECT_EQ(sampler->position(), (DataPosition{1, 1}));
  const DataPosition rows[] = {{0, 3}, {0, 4}, {1, 0}};
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(second.tokens[r * 2],
              static_cast<int32_t>(2 * sampler->windowAt(rows[r])))
        << "row " << r;
  std::set<int32_t> epoch0 = {first.tokens[0], first.tokens[2], first.tokens[4],
                              second.tokens[0], second.tokens[2]};
  EXPECT_EQ(epoch0, (std::set<int32_t>{0, 2, 4, 6, 8}));
}

TEST(DataSamplerTest, SamplerAtASavedPositionContinuesIdentically) {
  // 3 files, 13 windows, batch 4: positions fall at epoch boundaries and
  // inside epochs.
  TokenWindows windows =
      openWindows(writeShards({countingTokens(16), countingTokens(10, 100),
                               countingTokens(16, 200)}),
                  3);
  ASSERT_EQ(windows.size(), 13u);
  auto reference = BatchSampler::create(windows, windows.all(), 4, 99);
  ASSERT_TRUE(reference.ok());
  std::vector<Batch> batches;
  std::vector<DataPosition> before;
  for (int b = 0; b < 20; ++b) {
    before.push_back(reference->position());
    batches.push_back(nextBatch(*reference));
  }
  for (int k : {0, 1, 3, 4, 7, 13}) {
    auto resumed =
        BatchSampler::create(windows, windows.all(), 4, 99, before[k]);
    ASSERT_TRUE(resumed.ok());
    for (int b = k; b < 20; ++b)
      ASSERT_EQ(nextBatch(*resumed), batches[b])
          << "resumed at batch " << k << ", batch " << b;
  }
  // A different seed is a different stream.
  auto other = BatchSampler::create(windows, windows.all(), 4, 100);
  ASSERT_TRUE(other.ok());
  bool allSame = true;
  for (int b = 0; b < 4; ++b)
    allSame = allSame && nextBatch(*other) == batches[b];
  EXPECT_FALSE(allSame);
}

TEST(DataSamplerTest, RangeRestrictsTheWindows) {
  TokenWindows windows = openWindows(writeShards({countingTokens(21)}), 2);
  ASSERT_EQ(windows.size(), 10u);
  auto sampler = BatchSampler::create(windows, {2, 6}, 2, 5);
  ASSERT_TRUE(sampler.ok());
  std::set<int32_t> seen;
  for (int b = 0; b < 2; ++b) {
    Batch batch = nextBatch(*sampler);
    seen.insert(batch.tokens[0] / 2);
    seen.insert(batch.tokens[2] / 2);
  }
  EXPECT_EQ(seen, (std::set<int32_t>{2, 3, 4, 5}));
}

TEST(DataSamplerTest, BadArgumentsAreErrors) {
  TokenWindows windows = openWindows(writeShards({countingTokens(11)}), 2);
  EXPECT_FALSE(BatchSampler::create(windows, windows.all(), 0, 1).ok());
  EXPECT_FALSE(BatchSampler::create(windows, {3, 3}, 1, 1).ok());
  EXPECT_FALSE(BatchSampler::create(windows, {0, 6}, 1, 1).ok());
  auto late = BatchSampler::create(windows, windows.all(), 1, 1, {2, 5});
  ASSERT_FALSE(late.ok());
  EXPECT_THAT(late.status().message(),
              HasSubstr("data position {epoch 2, index 5} is past the 5 "
                        "training windows of an epoch"));
}

TEST(DataSamplerTest, RandomTokensHaveFileSemantics) {
  const int64_t vocab = 1000;
  auto corpus = TokenCorpus::open("random", DataFormat::kRandom, vocab, 5);
  ASSERT_TRUE(corpus.ok());
  auto windows = TokenWindows::create(*corpus, 8, vocab);
  ASSERT_TRUE(windows.ok());
  EXPECT_EQ(windows->size(), uint64_t(data::kRandomCorpusTokens - 1) / 8);
  auto a = BatchSampler::create(*windows, windows->all(), 4, 11);
  auto b = BatchSampler::create(*windows, windows->all(), 4, 11);
  ASSERT_TRUE(a.ok() && b.ok());
  for (int step = 0; step < 3; ++step) {
    Batch batch = nextBatch(*a);
    EXPECT_EQ(batch, nextBatch(*b));
    for (size_t i = 0; i < batch.tokens.size(); ++i) {
      ASSERT_GE(batch.tokens[i], 0);
      ASSERT_LT(batch.tokens[i], vocab);
    }
    for (int r = 0; r < 4; ++r) // targets are the inputs shifted by one
      for (int t = 0; t + 1 < 8; ++t)
        EXPECT_EQ(batch.targets[r * 8 + t], batch.tokens[r * 8 + t + 1]);
  }
  // A model vocabulary smaller than the random one is caught like a file's.
  auto small = TokenWindows::create(*corpus, 8, 10);
  ASSERT_TRUE(small.ok());
  std::vector<int32_t> in(8), out(8);
  Status status = small->read(0, in.data(), out.data());
  EXPECT_THAT(status.message(), HasSubstr("data file random: token id"));
}

} // namespace
} // namespace kiln::rt::test
