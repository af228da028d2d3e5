//===- TfRecord.cpp - TFRecord framing with masked CRC-32C ----------------===//

#include "runtime/metrics/TfRecord.h"

#include "runtime/FileIO.h"

#include <array>

namespace kiln::rt {

namespace {

// Table for the byte-at-a-time reflected CRC: entry i is the CRC register
// after shifting the byte i through eight rounds of the polynomial.
std::array<uint32_t, 256> makeCrc32cTable() {
  constexpr uint32_t kReflectedPolynomial = 0x82F63B78u;
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit)
      crc = (crc & 1) ? (crc >> 1) ^ kReflectedPolynomial : crc >> 1;
    table[i] = crc;
  }
  return table;
}

void appendLittleEndian(std::string &out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i)
    out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

uint64_t loadLittleEndian(std::string_view bytes, size_t offset, int count) {
  uint64_t value = 0;
  for (int i = 0; i < count; ++i)
    value |= uint64_t(static_cast<uint8_t>(bytes[offset + i])) << (8 * i);
  return value;
}

} // namespace

uint32_t crc32c(const void *data, size_t size) {
  static const std::array<uint32_t, 256> table = makeCrc32cTable();
  const auto *bytes = static_cast<const uint8_t *>(data);
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i)
    crc = table[(crc ^ bytes[i]) & 0xff] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

uint32_t maskCrc32c(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string frameTfRecord(std::string_view payload) {
  std::string record;
  record.reserve(8 + 4 + payload.size() + 4);
  appendLittleEndian(record, payload.size(), 8);
  appendLittleEndian(record, maskCrc32c(crc32c(record.data(), 8)), 4);
  record.append(payload);
  appendLittleEndian(record, maskCrc32c(crc32c(payload)), 4);
  return record;
}

StatusOr<std::vector<std::string>> parseTfRecords(std::string_view bytes,
                                                  const std::string &path) {
  std::vector<std::string> payloads;
  size_t offset = 0;
  while (offset < bytes.size()) {
    size_t left = bytes.size() - offset;
    if (left < 12)
      return dataLoss(path, ": truncated record header at byte ", offset, " (",
                      left, " bytes left, need 12)");
    uint64_t length = loadLittleEndian(bytes, offset, 8);
    uint32_t lengthCrc = uint32_t(loadLittleEndian(bytes, offset + 8, 4));
    if (lengthCrc != maskCrc32c(crc32c(bytes.data() + offset, 8)))
      return dataLoss(path, ": record at byte ", offset,
                      ": length CRC mismatch");
    if (length > left - 12 || left - 12 - length < 4)
      return dataLoss(path, ": record at byte ", offset, " claims ", length,
                      " data bytes but only ", left - 12,
                      " bytes follow the header (need data + 4 CRC bytes)");
    std::string_view payload = bytes.substr(offset + 12, length);
    uint32_t dataCrc =
        uint32_t(loadLittleEndian(bytes, offset + 12 + length, 4));
    if (dataCrc != maskCrc32c(crc32c(payload)))
      return dataLoss(path, ": record at byte ", offset, ": data CRC mismatch");
    payloads.emplace_back(payload);
    offset += 12 + length + 4;
  }
  return payloads;
}

StatusOr<std::vector<std::string>> readTfRecordFile(const std::string &path) {
  KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, readFileBytes(path));
  return parseTfRecords(
      std::string_view(reinterpret_cast<const char *>(bytes.data()),
                       bytes.size()),
      path);
}

} // namespace kiln::rt
