//===- TensorBoardWriter.cpp - Scalars as TensorBoard event files ---------===//

#include "runtime/metrics/TensorBoardWriter.h"

#include "runtime/FileIO.h"
#include "runtime/metrics/TfRecord.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <unistd.h>

namespace kiln::rt {

namespace {

// Protobuf wire types used here.
constexpr uint32_t kVarint = 0, kFixed64 = 1, kLengthDelimited = 2,
                   kFixed32 = 5;

void appendVarint(std::string &out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void appendKey(std::string &out, uint32_t field, uint32_t wireType) {
  appendVarint(out, (uint64_t(field) << 3) | wireType);
}

void appendFixed(std::string &out, uint64_t bits, int bytes) {
  for (int i = 0; i < bytes; ++i)
    out.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
}

void appendDoubleField(std::string &out, uint32_t field, double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  appendKey(out, field, kFixed64);
  appendFixed(out, bits, 8);
}

void appendFloatField(std::string &out, uint32_t field, float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  appendKey(out, field, kFixed32);
  appendFixed(out, bits, 4);
}

// Strings, bytes and embedded messages share one encoding.
void appendBytesField(std::string &out, uint32_t field,
                      std::string_view bytes) {
  appendKey(out, field, kLengthDelimited);
  appendVarint(out, bytes.size());
  out.append(bytes);
}

// Event fields 1 (wall_time) and 2 (step).
std::string eventHeader(double wallTime, int64_t step) {
  std::string event;
  appendDoubleField(event, 1, wallTime);
  appendKey(event, 2, kVarint);
  // int64 varints encode negatives as 10-byte two's complement; steps are
  // non-negative so this is the plain varint of the value.
  appendVarint(event, static_cast<uint64_t>(step));
  return event;
}

double secondsSinceEpoch() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::string hostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0')
    return "localhost";
  return name;
}

} // namespace

std::string encodeFileVersionEvent(double wallTime) {
  std::string event = eventHeader(wallTime, 0);
  appendBytesField(event, 3, "brain.Event:2");
  return event;
}

std::string encodeScalarsEvent(double wallTime, int64_t step,
                               const TensorBoardScalars &scalars) {
  std::string summary;
  for (const auto &[tag, value] : scalars) {
    std::string entry;
    appendBytesField(entry, 1, tag);
    appendFloatField(entry, 2, static_cast<float>(value));
    appendBytesField(summary, 1, entry);
  }
  std::string event = eventHeader(wallTime, step);
  appendBytesField(event, 5, summary);
  return event;
}

StatusOr<TensorBoardWriter> TensorBoardWriter::open(const std::string &dir) {
  KILN_RETURN_IF_ERROR(
      createDirectories(dir).withPrefix("tensorboard directory " + dir + ": "));
  std::string base =
      dir + "/events.out.tfevents." +
      std::to_string(static_cast<long long>(std::time(nullptr))) + "." +
      hostName() + "." + std::to_string(::getpid()) + ".kiln";
  std::string path = base;
  FILE *file = nullptr;
  for (int attempt = 1;; ++attempt) {
    // "x": fail rather than truncate another writer's file.
    file = std::fopen(path.c_str(), "wbx");
    if (file || errno != EEXIST || attempt > 100)
      break;
    path = base + "." + std::to_string(attempt);
  }
  if (!file)
    return invalidArgument("tensorboard event file ", path, ": cannot create (",
                           std::strerror(errno), ")");
  TensorBoardWriter writer(file, path);
  KILN_RETURN_IF_ERROR(
      writer.writeRecord(encodeFileVersionEvent(secondsSinceEpoch())));
  KILN_RETURN_IF_ERROR(writer.flush());
  return writer;
}

TensorBoardWriter::TensorBoardWriter(TensorBoardWriter &&other) noexcept
    : file_(other.file_), path_(std::move(other.path_)) {
  other.file_ = nullptr;
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_)
    std::fclose(file_);
}

Status TensorBoardWriter::writeRecord(const std::string &payload) {
  std::string record = frameTfRecord(payload);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size())
    return invalidArgument("tensorboard event file ", path_, ": write failed (",
                           std::strerror(errno), ")");
  return okStatus();
}

Status TensorBoardWriter::addScalars(int64_t step,
                                     const TensorBoardScalars &scalars) {
  if (step < 0)
    return invalidArgument("tensorboard event file ", path_, ": step ", step,
                           " is negative");
  KILN_RETURN_IF_ERROR(
      writeRecord(encodeScalarsEvent(secondsSinceEpoch(), step, scalars)));
  return flush();
}

Status TensorBoardWriter::flush() {
  if (std::fflush(file_) != 0)
    return invalidArgument("tensorboard event file ", path_, ": flush failed (",
                           std::strerror(errno), ")");
  return okStatus();
}

} // namespace kiln::rt
