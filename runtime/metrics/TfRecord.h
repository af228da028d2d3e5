//===- TfRecord.h - TFRecord framing with masked CRC-32C ------------------===//
//
// TensorBoard reads event files as a sequence of TFRecords. Each record is
//
//   u64 length (little-endian) | u32 masked CRC-32C of those 8 bytes |
//   length bytes of data       | u32 masked CRC-32C of the data
//
// The CRC is masked ((crc >> 15 | crc << 17) + 0xa282ead8) because a CRC of
// data that itself contains CRCs is weak; TensorFlow's readers verify both
// CRCs and reject a record whose CRC does not match. CRC-32C (Castagnoli) is
// written here rather than taken from a library so the runtime keeps no
// dependency for it; a 256-entry table keeps it fast enough for a few records
// per training step.
//
// The reader exists so tests (and tools) can check what the writer produced
// without Python: it verifies the framing and both CRCs and names the file
// and the record offset when something is wrong.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_METRICS_TFRECORD_H
#define KILN_RUNTIME_METRICS_TFRECORD_H

#include "runtime/Status.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::rt {

// CRC-32C (reflected polynomial 0x82F63B78, init and final xor 0xFFFFFFFF).
// crc32c("123456789") == 0xE3069283.
uint32_t crc32c(const void *data, size_t size);
inline uint32_t crc32c(std::string_view bytes) {
  return crc32c(bytes.data(), bytes.size());
}

// The masked form stored in TFRecords.
uint32_t maskCrc32c(uint32_t crc);

// The bytes of one framed record holding `payload`.
std::string frameTfRecord(std::string_view payload);

// Splits `bytes` (the contents of `path`, used only in messages) into record
// payloads, checking lengths and both CRCs of every record.
StatusOr<std::vector<std::string>> parseTfRecords(std::string_view bytes,
                                                  const std::string &path);

// Reads `path` and parses it with parseTfRecords.
StatusOr<std::vector<std::string>> readTfRecordFile(const std::string &path);

} // namespace kiln::rt

#endif // KILN_RUNTIME_METRICS_TFRECORD_H
