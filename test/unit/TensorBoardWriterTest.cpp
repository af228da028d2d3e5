//===- TensorBoardWriterTest.cpp - Event files byte for byte --------------===//
//
// The CRC and the protobuf bytes are checked against values computed
// independently (RFC 3720's CRC-32C vectors, TensorBoard's own
// masked_crc32c, protobuf wire-format rules worked out by hand), and a
// written file is read back through the TFRecord reader, which verifies
// every length and both CRCs. test/unit/read_tensorboard_events.py checks
// the same files with TensorBoard's own reader.
//
//===----------------------------------------------------------------------===//

#include "runtime/metrics/TensorBoardWriter.h"
#include "runtime/FileIO.h"
#include "runtime/metrics/TfRecord.h"

#include <cstring>
#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

namespace kiln::rt::test {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string bytes(std::initializer_list<int> values) {
  std::string out;
  for (int v : values)
    out.push_back(static_cast<char>(v));
  return out;
}

TEST(Crc32cTest, CheckValues) {
  // The standard check value of CRC-32C (Castagnoli).
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(""), 0u);
  // RFC 3720 (iSCSI), appendix B.4.
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc32c(std::string(32, '\xff')), 0x62A8AB43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i)
    ascending.push_back(static_cast<char>(i));
  EXPECT_EQ(crc32c(ascending), 0x46DD794Eu);
}

TEST(Crc32cTest, MaskedValues) {
  // mask(crc) = rotate-right-15 + 0xa282ead8; the expected values come from
  // tensorboard.compat.tensorflow_stub.pywrap_tensorflow.masked_crc32c.
  EXPECT_EQ(maskCrc32c(0), 0xa282ead8u);
  EXPECT_EQ(maskCrc32c(crc32c("123456789")), 0xc78ab0e5u);
  EXPECT_EQ(maskCrc32c(crc32c(std::string(8, '\0'))), 0x07980329u);
  EXPECT_EQ(maskCrc32c(crc32c(std::string(32, '\0'))), 0x0fd7fffau);
}

TEST(TfRecordTest, FramesPayload) {
  std::string record = frameTfRecord("abc");
  ASSERT_EQ(record.size(), 8u + 4 + 3 + 4);
  EXPECT_EQ(record.substr(0, 8), bytes({3, 0, 0, 0, 0, 0, 0, 0}));
  uint32_t lengthCrc, dataCrc;
  std::memcpy(&lengthCrc, record.data() + 8, 4);
  std::memcpy(&dataCrc, record.data() + 15, 4);
  EXPECT_EQ(lengthCrc, maskCrc32c(crc32c(record.data(), 8)));
  EXPECT_EQ(record.substr(12, 3), "abc");
  EXPECT_EQ(dataCrc, maskCrc32c(crc32c("abc")));
}

TEST(TfRecordTest, ParserRejectsDamage) {
  std::string file = frameTfRecord("first") + frameTfRecord("second");
  auto ok = parseTfRecords(file, "x.tfevents");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_THAT(*ok, ::testing::ElementsAre("first", "second"));

  std::string flippedData = file;
  flippedData[13] ^= 1; // inside "first"
  auto bad = parseTfRecords(flippedData, "x.tfevents");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss);
  EXPECT_THAT(bad.status().message(),
              HasSubstr("x.tfevents: record at byte 0: data CRC mismatch"));

  std::string flippedLength = file;
  flippedLength[0] ^= 1;
  bad = parseTfRecords(flippedLength, "x.tfevents");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("length CRC mismatch"));

  // Cut inside the second record's data: a killed writer's last record.
  bad = parseTfRecords(file.substr(0, file.size() - 6), "x.tfevents");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("record at byte 21 claims 6"));
  bad = parseTfRecords(file.substr(0, 5), "x.tfevents");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("truncated record header"));
}

// Event { wall_time: 0 (field 1, fixed64), step: 0 (field 2, varint),
//         file_version: "brain.Event:2" (field 3, length-delimited) }.
TEST(TensorBoardEventTest, FileVersionBytes) {
  std::string expected =
      bytes({0x09, 0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0x00, 0x1a, 0x0d}) +
      "brain.Event:2";
  EXPECT_EQ(encodeFileVersionEvent(0.0), expected);
}

// Event { wall_time: 1.5, step: S, summary { value { tag: "a"
//         simple_value: 2.0 } } } for steps exercising varint lengths.
TEST(TensorBoardEventTest, ScalarEventBytes) {
  // 1.5 = 0x3FF8000000000000, little-endian.
  std::string wallTime = bytes({0x09, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f});
  // Summary (field 5, 10 bytes) { Value (field 1, 8 bytes) {
  //   tag (field 1) "a", simple_value (field 2, fixed32) 2.0f = 0x40000000 } }
  std::string summary = bytes(
      {0x2a, 0x0a, 0x0a, 0x08, 0x0a, 0x01, 'a', 0x15, 0x00, 0x00, 0x00, 0x40});
  struct Case {
    int64_t step;
    std::string varint;
  } cases[] = {
      {0, bytes({0x00})},
      {1, bytes({0x01})},
      {127, bytes({0x7f})},
      {128, bytes({0x80, 0x01})},
      {300, bytes({0xac, 0x02})},
      // 2^40: five empty 7-bit groups with the continuation bit, then
      // bit 40 = bit 5 of the sixth group.
      {int64_t(1) << 40, bytes({0x80, 0x80, 0x80, 0x80, 0x80, 0x20})},
  };
  for (const Case &c : cases)
    EXPECT_EQ(encodeScalarsEvent(1.5, c.step, {{"a", 2.0}}),
              wallTime + bytes({0x10}) + c.varint + summary)
        << "step " << c.step;
}

TEST(TensorBoardEventTest, SeveralValuesAndFloat32Rounding) {
  std::string event =
      encodeScalarsEvent(0.0, 2, {{"train/loss", 0.1}, {"x", -1.0}});
  std::string header = bytes({0x09, 0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0x02});
  // 0.1 as float32 is 0x3DCCCCCD; -1.0f is 0xBF800000.
  std::string loss = bytes({0x0a, 0x11, 0x0a, 0x0a}) + "train/loss" +
                     bytes({0x15, 0xcd, 0xcc, 0xcc, 0x3d});
  std::string x =
      bytes({0x0a, 0x08, 0x0a, 0x01, 'x', 0x15, 0x00, 0x00, 0x80, 0xbf});
  EXPECT_EQ(event,
            header + bytes({0x2a, char(loss.size() + x.size())}) + loss + x);
  // An empty summary is still a summary field (present, length 0).
  EXPECT_EQ(encodeScalarsEvent(0.0, 0, {}),
            header.substr(0, 10) + bytes({0x00, 0x2a, 0x00}));
}

class TensorBoardWriterTest : public ::testing::Test {
protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kiln-tb-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  std::vector<std::string> listDir(const std::string &dir) {
    std::vector<std::string> names;
    if (DIR *d = ::opendir(dir.c_str())) {
      while (dirent *e = ::readdir(d))
        if (e->d_name[0] != '.')
          names.push_back(e->d_name);
      ::closedir(d);
    }
    return names;
  }
  std::string dir_;
};

TEST_F(TensorBoardWriterTest, WritesReadableFile) {
  std::string logdir = dir_ + "/run/tb"; // parents are created
  std::string path;
  {
    auto writer = TensorBoardWriter::open(logdir);
    ASSERT_TRUE(writer.ok()) << writer.status().message();
    path = writer->path();
    ASSERT_TRUE(
        writer->addScalars(1, {{"train/loss", 5.5}, {"train/lr", 1e-3}}).ok());
    // Flushed per step: the records are on disk before the writer closes.
    auto records = readTfRecordFile(path);
    ASSERT_TRUE(records.ok()) << records.status().message();
    EXPECT_EQ(records->size(), 2u);
    ASSERT_TRUE(writer->addScalars(2, {{"train/loss", 5.25}}).ok());
  }
  std::vector<std::string> names = listDir(logdir);
  ASSERT_EQ(names.size(), 1u);
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  EXPECT_THAT(names[0], StartsWith("events.out.tfevents."));
  EXPECT_THAT(names[0], HasSubstr(std::string(".") + host + "." +
                                  std::to_string(::getpid()) + ".kiln"));
  EXPECT_EQ(logdir + "/" + names[0], path);

  auto records = readTfRecordFile(path);
  ASSERT_TRUE(records.ok()) << records.status().message();
  ASSERT_EQ(records->size(), 3u);
  // Wall times vary; everything after the 9 wall-time bytes is fixed.
  EXPECT_EQ((*records)[0].substr(9), encodeFileVersionEvent(0).substr(9));
  EXPECT_EQ((*records)[1].substr(9),
            encodeScalarsEvent(0, 1, {{"train/loss", 5.5}, {"train/lr", 1e-3}})
                .substr(9));
  EXPECT_EQ((*records)[2].substr(9),
            encodeScalarsEvent(0, 2, {{"train/loss", 5.25}}).substr(9));
  double wallTime;
  std::memcpy(&wallTime, (*records)[1].data() + 1, 8);
  EXPECT_GT(wallTime, 1.6e9); // seconds since 1970, after 2020
}

TEST_F(TensorBoardWriterTest, SecondWriterDoesNotClobberFirst) {
  auto a = TensorBoardWriter::open(dir_);
  auto b = TensorBoardWriter::open(dir_);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->path(), b->path());
  EXPECT_EQ(listDir(dir_).size(), 2u);
}

TEST_F(TensorBoardWriterTest, ErrorsNameTheFile) {
  // A regular file where the directory should be.
  std::string blocker = dir_ + "/not-a-dir";
  ASSERT_TRUE(writeFileAtomically(blocker, {"x"}).ok());
  auto writer = TensorBoardWriter::open(blocker + "/tb");
  ASSERT_FALSE(writer.ok());
  EXPECT_THAT(writer.status().message(), HasSubstr(blocker));

  auto ok = TensorBoardWriter::open(dir_);
  ASSERT_TRUE(ok.ok());
  Status negative = ok->addScalars(-1, {{"a", 1}});
  ASSERT_FALSE(negative.ok());
  EXPECT_THAT(negative.message(), HasSubstr(ok->path()));
  EXPECT_THAT(negative.message(), HasSubstr("step -1 is negative"));

  auto missing = readTfRecordFile(dir_ + "/nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr(dir_ + "/nope"));
}

} // namespace
} // namespace kiln::rt::test
