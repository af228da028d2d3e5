//===- SafetensorsReaderTest.cpp - Validating safetensors files -----------===//
//
// Round trips through writeSafetensors + SafetensorsFile::open for every
// dtype and metadata, then one test per malformed-file case: each must give
// its own message naming the file, never a crash (the files are built byte
// by byte, so every broken header is exactly the one described).
//
//===----------------------------------------------------------------------===//

#include "TestArtifact.h"

#include "runtime/FileIO.h"
#include "runtime/Safetensors.h"

#include <cstring>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kiln::rt::test {
namespace {

using ::testing::HasSubstr;

// u64 length | header | `dataBytes` bytes of 0xAB.
std::string rawFile(const std::string &header, size_t dataBytes) {
  std::string out;
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return out + header + std::string(dataBytes, '\xAB');
}

class SafetensorsReaderTest : public ::testing::Test {
protected:
  std::string dir = makeTempDir();
  std::string path = dir + "/t.safetensors";

  // Writes `contents` to `path` and expects open() to fail with `fragment`
  // in a message that starts with the path.
  void expectRejected(const std::string &contents,
                      const std::string &fragment) {
    writeFile(path, contents);
    auto file = SafetensorsFile::open(path);
    ASSERT_FALSE(file.ok()) << "accepted: " << fragment;
    EXPECT_THAT(file.status().message(), ::testing::StartsWith(path + ": "));
    EXPECT_THAT(file.status().message(), HasSubstr(fragment));
  }
};

TEST_F(SafetensorsReaderTest, RoundTripsEveryDTypeAndMetadata) {
  float f32[] = {1.5f, -2.0f, 3.25f, 0.0f, 1e-30f, -7.0f};
  uint16_t f16[] = {0x3c00, 0xc000};  // 1.0, -2.0
  uint16_t bf16[] = {0x3f80, 0x4040, 0xbf80}; // 1.0, 3.0, -1.0
  double f64[] = {3.141592653589793};
  int64_t i64[] = {-1, int64_t(1) << 40};
  int32_t i32[] = {7, -9, 11, 13};
  int16_t i16[] = {-300};
  int8_t i8[] = {-5, 5};
  uint8_t u8[] = {0, 255, 17};
  uint8_t flags[] = {1, 0};
  std::vector<TensorView> tensors = {
      {"f32", TensorDType::kF32, {2, 3}, f32},
      {"f16", TensorDType::kF16, {2}, f16},
      {"bf16", TensorDType::kBF16, {3, 1}, bf16},
      {"f64", TensorDType::kF64, {}, f64},
      {"i64", TensorDType::kI64, {2}, i64},
      {"i32", TensorDType::kI32, {2, 2}, i32},
      {"i16", TensorDType::kI16, {1}, i16},
      {"i8", TensorDType::kI8, {2}, i8},
      {"u8", TensorDType::kU8, {3}, u8},
      {"bool", TensorDType::kBool, {2}, flags},
      {"empty", TensorDType::kF32, {0, 4}, nullptr},
  };
  ASSERT_TRUE(writeSafetensors(path, tensors,
                               {{"step", "100"}, {"note", "a \"quoted\" \n"}})
                  .ok());

  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ(file->metadata(),
            (SafetensorsMetadata{{"format", "pt"},
                                 {"step", "100"},
                                 {"note", "a \"quoted\" \n"}}));
  ASSERT_EQ(file->entries().size(), tensors.size());
  for (const TensorView &t : tensors) {
    const SafetensorsEntry *entry = file->find(t.name);
    ASSERT_NE(entry, nullptr) << t.name;
    EXPECT_EQ(entry->dtype, t.dtype) << t.name;
    EXPECT_EQ(entry->shape, t.shape) << t.name;
    std::string_view raw = file->bytes(*entry);
    ASSERT_EQ(raw.size(), entry->elementCount() * tensorDTypeSize(t.dtype));
    if (!raw.empty())
      EXPECT_EQ(std::memcmp(raw.data(), t.data, raw.size()), 0) << t.name;
  }
  float back[6] = {};
  ASSERT_TRUE(file->readInto("f32", TensorDType::kF32, {2, 3}, back).ok());
  EXPECT_EQ(std::memcmp(back, f32, sizeof(f32)), 0);
}

TEST_F(SafetensorsReaderTest, CallerCannotOverrideFormat) {
  float x = 0;
  Status status = writeSafetensors(path, {{"x", TensorDType::kF32, {}, &x}},
                                   {{"format", "np"}});
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr(path));
  EXPECT_THAT(status.message(), HasSubstr("'format' is reserved"));
}

TEST_F(SafetensorsReaderTest, DTypeNamesRoundTrip) {
  for (TensorDType d :
       {TensorDType::kF32, TensorDType::kF16, TensorDType::kBF16,
        TensorDType::kF64, TensorDType::kI64, TensorDType::kI32,
        TensorDType::kI16, TensorDType::kI8, TensorDType::kU8,
        TensorDType::kBool})
    EXPECT_EQ(parseTensorDType(tensorDTypeName(d)), d);
  EXPECT_EQ(parseTensorDType("F8_E4M3"), std::nullopt);
  EXPECT_EQ(tensorDTypeSize(TensorDType::kBF16), 2u);
}

// --- Typed reads. ---

TEST_F(SafetensorsReaderTest, TypedReadErrors) {
  uint16_t bf16[] = {1, 2, 3, 4, 5, 6};
  ASSERT_TRUE(
      writeSafetensors(path, {{"x", TensorDType::kBF16, {2, 3}, bf16}}).ok());
  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  float dst[6];
  Status missing = file->readInto("y", TensorDType::kF32, {2, 3}, dst);
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.message(), path + ": no tensor 'y'");
  EXPECT_EQ(file->readInto("x", TensorDType::kF32, {2, 3}, dst).message(),
            path + ": tensor 'x' has dtype BF16, expected F32");
  EXPECT_EQ(file->readInto("x", TensorDType::kBF16, {3, 2}, dst).message(),
            path + ": tensor 'x' has shape [2, 3], expected [3, 2]");
  EXPECT_EQ(file->readInto("x", TensorDType::kBF16, {6}, dst).message(),
            path + ": tensor 'x' has shape [2, 3], expected [6]");
  EXPECT_FALSE(file->lookup("nope").ok());
}

// --- Malformed files: each case its own message. ---

TEST_F(SafetensorsReaderTest, MissingFile) {
  auto file = SafetensorsFile::open(dir + "/absent.safetensors");
  EXPECT_EQ(file.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(file.status().message(), HasSubstr("absent.safetensors"));
}

TEST_F(SafetensorsReaderTest, EmptyAndTruncatedLength) {
  expectRejected("", "too short for a safetensors file (0 bytes");
  expectRejected(std::string("\x10\0\0", 3),
                 "too short for a safetensors file (3 bytes");
}

TEST_F(SafetensorsReaderTest, HeaderLengthPastEnd) {
  std::string good = rawFile("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],"
                             "\"data_offsets\":[0,4]}}",
                             4);
  expectRejected(good.substr(0, 20), "header length 54 runs past the end of "
                                     "the file (20 bytes)");
}

TEST_F(SafetensorsReaderTest, AbsurdHeaderLength) {
  std::string contents(16, '\0');
  contents[7] = 0x01; // 2^56
  expectRejected(contents, "header length 72057594037927936 is absurdly "
                           "large");
}

TEST_F(SafetensorsReaderTest, TruncatedData) {
  float w[] = {1, 2, 3, 4};
  auto encoded =
      encodeSafetensors({{"w", TensorDType::kF32, {4}, w}});
  ASSERT_TRUE(encoded.ok());
  expectRejected(encoded->substr(0, encoded->size() - 3),
                 "tensor 'w': data_offsets [0, 16] past the end of the data "
                 "(13 bytes)");
}

TEST_F(SafetensorsReaderTest, BadJson) {
  expectRejected(rawFile("{\"x\": {", 0), "header is not valid JSON");
  expectRejected(rawFile("[1, 2]", 0), "header is not a JSON object");
  expectRejected(rawFile("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],"
                         "\"data_offsets\":[0,1]},"
                         "\"a\":{\"dtype\":\"U8\",\"shape\":[1],"
                         "\"data_offsets\":[1,2]}}",
                         2),
                 "header names 'a' twice");
}

TEST_F(SafetensorsReaderTest, BadMetadata) {
  expectRejected(rawFile("{\"__metadata__\":[1]}", 0),
                 "__metadata__ is not an object");
  expectRejected(rawFile("{\"__metadata__\":{\"step\":100}}", 0),
                 "__metadata__ entry 'step' is not a string");
}

TEST_F(SafetensorsReaderTest, MissingKeys) {
  expectRejected(rawFile("{\"x\":3}", 0), "tensor 'x': entry is not an object");
  expectRejected(rawFile("{\"x\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4),
                 "tensor 'x': missing \"dtype\"");
  expectRejected(rawFile("{\"x\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}",
                         4),
                 "tensor 'x': missing \"shape\"");
  expectRejected(rawFile("{\"x\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4),
                 "tensor 'x': missing \"data_offsets\"");
}

TEST_F(SafetensorsReaderTest, WrongDTypeString) {
  expectRejected(rawFile("{\"x\":{\"dtype\":\"F8_E4M3\",\"shape\":[1],"
                         "\"data_offsets\":[0,1]}}",
                         1),
                 "tensor 'x': unknown dtype 'F8_E4M3'");
  expectRejected(rawFile("{\"x\":{\"dtype\":32,\"shape\":[1],"
                         "\"data_offsets\":[0,4]}}",
                         4),
                 "tensor 'x': \"dtype\" is not a string");
}

TEST_F(SafetensorsReaderTest, BadShape) {
  expectRejected(rawFile("{\"x\":{\"dtype\":\"F32\",\"shape\":[-1],"
                         "\"data_offsets\":[0,4]}}",
                         4),
                 "tensor 'x': \"shape\" entry -1 is not a non-negative "
                 "integer");
  expectRejected(rawFile("{\"x\":{\"dtype\":\"F32\",\"shape\":[1.5],"
                         "\"data_offsets\":[0,4]}}",
                         4),
                 "\"shape\" entry 1.5 is not a non-negative integer");
  expectRejected(rawFile("{\"x\":{\"dtype\":\"F32\",\"shape\":7,"
                         "\"data_offsets\":[0,4]}}",
                         4),
                 "tensor 'x': \"shape\" is not an array");
  expectRejected(
      rawFile("{\"x\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],"
              "\"data_offsets\":[0,4]}}",
              4),
      "shape [4294967296, 4294967296] has more bytes than fit in 64 bits");
}

TEST_F(SafetensorsReaderTest, OffsetsOutOfRange) {
  expectRejected(rawFile("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],"
                         "\"data_offsets\":[4,12]}}",
                         8),
                 "tensor 'x': data_offsets [4, 12] past the end of the data "
                 "(8 bytes)");
  expectRejected(rawFile("{\"x\":{\"dtype\":\"F32\",\"shape\":[0],"
                         "\"data_offsets\":[4,0]}}",
                         8),
                 "tensor 'x': data_offsets [4, 0] end before they begin");
  expectRejected(rawFile("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],"
                         "\"data_offsets\":[0]}}",
                         4),
                 "tensor 'x': \"data_offsets\" [0] is not a pair of "
                 "non-negative integers");
  expectRejected(rawFile("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],"
                         "\"data_offsets\":[-4,0]}}",
                         4),
                 "is not a pair of non-negative integers");
}

TEST_F(SafetensorsReaderTest, SizeMismatch) {
  expectRejected(rawFile("{\"x\":{\"dtype\":\"F32\",\"shape\":[3],"
                         "\"data_offsets\":[0,8]}}",
                         8),
                 "tensor 'x': data_offsets [0, 8] hold 8 bytes but shape [3] "
                 "of F32 needs 12");
}

TEST_F(SafetensorsReaderTest, OverlappingTensors) {
  expectRejected(rawFile("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],"
                         "\"data_offsets\":[0,8]},"
                         "\"b\":{\"dtype\":\"F32\",\"shape\":[2],"
                         "\"data_offsets\":[4,12]}}",
                         12),
                 "tensors 'a' [0, 8] and 'b' [4, 12] overlap");
}

TEST_F(SafetensorsReaderTest, DataNotFullyCovered) {
  expectRejected(rawFile("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],"
                         "\"data_offsets\":[4,8]}}",
                         8),
                 "data bytes [0, 4) before tensor 'a' belong to no tensor");
  expectRejected(rawFile("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],"
                         "\"data_offsets\":[0,4]}}",
                         10),
                 "the data section has 10 bytes but the tensors cover only 4");
}

TEST_F(SafetensorsReaderTest, ZeroSizedTensorsShareAnOffset) {
  // Legal in the reference format: empty tensors take no bytes.
  writeFile(path, rawFile("{\"a\":{\"dtype\":\"F32\",\"shape\":[0],"
                          "\"data_offsets\":[0,0]},"
                          "\"b\":{\"dtype\":\"I64\",\"shape\":[2,0],"
                          "\"data_offsets\":[0,0]},"
                          "\"c\":{\"dtype\":\"U8\",\"shape\":[],"
                          "\"data_offsets\":[0,1]}}",
                          1));
  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ(file->entries().size(), 3u);
  EXPECT_TRUE(file->metadata().empty());
}

// Every single-byte truncation and every single-byte corruption of the
// header of a valid file is either rejected with a message naming the file
// or (rarely: a flipped digit inside padding) still valid — never a crash.
TEST_F(SafetensorsReaderTest, MutationsNeverCrash) {
  float w[] = {1, 2, 3, 4, 5, 6};
  int32_t t[] = {1, 2};
  auto encoded = encodeSafetensors({{"w", TensorDType::kF32, {2, 3}, w},
                                    {"t", TensorDType::kI32, {2}, t}},
                                   {{"k", "v"}});
  ASSERT_TRUE(encoded.ok());
  for (size_t cut = 0; cut < encoded->size(); ++cut) {
    writeFile(path, encoded->substr(0, cut));
    auto file = SafetensorsFile::open(path);
    ASSERT_FALSE(file.ok()) << "truncated to " << cut;
    EXPECT_THAT(file.status().message(), ::testing::StartsWith(path));
  }
  uint64_t headerEnd = 8 + uint8_t((*encoded)[0]);
  for (size_t at = 0; at < headerEnd; ++at) {
    for (char replacement : {'\0', '9', '"', '}', '\xff'}) {
      std::string mutated = *encoded;
      mutated[at] = replacement;
      writeFile(path, mutated);
      auto file = SafetensorsFile::open(path);
      if (!file.ok())
        EXPECT_THAT(file.status().message(), ::testing::StartsWith(path));
    }
  }
}

} // namespace
} // namespace kiln::rt::test
