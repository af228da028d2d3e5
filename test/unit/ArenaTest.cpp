//===- ArenaTest.cpp - Host storage and the fits-in-memory check ----------===//

#include "TestArtifact.h"

#include "runtime/cpu/Arena.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kiln::rt::test {
namespace {

std::unique_ptr<Artifact> bigram() {
  auto loaded = Artifact::loadBytes(serializeArtifact(bigramArtifact(2, 4, 16)),
                                    "bigram.kart");
  EXPECT_TRUE(loaded.ok()) << loaded.status().message();
  return std::move(loaded).value();
}

TEST(ArenaTest, AliasesShareStorageAndPointersAreAligned) {
  std::unique_ptr<Artifact> artifact = bigram();
  auto arena = cpu::Arena::create(*artifact);
  ASSERT_TRUE(arena.ok()) << arena.status().message();
  for (uint32_t i = 0; i < artifact->numBuffers(); ++i) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>((*arena)->data(i)) % 256, 0u);
    uint32_t storage = artifact->bufferInfo(i).storage;
    EXPECT_EQ((*arena)->data(i), (*arena)->data(storage));
  }
}

TEST(ArenaTest, FitsWhenMemoryIsUnknownOrLargeEnough) {
  std::unique_ptr<Artifact> artifact = bigram();
  EXPECT_TRUE(cpu::Arena::checkFits(*artifact, -1).ok());
  EXPECT_TRUE(cpu::Arena::checkFits(*artifact, int64_t(1) << 40).ok());
}

TEST(ArenaTest, TooLittleMemorySaysWhatTheStepNeeds) {
  std::unique_ptr<Artifact> artifact = bigram();
  Status status = cpu::Arena::checkFits(*artifact, 1024);
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(),
              ::testing::MatchesRegex(
                  "the step needs [0-9.]+ GiB of host memory \\(parameters "
                  "[0-9.]+ GiB, gradients [0-9.]+ GiB, optimizer state "
                  "[0-9.]+ GiB, activations [0-9.]+ GiB, workspace [0-9.]+ "
                  "GiB, other [0-9.]+ GiB\\) but only 0.00 GiB is available; "
                  "compile with a smaller batch .*"));
}

} // namespace
} // namespace kiln::rt::test
