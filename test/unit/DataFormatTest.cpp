//===- DataFormatTest.cpp - Token file formats, detection and globs -------===//

#include "DataTestFiles.h"
#include "TestArtifact.h"

#include "runtime/data/DataFormat.h"
#include "runtime/data/TokenCorpus.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

namespace kiln::rt::test {
namespace {

using data::DataFormat;
using data::TokenCorpus;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<uint32_t> readAll(const TokenCorpus &corpus, size_t file) {
  std::vector<uint32_t> tokens;
  for (int64_t i = 0; i < corpus.fileTokens(file); ++i)
    tokens.push_back(corpus.token(file, i));
  return tokens;
}

StatusOr<TokenCorpus> openFile(const std::string &path,
                               DataFormat format = DataFormat::kAuto) {
  return TokenCorpus::open(path, format, /*vocabForRandom=*/0, /*seed=*/0);
}

// Writes `bytes` to a fresh temp dir under `name` and returns the path.
std::string writeTemp(const std::string &name,
                      const std::vector<uint8_t> &bytes) {
  std::string path = makeTempDir() + "/" + name;
  writeFile(path, bytes);
  return path;
}

TEST(DataFormatTest, ParsesEveryFlagName) {
  for (DataFormat format :
       {DataFormat::kAuto, DataFormat::kText, DataFormat::kLlmc,
        DataFormat::kNanoGpt, DataFormat::kRandom}) {
    auto parsed = data::parseDataFormat(data::dataFormatName(format));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, format);
  }
  auto bad = data::parseDataFormat("fineweb");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "unknown data format 'fineweb' (expected auto, text, llmc, nanogpt "
            "or random)");
}

TEST(DataFormatTest, Gpt2ShardReadsBackExactly) {
  std::string path =
      writeTemp("train_000.bin", llmcShardBytes({1, 50256, 7, 65535, 0}));
  for (DataFormat format : {DataFormat::kAuto, DataFormat::kLlmc}) {
    auto corpus = openFile(path, format);
    ASSERT_TRUE(corpus.ok()) << corpus.status().message();
    ASSERT_EQ(corpus->numFiles(), 1u);
    EXPECT_EQ(corpus->filePath(0), path);
    EXPECT_THAT(readAll(*corpus, 0), ElementsAre(1, 50256, 7, 65535, 0));
    EXPECT_EQ(corpus->describe(),
              "1 file of an llm.c GPT-2 shard (uint16 tokens), 5 tokens");
    EXPECT_EQ(corpus->describeOffset(0, 3),
              "token offset 3 (byte offset 1030)");
  }
}

TEST(DataFormatTest, Llama3ShardReadsBackExactly) {
  // Ids above 65535 prove the uint32 width is used.
  std::string path =
      writeTemp("llama.bin", llmcShardBytes({0, 128255, 70000, 4000000000u},
                                            data::kLlmcLlama3Magic));
  auto corpus = openFile(path);
  ASSERT_TRUE(corpus.ok()) << corpus.status().message();
  EXPECT_THAT(readAll(*corpus, 0), ElementsAre(0, 128255, 70000, 4000000000u));
  EXPECT_EQ(corpus->describeOffset(0, 2), "token offset 2 (byte offset 1032)");
}

TEST(DataFormatTest, LlmcBadMagicIsAnError) {
  std::string path =
      writeTemp("shard.dat", llmcShardBytes({1, 2}, data::kLlmcGpt2Magic + 1));
  auto corpus = openFile(path, DataFormat::kLlmc);
  ASSERT_FALSE(corpus.ok());
  EXPECT_EQ(corpus.status().message(),
            "data file " + path +
                ": no llm.c magic (found 20240521, expected 20240520 or "
                "20240801)");
}

TEST(DataFormatTest, LlmcBadVersionIsAnError) {
  std::string gpt2 =
      writeTemp("a.bin", llmcShardBytes({1, 2}, data::kLlmcGpt2Magic, 7));
  auto corpus = openFile(gpt2);
  ASSERT_FALSE(corpus.ok());
  EXPECT_EQ(corpus.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(corpus.status().message(),
            "data file " + gpt2 +
                ": llm.c token shard version 7, expected 1 for magic 20240520 "
                "(GPT-2, uint16 tokens)");
  std::string llama =
      writeTemp("b.bin", llmcShardBytes({1, 2}, data::kLlmcLlama3Magic, 1));
  corpus = openFile(llama);
  ASSERT_FALSE(corpus.ok());
  EXPECT_THAT(corpus.status().message(),
              HasSubstr("b.bin: llm.c token shard version 1, expected 7 for "
                        "magic 20240801 (Llama-3, uint32 tokens)"));
}

TEST(DataFormatTest, LlmcCountNotMatchingSizeStatesBothNumbers) {
  std::string gpt2 = writeTemp(
      "a.bin", llmcShardBytes({1, 2, 3}, data::kLlmcGpt2Magic, -1, 5));
  auto corpus = openFile(gpt2);
  ASSERT_FALSE(corpus.ok());
  EXPECT_EQ(corpus.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(corpus.status().message(),
            "data file " + gpt2 +
                ": llm.c token shard header says 5 tokens (1034 bytes), but "
                "the file has 1030 bytes");
  // 4-byte tokens: 1024 + 2 * 4 = 1032 expected, 1024 + 3 * 4 = 1036 found.
  std::string llama = writeTemp(
      "b.bin", llmcShardBytes({1, 2, 3}, data::kLlmcLlama3Magic, -1, 2));
  corpus = openFile(llama);
  ASSERT_FALSE(corpus.ok());
  EXPECT_THAT(corpus.status().message(),
              HasSubstr("header says 2 tokens (1032 bytes), but the file has "
                        "1036 bytes"));
  std::string negative =
      writeTemp("c.bin", llmcShardBytes({}, data::kLlmcGpt2Magic, -1, 0));
  std::vector<uint8_t> bytes = llmcShardBytes({});
  bytes[8] = bytes[9] = bytes[10] = bytes[11] = 0xff; // count = -1
  writeFile(negative, bytes);
  corpus = openFile(negative);
  ASSERT_FALSE(corpus.ok());
  EXPECT_THAT(corpus.status().message(), HasSubstr("header says -1 tokens"));
}

TEST(DataFormatTest, LlmcTruncatedHeaderIsAnError) {
  std::vector<uint8_t> bytes = llmcShardBytes({});
  bytes.resize(100);
  std::string path = writeTemp("a.bin", bytes);
  auto corpus = openFile(path);
  ASSERT_FALSE(corpus.ok());
  EXPECT_EQ(corpus.status().message(),
            "data file " + path +
                ": llm.c token shard is truncated (100 bytes, the header "
                "alone is 1024)");
}

TEST(DataFormatTest, NanoGptReadsBackExactly) {
  std::string path = writeTemp("train.bin", nanoGptBytes({50256, 3, 0, 65535}));
  auto corpus = openFile(path, DataFormat::kNanoGpt);
  ASSERT_TRUE(corpus.ok()) << corpus.status().message();
  EXPECT_THAT(readAll(*corpus, 0), ElementsAre(50256, 3, 0, 65535));
  EXPECT_EQ(corpus->describeOffset(0, 3), "token offset 3 (byte offset 6)");
}

TEST(DataFormatTest, NanoGptOddSizeIsAnError) {
  std::string path = writeTemp("train.bin", {1, 0, 2});
  auto corpus = openFile(path, DataFormat::kNanoGpt);
  ASSERT_FALSE(corpus.ok());
  EXPECT_EQ(corpus.status().message(),
            "data file " + path +
                ": a nanoGPT uint16 file must have an even number of bytes, "
                "but it has 3");
}

TEST(DataFormatTest, AutoRejectsBinWithoutMagic) {
  // A nanoGPT file under auto: an error that says which format to ask for.
  std::string path = writeTemp("train.bin", nanoGptBytes({7, 0, 9, 0}));
  auto corpus = openFile(path);
  ASSERT_FALSE(corpus.ok());
  EXPECT_EQ(corpus.status().message(),
            "data file " + path +
                ": no llm.c magic (found 7); for a headerless nanoGPT uint16 "
                "file use format nanogpt");
  std::string tiny = writeTemp("tiny.bin", {1, 2});
  corpus = openFile(tiny);
  ASSERT_FALSE(corpus.ok());
  EXPECT_THAT(
      corpus.status().message(),
      HasSubstr("tiny.bin: no llm.c magic (the file has only 2 bytes)"));
}

TEST(DataFormatTest, TextIsOneTokenPerByte) {
  std::string path = writeTemp("input.txt", {'h', 'i', 0xff, '\n'});
  auto corpus = openFile(path);
  ASSERT_TRUE(corpus.ok()) << corpus.status().message();
  EXPECT_THAT(readAll(*corpus, 0), ElementsAre('h', 'i', 255, '\n'));
  EXPECT_EQ(corpus->describeOffset(0, 2), "token offset 2 (byte offset 2)");
  // Explicit text reads even a .bin shard byte by byte.
  std::string shard = writeTemp("a.bin", llmcShardBytes({1}));
  corpus = openFile(shard, DataFormat::kText);
  ASSERT_TRUE(corpus.ok());
  EXPECT_EQ(corpus->fileTokens(0), 1026);
  EXPECT_EQ(corpus->token(0, 0), uint32_t(data::kLlmcGpt2Magic) & 0xff);
}

TEST(DataFormatTest, AutoDetectsShardMagicWhateverTheName) {
  std::string path = writeTemp("tokens.dat", llmcShardBytes({5, 6}));
  auto corpus = openFile(path);
  ASSERT_TRUE(corpus.ok()) << corpus.status().message();
  EXPECT_THAT(readAll(*corpus, 0), ElementsAre(5, 6));
}

TEST(DataFormatTest, MissingFileAndDirectoryAreErrors) {
  std::string dir = makeTempDir();
  auto corpus = openFile(dir + "/none.txt");
  ASSERT_FALSE(corpus.ok());
  EXPECT_EQ(corpus.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(corpus.status().message(),
            "data pattern " + dir + "/none.txt matches no file");
  corpus = openFile(dir);
  ASSERT_FALSE(corpus.ok());
  EXPECT_EQ(corpus.status().message(),
            "data file " + dir + ": is a directory, not a token file");
}

TEST(DataFormatTest, GlobIsSortedBytewise) {
  std::string dir = makeTempDir();
  // Written out of order; "B" sorts before "a" bytewise (not in most locales).
  for (const char *name :
       {"train_10.bin", "train_02.bin", "train_B.bin", "train_01.bin"})
    writeFile(dir + "/" + name, llmcShardBytes({uint32_t(name[6])}));
  writeFile(dir + "/val_00.bin", llmcShardBytes({9}));
  auto corpus = openFile(dir + "/train_*.bin");
  ASSERT_TRUE(corpus.ok()) << corpus.status().message();
  ASSERT_EQ(corpus->numFiles(), 4u);
  std::vector<std::string> names;
  for (size_t f = 0; f < corpus->numFiles(); ++f)
    names.push_back(
        std::filesystem::path(corpus->filePath(f)).filename().string());
  EXPECT_THAT(names, ElementsAre("train_01.bin", "train_02.bin", "train_10.bin",
                                 "train_B.bin"));
  EXPECT_EQ(corpus->totalTokens(), 4);
}

TEST(DataFormatTest, GlobWithoutMatchNamesThePattern) {
  std::string dir = makeTempDir();
  auto corpus = openFile(dir + "/fineweb_train_*.bin");
  ASSERT_FALSE(corpus.ok());
  EXPECT_EQ(corpus.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(corpus.status().message(),
            "data pattern " + dir + "/fineweb_train_*.bin matches no file");
}

TEST(DataFormatTest, GlobOfMixedFormatsNamesBothFiles) {
  std::string dir = makeTempDir();
  writeFile(dir + "/a.bin", llmcShardBytes({1}));
  writeFile(dir + "/b.bin", llmcShardBytes({1}, data::kLlmcLlama3Magic));
  auto corpus = openFile(dir + "/*.bin");
  ASSERT_FALSE(corpus.ok());
  EXPECT_EQ(corpus.status().message(),
            "data pattern " + dir + "/*.bin mixes formats: " + dir +
                "/a.bin is an llm.c GPT-2 shard (uint16 tokens) but " + dir +
                "/b.bin is an llm.c Llama-3 shard (uint32 tokens)");
  writeFile(dir + "/c.txt", std::string("text"));
  corpus = openFile(dir + "/[ac].*");
  ASSERT_FALSE(corpus.ok());
  EXPECT_THAT(corpus.status().message(),
              HasSubstr("/c.txt is byte-level text"));
}

TEST(DataFormatTest, RandomIsSelectedBySpecOrFormat) {
  auto corpus = TokenCorpus::open("random", DataFormat::kAuto, 1000, 1);
  ASSERT_TRUE(corpus.ok()) << corpus.status().message();
  EXPECT_TRUE(corpus->isRandom());
  EXPECT_EQ(corpus->filePath(0), "random");
  corpus = TokenCorpus::open("random", DataFormat::kRandom, 1000, 1);
  ASSERT_TRUE(corpus.ok());
  corpus = TokenCorpus::open("data/*.bin", DataFormat::kRandom, 1000, 1);
  ASSERT_FALSE(corpus.ok());
  EXPECT_THAT(corpus.status().message(),
              HasSubstr("data format random reads no files"));
  corpus = TokenCorpus::open("random", DataFormat::kNanoGpt, 1000, 1);
  ASSERT_FALSE(corpus.ok());
  corpus = TokenCorpus::open("random", DataFormat::kRandom, 0, 1);
  ASSERT_FALSE(corpus.ok());
  EXPECT_EQ(corpus.status().message(),
            "random tokens need a vocabulary size > 0, got 0");
}

TEST(DataFormatTest, RandomTokensAreDeterministicAndInRange) {
  const int64_t vocab = 50257;
  auto a = TokenCorpus::open("random", DataFormat::kRandom, vocab, 42);
  auto b = TokenCorpus::open("random", DataFormat::kRandom, vocab, 42);
  auto c = TokenCorpus::open("random", DataFormat::kRandom, vocab, 43);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  int differ = 0;
  uint32_t largest = 0;
  // Spread over the whole virtual corpus, not just its start.
  for (int64_t i = 0; i < 20000; ++i) {
    int64_t offset = i * 214748 + (i % 7);
    uint32_t token = a->token(0, offset);
    ASSERT_LT(token, uint32_t(vocab));
    EXPECT_EQ(token, b->token(0, offset));
    differ += token != c->token(0, offset);
    largest = std::max(largest, token);
  }
  // Uniform over 50257 ids: a seed change alters nearly every token, and
  // 20000 draws reach the top 1% of the range (miss chance 0.99^20000).
  EXPECT_GT(differ, 19900);
  EXPECT_GT(largest, uint32_t(vocab * 99 / 100));
}

} // namespace
} // namespace kiln::rt::test
