//===- Safetensors.h - Hugging Face's safetensors format, written and read ===//
//
// Layout (https://github.com/huggingface/safetensors):
//   u64 little-endian N | N bytes of JSON header | raw tensor bytes
// The header maps each tensor name to {"dtype", "shape", "data_offsets":
// [begin, end]} (offsets relative to the first data byte) and carries
// "__metadata__": {"format": "pt", ...} so `safetensors.torch.load_file`
// accepts it. Tensors are written sorted by name, and the header is padded
// with spaces to a multiple of 8 bytes so the data starts aligned, as the
// reference writer does. The file is written durably (temp file in the same
// directory, fsync, rename, fsync of the directory).
//
// The reader (SafetensorsFile) is the gate for checkpoints coming back from
// disk, possibly written by another tool or torn by a crash of something
// that did not write atomically, so it trusts nothing: header length, JSON,
// every dtype/shape/offset, overlaps and full coverage of the data section
// are checked before any tensor is handed out, and every error names the
// file. The file is mapped read-only, so opening a multi-GB optimizer state
// costs no copy; tensors are copied out with readInto.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SAFETENSORS_H
#define KILN_RUNTIME_SAFETENSORS_H

#include "runtime/Status.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::rt {

// The element types Kiln reads and writes (the names are the format's).
enum class TensorDType { kF32, kF16, kBF16, kF64, kI64, kI32, kI16, kI8, kU8, kBool };

// "F32", "BF16", ... as spelled in safetensors headers.
const char *tensorDTypeName(TensorDType dtype);
// Bytes per element.
size_t tensorDTypeSize(TensorDType dtype);
// The dtype spelled `name`, or nullopt for a name Kiln does not know.
std::optional<TensorDType> parseTensorDType(std::string_view name);

// A tensor to write; `data` must hold product(shape) elements of `dtype`.
struct TensorView {
  using DType = TensorDType; // TensorView::DType::kF32 reads naturally
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const void *data = nullptr;
};

// `__metadata__` entries: a string -> string map in the format.
using SafetensorsMetadata = std::map<std::string, std::string>;

// The complete file contents (exposed for tests of the byte layout).
// `metadata` is written under "__metadata__" with "format": "pt" always
// present (a caller's "format" entry is an error: it would make the file
// unloadable by safetensors.torch).
StatusOr<std::string> encodeSafetensors(std::vector<TensorView> tensors,
                                        const SafetensorsMetadata &metadata = {});

Status writeSafetensors(const std::string &path,
                        std::vector<TensorView> tensors,
                        const SafetensorsMetadata &metadata = {});

// One tensor's header entry, validated.
struct SafetensorsEntry {
  std::string name;
  TensorDType dtype = TensorDType::kF32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0; // byte range within the data section
  uint64_t elementCount() const;
};

// A validated, read-only safetensors file. Copies share the mapping.
class SafetensorsFile {
public:
  // Maps `path` and validates it completely (see the file banner). Every
  // error message starts with `path`.
  static StatusOr<SafetensorsFile> open(const std::string &path);

  const std::string &path() const { return path_; }
  const SafetensorsMetadata &metadata() const { return metadata_; }
  // All tensors, sorted by name.
  const std::vector<SafetensorsEntry> &entries() const { return entries_; }

  // The entry named `name`, or nullptr.
  const SafetensorsEntry *find(std::string_view name) const;
  // The entry named `name`, or "FILE: no tensor 'x'".
  StatusOr<const SafetensorsEntry *> lookup(std::string_view name) const;
  // The raw little-endian bytes of `entry` (valid while any copy lives).
  std::string_view bytes(const SafetensorsEntry &entry) const;

  // Copies tensor `name` into `dst` (product(shape) * size(dtype) bytes)
  // after checking that it exists and has exactly `dtype` and `shape`:
  // "FILE: tensor 'x' has dtype BF16, expected F32",
  // "FILE: tensor 'x' has shape [2, 3], expected [3, 2]".
  Status readInto(std::string_view name, TensorDType dtype,
                  const std::vector<int64_t> &shape, void *dst) const;

private:
  std::string path_;
  std::shared_ptr<const uint8_t> mapping_; // whole file; unmapped by deleter
  size_t fileSize_ = 0;
  const uint8_t *data_ = nullptr;          // first byte of the data section
  SafetensorsMetadata metadata_;
  std::vector<SafetensorsEntry> entries_;
};

// "[2, 3]" for error messages.
std::string formatShape(const std::vector<int64_t> &shape);

} // namespace kiln::rt

#endif // KILN_RUNTIME_SAFETENSORS_H
