//===- CompileCheck.h - kiln-run --compile-only: NVRTC without a GPU ------===//
//
// Compiles a CUDA artifact's kernels for each requested architecture through
// the same JIT and cache a GPU run uses, twice (the second lookup must hit
// the cache), and reports per architecture the cold and warm times and per
// kernel its registers and spill bytes. It is the CI check that every
// generated kernel compiles for sm_80 and sm_90a: a compile error, a kernel
// ptxas did not report as an entry point, any spill, or a kernel whose
// registers x threads per block exceed an SM's register file, or whose
// static + dynamic shared memory exceeds the arch's opt-in limit
// (runtime/schema/CudaSharedMemory.h; its launch would fail) fails the check. The ctests cuda-kernels-<model> run it on
// every model's kernels (test/cuda/CMakeLists.txt).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CUDA_COMPILECHECK_H
#define KILN_RUNTIME_CUDA_COMPILECHECK_H

#include "runtime/RunOptions.h"
#include "runtime/Status.h"

#include <cstdio>
#include <string>
#include <vector>

namespace kiln::rt::cuda {

struct CompileCheckReport {
  std::vector<std::string> problems; // one line per spilling/missing kernel
  bool passed() const { return problems.empty(); }
};

// Loads options.artifactPath, compiles for options.archs (default: the
// artifact's archs) and prints the report to `out`. Errors (no NVRTC, a
// CPU artifact, a compile error) are returned; spills are problems.
StatusOr<CompileCheckReport> runCompileCheck(const RunOptions &options,
                                             FILE *out);

} // namespace kiln::rt::cuda

#endif // KILN_RUNTIME_CUDA_COMPILECHECK_H
