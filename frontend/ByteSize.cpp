//===- ByteSize.cpp - Byte sizes with units --------------------------------===//

#include "frontend/ByteSize.h"

#include <cmath>

namespace kiln {

namespace {
struct ByteUnit {
  const char *name;
  int64_t bytes;
};
constexpr ByteUnit kByteUnits[] = {
    {"KiB", int64_t(1) << 10}, {"MiB", int64_t(1) << 20},
    {"GiB", int64_t(1) << 30}, {"TiB", int64_t(1) << 40},
    {"KB", 1000},              {"MB", 1000 * 1000},
    {"GB", 1000 * 1000 * 1000}, {"TB", int64_t(1000) * 1000 * 1000 * 1000},
};
} // namespace

std::optional<int64_t> bytesPerUnit(const std::string &unit) {
  for (const ByteUnit &u : kByteUnits)
    if (unit == u.name)
      return u.bytes;
  return std::nullopt;
}

std::optional<int64_t> scaleByUnit(double number, int64_t unitBytes) {
  double bytes = std::round(number * (double)unitBytes);
  // 2^63 is the first double beyond int64.
  if (!std::isfinite(bytes) || bytes < 0 || bytes >= 9223372036854775808.0)
    return std::nullopt;
  return (int64_t)bytes;
}

const char *byteUnitList() {
  return "KiB, MiB, GiB, TiB, KB, MB, GB or TB";
}

} // namespace kiln
