//===- ByteSize.h - Byte sizes with units: 60GiB, 512MiB, 8e9 -------------===//
//
// A number literal may carry a byte unit: `memory_budget = 60GiB`, and the
// same spelling after `-D` (`-D memory_budget=60GiB`). Binary units (KiB,
// MiB, GiB, TiB) are powers of 1024, decimal ones (KB, MB, GB, TB) of 1000,
// as nvidia-smi and the cloud vendors spell them; the value is whole bytes.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_FRONTEND_BYTESIZE_H
#define KILN_FRONTEND_BYTESIZE_H

#include <cstdint>
#include <optional>
#include <string>

namespace kiln {

/// Bytes in one `unit` ("GiB" -> 2^30, "GB" -> 1e9), or nullopt when `unit`
/// is not a byte unit.
std::optional<int64_t> bytesPerUnit(const std::string &unit);

/// `number` (a literal's value) times the bytes of `unit`, rounded to whole
/// bytes; nullopt when the product is negative or beyond int64.
std::optional<int64_t> scaleByUnit(double number, int64_t unitBytes);

/// A byte size as kilnc's flags take it: a number with an optional unit
/// ("60GiB", "1.5TB", "8e9"), whole bytes; nullopt when `text` is not one.
std::optional<int64_t> parseByteSize(const std::string &text);

/// The byte units, for messages: "KiB, MiB, GiB, TiB, KB, MB, GB or TB".
const char *byteUnitList();

} // namespace kiln

#endif // KILN_FRONTEND_BYTESIZE_H
