//===- TokenDatasetTest.cpp - Text and llm.c shard data loading -----------===//

#include "TestArtifact.h"

#include "runtime/data/TokenDataset.h"
#include "runtime/Hash.h"

#include <cstring>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kiln::rt::test {
namespace {

using ::testing::HasSubstr;

std::vector<uint8_t> shardBytes(const std::vector<uint16_t> &tokens,
                                int32_t magic = kShardMagic,
                                int32_t version = kShardVersion,
                                int32_t count = -1) {
  std::vector<int32_t> header(kShardHeaderInts, 0);
  header[0] = magic;
  header[1] = version;
  header[2] = count >= 0 ? count : static_cast<int32_t>(tokens.size());
  std::vector<uint8_t> bytes(header.size() * 4 + tokens.size() * 2);
  std::memcpy(bytes.data(), header.data(), header.size() * 4);
  std::memcpy(bytes.data() + header.size() * 4, tokens.data(),
              tokens.size() * 2);
  return bytes;
}

TEST(TokenDatasetTest, TextBytesAreTokens) {
  std::string text = "hello\xff";
  auto data = TokenDataset::fromBytes(
      std::vector<uint8_t>(text.begin(), text.end()), "input.txt");
  ASSERT_TRUE(data.ok());
  EXPECT_EQ(data->format(), TokenDataset::Format::kText);
  EXPECT_THAT(data->tokens(),
              ::testing::ElementsAre('h', 'e', 'l', 'l', 'o', 255));
}

TEST(TokenDatasetTest, ShardTokens) {
  auto data = TokenDataset::fromBytes(shardBytes({1, 50256, 7}), "a.bin");
  ASSERT_TRUE(data.ok()) << data.status().message();
  EXPECT_EQ(data->format(), TokenDataset::Format::kShard);
  EXPECT_THAT(data->tokens(), ::testing::ElementsAre(1, 50256, 7));
}

TEST(TokenDatasetTest, ShardWrongVersion) {
  auto data = TokenDataset::fromBytes(shardBytes({1, 2}, kShardMagic, 7), "a.bin");
  ASSERT_FALSE(data.ok());
  EXPECT_THAT(data.status().message(),
              HasSubstr("a.bin: llm.c token shard version 7, expected 1"));
}

TEST(TokenDatasetTest, BinWithWrongMagicIsAnError) {
  // A .bin file must be a shard: a near-miss magic is reported, not read as
  // text.
  auto data = TokenDataset::fromBytes(shardBytes({1, 2}, kShardMagic + 1),
                                      "a.bin");
  ASSERT_FALSE(data.ok());
  EXPECT_EQ(data.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(data.status().message(),
              HasSubstr("data file a.bin: not an llm.c token shard: magic "
                        "20240521, expected 20240520"));
  data = TokenDataset::fromBytes({'h', 'i', '\n', 'x', 'y'}, "notes.bin");
  ASSERT_FALSE(data.ok());
  EXPECT_THAT(data.status().message(), HasSubstr("notes.bin: not an llm.c"));
  data = TokenDataset::fromBytes({0x38, 0xd5}, "short.bin");
  ASSERT_FALSE(data.ok());
  EXPECT_THAT(data.status().message(),
              HasSubstr("short.bin: llm.c token shard is truncated (2 bytes"));
}

TEST(TokenDatasetTest, OtherNamesWithWrongMagicAreText) {
  auto data = TokenDataset::fromBytes(shardBytes({1, 2}, kShardMagic + 1),
                                      "a.txt");
  ASSERT_TRUE(data.ok());
  EXPECT_EQ(data->format(), TokenDataset::Format::kText);
  EXPECT_EQ(data->size(), 1024 + 4);
  data = TokenDataset::fromBytes({}, "empty.txt");
  ASSERT_TRUE(data.ok());
  EXPECT_EQ(data->format(), TokenDataset::Format::kText);
}

TEST(TokenDatasetTest, MagicMakesAShardWhateverTheName) {
  // A file that starts with the magic is a shard even without .bin, as
  // llm.c's tools do not insist on the extension either.
  auto data = TokenDataset::fromBytes(shardBytes({9, 300}), "tokens.dat");
  ASSERT_TRUE(data.ok()) << data.status().message();
  EXPECT_EQ(data->format(), TokenDataset::Format::kShard);
  EXPECT_THAT(data->tokens(), ::testing::ElementsAre(9, 300));
  // ...and is held to the shard's rules.
  data = TokenDataset::fromBytes(shardBytes({9}, kShardMagic, 2), "x.txt");
  ASSERT_FALSE(data.ok());
  EXPECT_THAT(data.status().message(), HasSubstr("token shard version 2"));
}

TEST(TokenDatasetTest, ShardCountMismatch) {
  auto data =
      TokenDataset::fromBytes(shardBytes({1, 2, 3}, kShardMagic, 1, 5), "a.bin");
  ASSERT_FALSE(data.ok());
  EXPECT_THAT(data.status().message(),
              HasSubstr("a.bin: llm.c token shard header says 5 tokens (1034 "
                        "bytes), but the file has 1030 bytes"));
}

TEST(TokenDatasetTest, TruncatedShardHeader) {
  std::vector<uint8_t> bytes = shardBytes({});
  bytes.resize(100);
  auto data = TokenDataset::fromBytes(bytes, "a.bin");
  ASSERT_FALSE(data.ok());
  EXPECT_THAT(data.status().message(), HasSubstr("a.bin: llm.c token shard is truncated"));
}

TEST(TokenDatasetTest, MissingFile) {
  auto data = TokenDataset::open("/nonexistent/input.txt");
  ASSERT_FALSE(data.ok());
  EXPECT_EQ(data.status().message(),
            "data file /nonexistent/input.txt: no such file");
}

TEST(TokenDatasetTest, OpenReadsShardFromDisk) {
  std::string dir = makeTempDir();
  writeFile(dir + "/a.bin", shardBytes({5, 6, 7, 8}));
  auto data = TokenDataset::open(dir + "/a.bin");
  ASSERT_TRUE(data.ok()) << data.status().message();
  EXPECT_EQ(data->size(), 4);
}

TEST(TokenDatasetTest, TooSmallForSequence) {
  auto data = TokenDataset::fromBytes({1, 2, 3, 4, 5}, "tiny.txt");
  ASSERT_TRUE(data.ok());
  EXPECT_TRUE(data->checkFits(2, 3, 0).ok()); // 3 + 2 = 5 tokens suffice
  Status status = data->checkFits(2, 4, 0);
  EXPECT_EQ(status.message(), "data file tiny.txt has 5 tokens, but a "
                              "sequence of 4 needs at least 6");
}

TEST(TokenDatasetTest, TokenAboveVocabulary) {
  auto data = TokenDataset::fromBytes(shardBytes({1, 2, 300, 4, 5}), "a.bin");
  ASSERT_TRUE(data.ok());
  EXPECT_THAT(data->checkFits(1, 2, 256).message(),
              HasSubstr("has token id 300 at position 2, but the model's "
                        "vocabulary has 256 tokens"));
  EXPECT_TRUE(data->checkFits(1, 2, 301).ok());
}

TEST(TokenDatasetTest, SplitMix64MatchesTheReferenceSequence) {
  // The first outputs of the reference SplitMix64 generator seeded with 0
  // (state advanced by the golden gamma, then mixed): an oracle in another
  // language rebuilds kiln's batches from exactly this function.
  EXPECT_EQ(splitMix64(0), 0xe220a8397b1dcdafull);
  EXPECT_EQ(splitMix64(0x9e3779b97f4a7c15ull), 0x6e789e6aa1b965f4ull);
}

TEST(TokenDatasetTest, BatchOffsetsFollowTheContract) {
  // N = 20 tokens 0..19, B = 2, T = 3: modulus N - T - 1 = 16.
  std::vector<uint8_t> bytes(20);
  for (int i = 0; i < 20; ++i)
    bytes[i] = static_cast<uint8_t>(i);
  auto data = TokenDataset::fromBytes(bytes, "d.txt");
  ASSERT_TRUE(data.ok());
  ASSERT_TRUE(data->checkFits(2, 3, 0).ok());
  // o = splitMix64(splitMix64(seed) + s*B + r) mod 16
  for (uint64_t seed : {0ull, 7ull})
    for (int64_t s = 0; s < 4; ++s)
      for (int64_t r = 0; r < 2; ++r)
        EXPECT_EQ(data->rowOffset(seed, s, r, 2, 3),
                  static_cast<int64_t>(
                      splitMix64(splitMix64(seed) + uint64_t(s * 2 + r)) % 16));

  std::vector<int32_t> inputs(6), targets(6);
  data->fillBatch(7, 2, 2, 3, inputs.data(), targets.data());
  for (int64_t r = 0; r < 2; ++r) {
    int32_t o = static_cast<int32_t>(data->rowOffset(7, 2, r, 2, 3));
    EXPECT_THAT(std::vector<int32_t>(inputs.begin() + 3 * r, inputs.begin() + 3 * r + 3),
                ::testing::ElementsAre(o, o + 1, o + 2));
    EXPECT_THAT(std::vector<int32_t>(targets.begin() + 3 * r, targets.begin() + 3 * r + 3),
                ::testing::ElementsAre(o + 1, o + 2, o + 3));
  }
}

TEST(TokenDatasetTest, WindowsCoverTheFileAndDependOnTheSeed) {
  std::vector<uint8_t> bytes(20);
  auto data = TokenDataset::fromBytes(bytes, "d.txt");
  ASSERT_TRUE(data.ok());
  // Every one of the 16 start offsets is drawn within 4000 rows, and two
  // seeds give different orders.
  std::vector<int> hits(16, 0);
  int same = 0;
  for (int64_t s = 0; s < 2000; ++s)
    for (int64_t r = 0; r < 2; ++r) {
      int64_t o = data->rowOffset(1, s, r, 2, 3);
      ASSERT_GE(o, 0);
      ASSERT_LT(o, 16);
      ++hits[o];
      same += o == data->rowOffset(2, s, r, 2, 3);
    }
  for (int o = 0; o < 16; ++o)
    EXPECT_GT(hits[o], 150) << "offset " << o; // ~250 expected
  EXPECT_LT(same, 4000 / 8);                    // ~250 expected by chance
}

} // namespace
} // namespace kiln::rt::test
