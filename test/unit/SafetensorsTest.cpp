//===- SafetensorsTest.cpp - Byte layout of written safetensors files -----===//

#include "TestArtifact.h"

#include "runtime/FileIO.h"
#include "runtime/Safetensors.h"

#include <cstring>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

namespace kiln::rt::test {
namespace {

TEST(SafetensorsTest, ByteLayout) {
  float w[] = {1.0f, -2.0f, 0.5f, 4.0f};
  int32_t t[] = {7, 9};
  // Given out of order: the writer sorts by name.
  std::vector<TensorView> tensors = {
      {"z.tok", TensorView::DType::kI32, {2}, t},
      {"a.w", TensorView::DType::kF32, {2, 2}, w},
  };
  auto encoded = encodeSafetensors(tensors);
  ASSERT_TRUE(encoded.ok()) << encoded.status().message();
  const std::string &bytes = *encoded;

  uint64_t headerSize = 0;
  for (int i = 0; i < 8; ++i)
    headerSize |= uint64_t(uint8_t(bytes[i])) << (8 * i);
  EXPECT_EQ(headerSize % 8, 0u);
  ASSERT_EQ(bytes.size(), 8 + headerSize + 16 + 8);

  std::string header = bytes.substr(8, headerSize);
  std::string expected =
      "{\"__metadata__\":{\"format\":\"pt\"},"
      "\"a.w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
      "\"z.tok\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[16,24]}}";
  EXPECT_EQ(header.substr(0, expected.size()), expected);
  EXPECT_EQ(header.find_first_not_of(' ', expected.size()), std::string::npos);

  const char *data = bytes.data() + 8 + headerSize;
  EXPECT_EQ(std::memcmp(data, w, 16), 0);
  EXPECT_EQ(std::memcmp(data + 16, t, 8), 0);
}

TEST(SafetensorsTest, ScalarAndEscapedName) {
  float s = 3.0f;
  auto encoded =
      encodeSafetensors({{"we\"ird", TensorView::DType::kF32, {}, &s}});
  ASSERT_TRUE(encoded.ok());
  EXPECT_THAT(*encoded, ::testing::HasSubstr(
                            "\"we\\\"ird\":{\"dtype\":\"F32\",\"shape\":[],"
                            "\"data_offsets\":[0,4]}"));
}

TEST(SafetensorsTest, DuplicateNameIsAnError) {
  float s = 0;
  auto encoded = encodeSafetensors({{"a", TensorView::DType::kF32, {}, &s},
                                    {"a", TensorView::DType::kF32, {}, &s}});
  EXPECT_FALSE(encoded.ok());
}

TEST(SafetensorsTest, WritesFileAtomically) {
  std::string dir = makeTempDir();
  float w[] = {1, 2};
  ASSERT_TRUE(writeSafetensors(dir + "/x.safetensors",
                               {{"w", TensorView::DType::kF32, {2}, w}})
                  .ok());
  auto bytes = readFileBytes(dir + "/x.safetensors");
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*encodeSafetensors({{"w", TensorView::DType::kF32, {2}, w}}),
            std::string(bytes->begin(), bytes->end()));
  EXPECT_FALSE(fileExists(dir + "/x.safetensors.tmp." +
                          std::to_string(::getpid())));
  Status bad = writeSafetensors("/nonexistent-dir/x.safetensors",
                                {{"w", TensorView::DType::kF32, {2}, w}});
  EXPECT_THAT(bad.message(), ::testing::HasSubstr("/nonexistent-dir/x.safetensors"));
}

} // namespace
} // namespace kiln::rt::test
