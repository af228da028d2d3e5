//===- Safetensors.h - Writing tensors in Hugging Face's safetensors format ===//
//
// Layout (https://github.com/huggingface/safetensors):
//   u64 little-endian N | N bytes of JSON header | raw tensor bytes
// The header maps each tensor name to {"dtype", "shape", "data_offsets":
// [begin, end]} (offsets relative to the first data byte) and carries
// "__metadata__": {"format": "pt"} so `safetensors.torch.load_file` accepts
// it. Tensors are written sorted by name, and the header is padded with
// spaces to a multiple of 8 bytes so the data starts aligned, as the
// reference writer does. The file is written atomically (temp, fsync,
// rename).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SAFETENSORS_H
#define KILN_RUNTIME_SAFETENSORS_H

#include "runtime/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::rt {

// A tensor to write; `data` must hold product(shape) elements of `dtype`.
struct TensorView {
  enum class DType { kF32, kI32 };
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const void *data = nullptr;
};

// The complete file contents (exposed for tests of the byte layout).
StatusOr<std::string> encodeSafetensors(std::vector<TensorView> tensors);

Status writeSafetensors(const std::string &path,
                        std::vector<TensorView> tensors);

} // namespace kiln::rt

#endif // KILN_RUNTIME_SAFETENSORS_H
