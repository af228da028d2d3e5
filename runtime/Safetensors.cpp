//===- Safetensors.cpp - Writing and validating safetensors files ---------===//
//
// Writer: the header is built by hand (its byte layout is pinned by tests and
// matches the reference writer: "__metadata__" first, tensors sorted by name,
// space padding to 8 bytes); tensor bytes are handed to writeFileAtomically
// as views, so a multi-GB checkpoint is never copied into one string.
//
// Reader, in order (each step assumes the previous ones passed):
//   1. the file is at least 8 bytes; the header length is at most 100 MB
//      (the reference's limit) and ends inside the file;
//   2. the header is a JSON object with no duplicate top-level keys;
//   3. "__metadata__", if present, maps strings to strings;
//   4. every other entry has a known dtype, a shape of non-negative integers
//      whose byte size does not overflow, and data_offsets [begin, end] with
//      begin <= end <= data size and end - begin == bytes of the shape;
//   5. sorted by offset, the tensors tile the data section exactly: no
//      overlaps, no gaps, nothing after the last tensor (as the reference
//      requires).
//
//===----------------------------------------------------------------------===//

#include "runtime/Safetensors.h"

#include "runtime/FileIO.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <nlohmann/json.hpp>
#include <set>
#include <sys/mman.h>
#include <sys/stat.h>
#include <tuple>
#include <unistd.h>

namespace kiln::rt {

namespace {

using nlohmann::json;

// The reference implementation refuses headers above this size; so do we,
// so that a garbage length cannot make us parse gigabytes of tensor data.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct DTypeInfo {
  TensorDType dtype;
  const char *name;
  size_t size;
};

constexpr DTypeInfo kDTypes[] = {
    {TensorDType::kF32, "F32", 4},   {TensorDType::kF16, "F16", 2},
    {TensorDType::kBF16, "BF16", 2}, {TensorDType::kF64, "F64", 8},
    {TensorDType::kI64, "I64", 8},   {TensorDType::kI32, "I32", 4},
    {TensorDType::kI16, "I16", 2},   {TensorDType::kI8, "I8", 1},
    {TensorDType::kU8, "U8", 1},     {TensorDType::kBool, "BOOL", 1},
};

const DTypeInfo &infoOf(TensorDType dtype) {
  for (const DTypeInfo &info : kDTypes)
    if (info.dtype == dtype)
      return info;
  return kDTypes[0]; // unreachable: every enumerator is in the table
}

// JSON string escaping for tensor names and metadata (parameter names are
// dotted identifiers, but nothing stops a name from holding a quote).
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

// a * b, or nullopt on uint64 overflow.
std::optional<uint64_t> checkedMultiply(uint64_t a, uint64_t b) {
  uint64_t product;
  if (__builtin_mul_overflow(a, b, &product))
    return std::nullopt;
  return product;
}

// The 8-byte length prefix plus the padded header; `sizes` receives each
// tensor's byte size in the (sorted) order of `tensors`.
StatusOr<std::string> encodePrefix(std::vector<TensorView> &tensors,
                                   const SafetensorsMetadata &metadata,
                                   std::vector<uint64_t> &sizes) {
  std::sort(tensors.begin(), tensors.end(),
            [](const TensorView &a, const TensorView &b) {
              return a.name < b.name;
            });
  std::string header = "{\"__metadata__\":{\"format\":\"pt\"";
  for (const auto &[key, value] : metadata) {
    if (key == "format")
      return internalError("safetensors: metadata key 'format' is reserved "
                           "(always \"pt\")");
    header += "," + jsonString(key) + ":" + jsonString(value);
  }
  header += "}";
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const TensorView &t : tensors) {
    if (t.name == "__metadata__" || !seen.insert(t.name).second)
      return internalError("safetensors: duplicate or reserved tensor name '",
                           t.name, "'");
    uint64_t elements = 1;
    for (int64_t dim : t.shape) {
      if (dim < 0)
        return internalError("safetensors: tensor '", t.name,
                             "' has a negative dimension");
      std::optional<uint64_t> product =
          checkedMultiply(elements, static_cast<uint64_t>(dim));
      if (!product)
        return internalError("safetensors: tensor '", t.name,
                             "' has too many elements");
      elements = *product;
    }
    std::optional<uint64_t> bytes =
        checkedMultiply(elements, tensorDTypeSize(t.dtype));
    if (!bytes)
      return internalError("safetensors: tensor '", t.name, "' is too large");
    if (*bytes > 0 && !t.data)
      return internalError("safetensors: tensor '", t.name, "' has no data");
    std::string shape = "[";
    for (size_t i = 0; i < t.shape.size(); ++i)
      shape += (i ? "," : "") + std::to_string(t.shape[i]);
    shape += "]";
    header += "," + jsonString(t.name) + ":{\"dtype\":\"" +
              tensorDTypeName(t.dtype) + "\",\"shape\":" + shape +
              ",\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + *bytes) + "]}";
    sizes.push_back(*bytes);
    offset += *bytes;
  }
  header += "}";
  while (header.size() % 8 != 0)
    header.push_back(' ');

  std::string prefix;
  prefix.reserve(8 + header.size());
  uint64_t headerSize = header.size();
  for (int i = 0; i < 8; ++i)
    prefix.push_back(static_cast<char>((headerSize >> (8 * i)) & 0xff));
  return prefix + header;
}

// Reads a JSON value that must be a non-negative integer.
std::optional<uint64_t> asCount(const json &value) {
  if (!value.is_number_unsigned())
    return std::nullopt; // negative, fractional, or not a number
  return value.get<uint64_t>();
}

} // namespace

const char *tensorDTypeName(TensorDType dtype) { return infoOf(dtype).name; }

size_t tensorDTypeSize(TensorDType dtype) { return infoOf(dtype).size; }

std::optional<TensorDType> parseTensorDType(std::string_view name) {
  for (const DTypeInfo &info : kDTypes)
    if (name == info.name)
      return info.dtype;
  return std::nullopt;
}

std::string formatShape(const std::vector<int64_t> &shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

StatusOr<std::string> encodeSafetensors(std::vector<TensorView> tensors,
                                        const SafetensorsMetadata &metadata) {
  std::vector<uint64_t> sizes;
  KILN_ASSIGN_OR_RETURN(std::string out,
                        encodePrefix(tensors, metadata, sizes));
  for (size_t i = 0; i < tensors.size(); ++i)
    out.append(static_cast<const char *>(tensors[i].data), sizes[i]);
  return out;
}

Status writeSafetensors(const std::string &path,
                        std::vector<TensorView> tensors,
                        const SafetensorsMetadata &metadata) {
  std::vector<uint64_t> sizes;
  StatusOr<std::string> prefix = encodePrefix(tensors, metadata, sizes);
  if (!prefix.ok())
    return prefix.status().withPrefix(path + ": ");
  std::vector<std::string_view> chunks = {*prefix};
  for (size_t i = 0; i < tensors.size(); ++i)
    chunks.emplace_back(static_cast<const char *>(tensors[i].data), sizes[i]);
  return writeFileAtomically(path, chunks);
}

uint64_t SafetensorsEntry::elementCount() const {
  uint64_t count = 1;
  for (int64_t dim : shape)
    count *= static_cast<uint64_t>(dim); // validated not to overflow
  return count;
}

StatusOr<SafetensorsFile> SafetensorsFile::open(const std::string &path) {
  SafetensorsFile file;
  file.path_ = path;

  // --- Map the file. ---
  // O_NONBLOCK: a named pipe opens at once (and fails the regular-file
  // check below) instead of waiting for a writer; regular files ignore it.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT)
      return notFound(path, ": no such file");
    return invalidArgument(path, ": cannot open (", std::strerror(errno), ")");
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return invalidArgument(path, ": not a regular file");
  }
  file.fileSize_ = static_cast<size_t>(st.st_size);
  if (file.fileSize_ < 8) {
    ::close(fd);
    return dataLoss(path, ": too short for a safetensors file (",
                    file.fileSize_, " bytes; the 8-byte header length is "
                    "missing)");
  }
  void *addr = ::mmap(nullptr, file.fileSize_, PROT_READ, MAP_PRIVATE, fd, 0);
  int mapErrno = errno;
  ::close(fd);
  if (addr == MAP_FAILED)
    return internalError(path, ": cannot map (", std::strerror(mapErrno), ")");
  size_t mappedSize = file.fileSize_;
  file.mapping_ = std::shared_ptr<const uint8_t>(
      static_cast<const uint8_t *>(addr),
      [mappedSize](const uint8_t *p) {
        ::munmap(const_cast<uint8_t *>(p), mappedSize);
      });
  const uint8_t *bytes = file.mapping_.get();

  // --- 1. Header length. ---
  uint64_t headerSize = 0;
  for (int i = 0; i < 8; ++i)
    headerSize |= uint64_t(bytes[i]) << (8 * i);
  if (headerSize > kMaxHeaderBytes)
    return dataLoss(path, ": header length ", headerSize,
                    " is absurdly large (the limit is ", kMaxHeaderBytes,
                    " bytes); not a safetensors file?");
  if (headerSize > file.fileSize_ - 8)
    return dataLoss(path, ": header length ", headerSize,
                    " runs past the end of the file (", file.fileSize_,
                    " bytes); truncated?");
  const char *headerBegin = reinterpret_cast<const char *>(bytes + 8);
  const uint64_t dataSize = file.fileSize_ - 8 - headerSize;
  file.data_ = bytes + 8 + headerSize;

  // --- 2. JSON object, duplicate top-level keys detected while parsing. ---
  std::string duplicateKey;
  std::set<std::string> topLevelKeys;
  json::parser_callback_t noteKeys = [&](int depth, json::parse_event_t event,
                                         json &parsed) {
    if (event == json::parse_event_t::key && depth == 1 && parsed.is_string() &&
        !topLevelKeys.insert(parsed.get<std::string>()).second &&
        duplicateKey.empty())
      duplicateKey = parsed.get<std::string>();
    return true;
  };
  json header;
  try {
    header = json::parse(headerBegin, headerBegin + headerSize, noteKeys);
  } catch (const json::exception &e) {
    return dataLoss(path, ": header is not valid JSON (", e.what(), ")");
  }
  if (!header.is_object())
    return dataLoss(path, ": header is not a JSON object");
  if (!duplicateKey.empty())
    return dataLoss(path, ": header names '", duplicateKey, "' twice");

  for (const auto &[name, value] : header.items()) {
    // --- 3. Metadata. ---
    if (name == "__metadata__") {
      if (!value.is_object())
        return dataLoss(path, ": __metadata__ is not an object");
      for (const auto &[key, text] : value.items()) {
        if (!text.is_string())
          return dataLoss(path, ": __metadata__ entry '", key,
                          "' is not a string");
        file.metadata_[key] = text.get<std::string>();
      }
      continue;
    }

    // --- 4. One tensor entry. ---
    auto fail = [&](const auto &...parts) {
      return dataLoss(path, ": tensor '", name, "': ", parts...);
    };
    if (!value.is_object())
      return fail("entry is not an object");
    SafetensorsEntry entry;
    entry.name = name;

    auto dtypeIt = value.find("dtype");
    if (dtypeIt == value.end())
      return fail("missing \"dtype\"");
    if (!dtypeIt->is_string())
      return fail("\"dtype\" is not a string");
    std::optional<TensorDType> dtype =
        parseTensorDType(dtypeIt->get<std::string>());
    if (!dtype)
      return fail("unknown dtype '", dtypeIt->get<std::string>(), "'");
    entry.dtype = *dtype;

    auto shapeIt = value.find("shape");
    if (shapeIt == value.end())
      return fail("missing \"shape\"");
    if (!shapeIt->is_array())
      return fail("\"shape\" is not an array");
    uint64_t neededBytes = tensorDTypeSize(entry.dtype);
    bool overflow = false;
    for (const json &dim : *shapeIt) {
      std::optional<uint64_t> extent = asCount(dim);
      if (!extent || *extent > uint64_t(INT64_MAX))
        return fail("\"shape\" entry ", dim.dump(),
                    " is not a non-negative integer");
      entry.shape.push_back(static_cast<int64_t>(*extent));
      std::optional<uint64_t> product = checkedMultiply(neededBytes, *extent);
      overflow = overflow || !product;
      neededBytes = product.value_or(0);
    }
    // A zero extent after an overflowing prefix still makes zero bytes.
    if (overflow && std::find(entry.shape.begin(), entry.shape.end(), 0) ==
                        entry.shape.end())
      return fail("shape ", formatShape(entry.shape),
                  " has more bytes than fit in 64 bits");
    if (overflow)
      neededBytes = 0;

    auto offsetsIt = value.find("data_offsets");
    if (offsetsIt == value.end())
      return fail("missing \"data_offsets\"");
    std::optional<uint64_t> begin, end;
    if (offsetsIt->is_array() && offsetsIt->size() == 2) {
      begin = asCount((*offsetsIt)[0]);
      end = asCount((*offsetsIt)[1]);
    }
    if (!begin || !end)
      return fail("\"data_offsets\" ", offsetsIt->dump(),
                  " is not a pair of non-negative integers");
    entry.begin = *begin;
    entry.end = *end;
    if (entry.begin > entry.end)
      return fail("data_offsets [", entry.begin, ", ", entry.end,
                  "] end before they begin");
    if (entry.end > dataSize)
      return fail("data_offsets [", entry.begin, ", ", entry.end,
                  "] past the end of the data (", dataSize, " bytes)");
    if (entry.end - entry.begin != neededBytes)
      return fail("data_offsets [", entry.begin, ", ", entry.end, "] hold ",
                  entry.end - entry.begin, " bytes but shape ",
                  formatShape(entry.shape), " of ",
                  tensorDTypeName(entry.dtype), " needs ", neededBytes);
    file.entries_.push_back(std::move(entry));
  }

  // --- 5. The tensors tile the data section. ---
  std::vector<const SafetensorsEntry *> byOffset;
  for (const SafetensorsEntry &entry : file.entries_)
    byOffset.push_back(&entry);
  std::sort(byOffset.begin(), byOffset.end(),
            [](const SafetensorsEntry *a, const SafetensorsEntry *b) {
              return std::tie(a->begin, a->end) < std::tie(b->begin, b->end);
            });
  uint64_t covered = 0;
  const SafetensorsEntry *previous = nullptr;
  for (const SafetensorsEntry *entry : byOffset) {
    if (entry->begin < covered)
      return dataLoss(path, ": tensors '", previous->name, "' [",
                      previous->begin, ", ", previous->end, "] and '",
                      entry->name, "' [", entry->begin, ", ", entry->end,
                      "] overlap");
    if (entry->begin > covered)
      return dataLoss(path, ": data bytes [", covered, ", ", entry->begin,
                      ") before tensor '", entry->name,
                      "' belong to no tensor");
    covered = entry->end;
    previous = entry;
  }
  if (covered != dataSize)
    return dataLoss(path, ": the data section has ", dataSize,
                    " bytes but the tensors cover only ", covered);

  std::sort(file.entries_.begin(), file.entries_.end(),
            [](const SafetensorsEntry &a, const SafetensorsEntry &b) {
              return a.name < b.name;
            });
  return file;
}

const SafetensorsEntry *SafetensorsFile::find(std::string_view name) const {
  auto it = std::lower_bound(
      entries_.begin(), entries_.end(), name,
      [](const SafetensorsEntry &e, std::string_view n) { return e.name < n; });
  if (it == entries_.end() || it->name != name)
    return nullptr;
  return &*it;
}

StatusOr<const SafetensorsEntry *>
SafetensorsFile::lookup(std::string_view name) const {
  if (const SafetensorsEntry *entry = find(name))
    return entry;
  return notFound(path_, ": no tensor '", name, "'");
}

std::string_view SafetensorsFile::bytes(const SafetensorsEntry &entry) const {
  return std::string_view(reinterpret_cast<const char *>(data_ + entry.begin),
                          entry.end - entry.begin);
}

Status SafetensorsFile::readInto(std::string_view name, TensorDType dtype,
                                 const std::vector<int64_t> &shape,
                                 void *dst) const {
  KILN_ASSIGN_OR_RETURN(const SafetensorsEntry *entry, lookup(name));
  if (entry->dtype != dtype)
    return invalidArgument(path_, ": tensor '", name, "' has dtype ",
                           tensorDTypeName(entry->dtype), ", expected ",
                           tensorDTypeName(dtype));
  if (entry->shape != shape)
    return invalidArgument(path_, ": tensor '", name, "' has shape ",
                           formatShape(entry->shape), ", expected ",
                           formatShape(shape));
  std::string_view raw = bytes(*entry);
  if (!raw.empty())
    std::memcpy(dst, raw.data(), raw.size());
  return okStatus();
}

} // namespace kiln::rt
