//===- GemmEpilogueFallback.h - A GemmCall's epilogue as Kiln kernels ----===//
//
// cuBLASLt runs a GemmCall's epilogue (bias, GELU, their gradients) inside
// the GEMM when its heuristic offers an algorithm for it; for some shapes,
// types or archs it offers none (the heuristic returns NOT_SUPPORTED or no
// result). Then the backend plans the plain GEMM and runs the epilogue as
// the launches planned here, after it on the same stream (captured into the
// same graph), with the formulas the CPU backend applies after sgemm
// (runtime/cpu/GemmEpilogue.cpp):
//   Bias / Gelu / BiasGelu: pre = C [+ bias[j]]; aux = pre (when kept);
//                           C = gelu(pre) for the GELU forms;
//   Dgelu(Bgrad):           C = gelu'(aux) * C; then bias[j] = sum_i C[i, j];
//   BgradA / BgradB:        bias = the sums of op(A) / op(B) over k.
// Elements have C's type (bias and aux too, as the verifier requires); the
// summed operands may be bf16; sums accumulate in double and write f32.
// With a bf16 C the GEMM rounds the product before the bias is added, one
// rounding more than cuBLASLt's fused epilogue.
//
// The kernels are runtime source compiled by NVRTC on first need. Every
// entry takes one parameter, a device array of seven 64-bit values (three
// pointers, four integers), as Kiln's kernels take their buffer table, so a
// launch is data. This header has no CUDA type.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CUDA_GEMMEPILOGUEFALLBACK_H
#define KILN_RUNTIME_CUDA_GEMMEPILOGUEFALLBACK_H

#include "runtime/Artifact.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::rt::cuda {

// The CUDA C++ source of the entries (no header needed), each
//   (const long long *args) = {p0, p1, p2, i0, i1, i2, i3}
// with a grid-stride loop:
//   kiln_epilogue_bias_gelu_{f32,bf16}(c, bias|null, aux|null, m, n, gelu, -)
//   kiln_epilogue_dgelu_{f32,bf16}(c, aux, -, count, -, -, -)
//   kiln_epilogue_sum_{f32,bf16}(in, out f32, -, rows, cols, rowStride,
//                                colStride): out[j] = sum_r in[r * rowStride
//                                + j * colStride]
const char *gemmEpilogueSource();

// One launch of the fallback: which entry, and its parameters as artifact
// buffers (-1: null) and integers.
struct EpilogueLaunchPlan {
  std::string entry;
  std::array<int32_t, 3> buffers{-1, -1, -1};
  std::array<int64_t, 4> values{0, 0, 0, 0};
  int64_t elements = 0; // what the grid-stride loop covers
};

// The launches that follow the plain GEMM of `gemm` (none for
// GemmEpilogue_None). `cBf16`, `aBf16`, `bBf16`: the buffers' element types.
std::vector<EpilogueLaunchPlan> gemmEpilogueFallback(const schema::GemmCall &gemm,
                                                     bool cBf16, bool aBf16,
                                                     bool bBf16);

// Threads per block and blocks of a launch (grid-stride).
inline constexpr unsigned kEpilogueBlock = 256;
inline constexpr int kEpilogueArgs = 7;
unsigned epilogueGrid(int64_t elements);

} // namespace kiln::rt::cuda

#endif // KILN_RUNTIME_CUDA_GEMMEPILOGUEFALLBACK_H
