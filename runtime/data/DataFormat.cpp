//===- DataFormat.cpp - Which token format a --data spec is read as -------===//

#include "runtime/data/DataFormat.h"

namespace kiln::rt::data {

namespace {

constexpr DataFormat kAllFormats[] = {DataFormat::kAuto, DataFormat::kText,
                                      DataFormat::kLlmc, DataFormat::kNanoGpt,
                                      DataFormat::kRandom};

} // namespace

const char *dataFormatName(DataFormat format) {
  switch (format) {
  case DataFormat::kAuto:
    return "auto";
  case DataFormat::kText:
    return "text";
  case DataFormat::kLlmc:
    return "llmc";
  case DataFormat::kNanoGpt:
    return "nanogpt";
  case DataFormat::kRandom:
    return "random";
  }
  return "unknown";
}

StatusOr<DataFormat> parseDataFormat(std::string_view name) {
  for (DataFormat format : kAllFormats)
    if (name == dataFormatName(format))
      return format;
  return invalidArgument("unknown data format '", name,
                         "' (expected auto, text, llmc, nanogpt or random)");
}

} // namespace kiln::rt::data
