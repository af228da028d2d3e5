//===- ByteSize.cpp - Byte sizes with units --------------------------------===//

#include "frontend/ByteSize.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

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

std::optional<int64_t> parseByteSize(const std::string &text) {
  size_t unitStart = text.size();
  while (unitStart > 0 && std::isalpha(static_cast<unsigned char>(text[unitStart - 1])))
    --unitStart;
  const std::string number = text.substr(0, unitStart), unit = text.substr(unitStart);
  int64_t unitBytes = 1;
  if (!unit.empty()) {
    std::optional<int64_t> bytes = bytesPerUnit(unit);
    if (!bytes)
      return std::nullopt;
    unitBytes = *bytes;
  }
  if (number.empty())
    return std::nullopt;
  errno = 0;
  char *end = nullptr;
  double value = std::strtod(number.c_str(), &end);
  if (errno != 0 || *end != '\0' || (unit.empty() && value != std::floor(value)))
    return std::nullopt;
  return scaleByUnit(value, unitBytes);
}

const char *byteUnitList() {
  return "KiB, MiB, GiB, TiB, KB, MB, GB or TB";
}

} // namespace kiln
