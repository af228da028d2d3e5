//===- VocabularyCheckTest.cpp - Token ids beyond the model's vocabulary --===//
//
// kilnc writes TrainConfig.vocab_size from the ops that token ids index, and
// kiln-run refuses data with larger ids before compiling anything, instead
// of letting the embedding kernel read out of bounds. The case that matters:
// a GPT-2 token shard (ids up to 50256) fed to the byte-level tiny_gpt
// (vocabulary 256).
//
//===----------------------------------------------------------------------===//

#include "runtime/Artifact.h"
#include "runtime/FileIO.h"
#include "runtime/GradientCheck.h"
#include "runtime/Trainer.h"
#include "runtime/data/LlmcShard.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;
using namespace kiln::rt;

// An llm.c shard of `count` GPT-2-like ids: "Hello, world" and end-of-text
// (50256) repeated.
std::vector<uint8_t> gpt2Shard(int32_t count) {
  const uint16_t ids[] = {15496, 11, 995, 50256};
  std::vector<int32_t> header(data::kLlmcHeaderInts, 0);
  header[0] = data::kLlmcGpt2Magic;
  header[1] = data::kLlmcGpt2Version;
  header[2] = count;
  std::vector<uint8_t> bytes(header.size() * 4 + size_t(count) * 2);
  std::memcpy(bytes.data(), header.data(), header.size() * 4);
  for (int32_t i = 0; i < count; ++i)
    std::memcpy(bytes.data() + header.size() * 4 + 2 * i, &ids[i % 4], 2);
  return bytes;
}

class VocabularyCheckTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kiln-vocab-test-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    // Kernels would land here: the check must come before compiling them.
    ::setenv("KILN_CACHE_DIR", (dir_ / "cache").c_str(), 1);
    artifact_ = (dir_ / "tiny_gpt.kart").string();
    std::string cmd = std::string(KILNC_PATH) + " " + KILN_SOURCE_DIR +
                      "/models/tiny_gpt.kiln -o " + artifact_;
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    shard_ = (dir_ / "fineweb_train_000001.bin").string();
    std::vector<uint8_t> bytes = gpt2Shard(1000);
    std::ofstream(shard_, std::ios::binary)
        .write(reinterpret_cast<const char *>(bytes.data()), bytes.size());
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  std::string artifact_, shard_;
};

TEST_F(VocabularyCheckTest, TinyGptCarriesItsVocabulary) {
  auto artifact = Artifact::loadFile(artifact_);
  ASSERT_TRUE(artifact.ok()) << artifact.status().message();
  EXPECT_EQ((*artifact)->root().train()->vocab_size(), 256);
}

TEST_F(VocabularyCheckTest, Gpt2ShardIsRejectedBeforeTraining) {
  RunOptions options;
  options.artifactPath = artifact_;
  options.dataPath = shard_;
  options.steps = 1;
  options.quiet = true;
  auto summary = runTraining(options, stdout);
  ASSERT_FALSE(summary.ok());
  EXPECT_EQ(summary.status().code(), StatusCode::kInvalidArgument);
  // The first batch is read before the kernels are compiled, so a shard of
  // another tokenizer fails at once, naming the file and the token.
  const std::string message = summary.status().message();
  EXPECT_EQ(message.rfind("data file " + shard_ + ": token id ", 0), 0u) << message;
  EXPECT_NE(message.find("is not below the model's vocabulary size 256"),
            std::string::npos) << message;
  EXPECT_FALSE(fs::exists(dir_ / "cache")) << "kernels were compiled first";

  // The gradient check reads the same data the same way.
  options.steps = 0;
  options.checkGrads = 4;
  auto report = runGradientCheck(options, stdout);
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.status().message().find("is not below the model's vocabulary size 256"),
            std::string::npos);
}

} // namespace
