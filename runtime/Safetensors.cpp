//===- Safetensors.cpp - Writing tensors in the safetensors format --------===//

#include "runtime/Safetensors.h"

#include "runtime/FileIO.h"

#include <algorithm>
#include <cstdio>
#include <set>

namespace kiln::rt {

namespace {

// JSON string escaping for tensor names (parameter names are dotted
// identifiers, but nothing stops a name from holding a quote).
std::string jsonString(const std::string &text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    default:
      if (c < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "\\u%04x", c);
        out += buf;
      } else {
        out.push_back(static_cast<char>(c));
      }
    }
  }
  return out + "\"";
}

} // namespace

StatusOr<std::string> encodeSafetensors(std::vector<TensorView> tensors) {
  std::sort(tensors.begin(), tensors.end(),
            [](const TensorView &a, const TensorView &b) {
              return a.name < b.name;
            });
  std::set<std::string> seen;
  std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
  std::vector<uint64_t> sizes;
  uint64_t offset = 0;
  for (const TensorView &t : tensors) {
    if (t.name == "__metadata__" || !seen.insert(t.name).second)
      return internalError("safetensors: duplicate or reserved tensor name '",
                           t.name, "'");
    uint64_t elements = 1;
    std::string shape = "[";
    for (size_t i = 0; i < t.shape.size(); ++i) {
      if (t.shape[i] < 0)
        return internalError("safetensors: tensor '", t.name,
                             "' has a negative dimension");
      elements *= static_cast<uint64_t>(t.shape[i]);
      shape += (i ? "," : "") + std::to_string(t.shape[i]);
    }
    shape += "]";
    uint64_t bytes = elements * 4; // F32 and I32 are both 4 bytes
    header += "," + jsonString(t.name) + ":{\"dtype\":\"" +
              (t.dtype == TensorView::DType::kF32 ? "F32" : "I32") +
              "\",\"shape\":" + shape + ",\"data_offsets\":[" +
              std::to_string(offset) + "," + std::to_string(offset + bytes) +
              "]}";
    sizes.push_back(bytes);
    offset += bytes;
  }
  header += "}";
  while (header.size() % 8 != 0)
    header.push_back(' ');

  std::string out;
  out.reserve(8 + header.size() + offset);
  uint64_t headerSize = header.size();
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<char>((headerSize >> (8 * i)) & 0xff));
  out += header;
  for (size_t i = 0; i < tensors.size(); ++i)
    out.append(static_cast<const char *>(tensors[i].data), sizes[i]);
  return out;
}

Status writeSafetensors(const std::string &path,
                        std::vector<TensorView> tensors) {
  KILN_ASSIGN_OR_RETURN(std::string contents,
                        encodeSafetensors(std::move(tensors)));
  return writeFileAtomically(path, {contents});
}

} // namespace kiln::rt
