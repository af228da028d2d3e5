//===- TokenDatasetTest.cpp - Text and llm.c shard data loading -----------===//

#include "TestArtifact.h"

#include "runtime/data/TokenDataset.h"

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

TEST(TokenDatasetTest, BatchOffsetsFollowTheContract) {
  // N = 20 tokens 0..19, B = 2, T = 3: modulus N - T - 1 = 16.
  std::vector<uint8_t> bytes(20);
  for (int i = 0; i < 20; ++i)
    bytes[i] = static_cast<uint8_t>(i);
  auto data = TokenDataset::fromBytes(bytes, "d.txt");
  ASSERT_TRUE(data.ok());
  ASSERT_TRUE(data->checkFits(2, 3, 0).ok());
  // o = ((s*B + r) * T) mod 16
  EXPECT_EQ(data->rowOffset(0, 0, 2, 3), 0);
  EXPECT_EQ(data->rowOffset(0, 1, 2, 3), 3);
  EXPECT_EQ(data->rowOffset(2, 1, 2, 3), 15);
  EXPECT_EQ(data->rowOffset(3, 0, 2, 3), 18 % 16);
  // Huge steps wrap without overflow: (1e18 * 2 * 3) mod 16 computed exactly.
  unsigned __int128 big = (unsigned __int128)1000000000000000000ull * 2 * 3;
  EXPECT_EQ(data->rowOffset(1000000000000000000ll, 0, 2, 3),
            static_cast<int64_t>(big % 16));

  std::vector<int32_t> inputs(6), targets(6);
  data->fillBatch(2, 2, 3, inputs.data(), targets.data());
  // Row 0 starts at 12, row 1 at 15.
  EXPECT_THAT(inputs, ::testing::ElementsAre(12, 13, 14, 15, 16, 17));
  EXPECT_THAT(targets, ::testing::ElementsAre(13, 14, 15, 16, 17, 18));
}

} // namespace
} // namespace kiln::rt::test
