//===- Nvtx.h - NVTX ranges for Nsight Systems ----------------------------===//
//
// kiln-run marks its work with NVTX ranges (NVIDIA Tools Extension v3, a
// header-only API) under the names --profile and --trace use, so Nsight
// Systems (`nsys profile kiln-run ...`) shows the same structure on its
// timeline: "training step N", inside it one range per program run
// ("step", "update", "eval"), inside those one per schedule entry
// ("kernel k_... [kiln.gelu] models/gpt2.kiln:50:18", "gemm 512x768x3072 (B^T)
// models/gpt2.kiln:50:18") wherever entries are launched one by one: always
// on the CPU, and on CUDA under --profile, --trace or KILN_CUDA_EAGER=1 (a
// replayed CUDA graph is one launch; Nsight names its kernels itself).
//
// Without a tool attached (NVTX_INJECTION64_PATH, which nsys sets, names
// the tool's library) a range costs a check of a null function pointer.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_METRICS_NVTX_H
#define KILN_RUNTIME_METRICS_NVTX_H

#include "runtime/Artifact.h"

#include <string>
#include <vector>

namespace kiln::rt::nvtx {

void push(const char *name);
void pop();

// A range for the object's lifetime; `name` is copied by the tool at push.
class ScopedRange {
public:
  explicit ScopedRange(const char *name) { push(name); }
  explicit ScopedRange(const std::string &name) { push(name.c_str()); }
  ~ScopedRange() { pop(); }
  ScopedRange(const ScopedRange &) = delete;
  ScopedRange &operator=(const ScopedRange &) = delete;
};

// The range names of `program`'s schedule entries, in order: what
// --profile calls the entry, then its model line.
std::vector<std::string> entryRangeNames(const Artifact &artifact, ProgramKind program);

} // namespace kiln::rt::nvtx

#endif // KILN_RUNTIME_METRICS_NVTX_H
