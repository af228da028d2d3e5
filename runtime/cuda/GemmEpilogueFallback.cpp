//===- GemmEpilogueFallback.cpp - A GemmCall's epilogue as Kiln kernels --===//

#include "runtime/cuda/GemmEpilogueFallback.h"

#include <algorithm>

namespace kiln::rt::cuda {

const char *gemmEpilogueSource() {
  // The formulas of the generated kernels' prelude (codegen/
  // CudaKernelEmitter.cpp: GPT-2's tanh GELU, bf16 as raw bits rounded to
  // nearest even), which the CPU backend applies after sgemm as well.
  return R"cuda(
__device__ __forceinline__ float kiln_fb_load(const float *p, long long i) { return p[i]; }
__device__ __forceinline__ float kiln_fb_load(const unsigned short *p, long long i) {
  return __uint_as_float(((unsigned int)p[i]) << 16);
}
__device__ __forceinline__ void kiln_fb_store(float *p, long long i, float x) { p[i] = x; }
__device__ __forceinline__ void kiln_fb_store(unsigned short *p, long long i, float x) {
  unsigned int bits = __float_as_uint(x);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    p[i] = (unsigned short)0x7fffu; // the canonical NaN, as cvt.rn.bf16.f32
    return;
  }
  bits += 0x7fffu + ((bits >> 16) & 1u);
  p[i] = (unsigned short)(bits >> 16);
}
__device__ __forceinline__ float kiln_fb_tanh_arg(float x) {
  return tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x));
}

// pre = c [+ bias[j]]; aux = pre; c = gelu(pre) when `gelu`.
template <typename T>
__device__ void kiln_fb_bias_gelu(T *c, const T *bias, T *aux, long long m, long long n,
                                  long long gelu) {
  long long step = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < m * n; i += step) {
    float pre = kiln_fb_load(c, i);
    if (bias)
      pre = pre + kiln_fb_load(bias, i % n);
    if (aux)
      kiln_fb_store(aux, i, pre);
    kiln_fb_store(c, i, gelu ? 0.5f * pre * (1.0f + kiln_fb_tanh_arg(pre)) : pre);
  }
}

// c = gelu'(aux) * c.
template <typename T>
__device__ void kiln_fb_dgelu(T *c, const T *aux, long long count) {
  long long step = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += step) {
    const float x = kiln_fb_load(aux, i), g = kiln_fb_load(c, i);
    const float t = kiln_fb_tanh_arg(x);
    kiln_fb_store(c, i, (0.5f * (1.0f + t) +
                         0.5f * x * (1.0f - t * t) * 0.7978845608028654f *
                             (1.0f + 3.0f * 0.044715f * x * x)) * g);
  }
}

// out[j] = sum over r < rows of in[r * rowStride + j * colStride], in order,
// in double (as kiln.reduce_sum sums on the CPU).
template <typename T>
__device__ void kiln_fb_sum(const T *in, float *out, long long rows, long long cols,
                            long long rowStride, long long colStride) {
  long long step = (long long)gridDim.x * blockDim.x;
  for (long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; j < cols; j += step) {
    double acc = 0;
    for (long long r = 0; r < rows; ++r)
      acc += kiln_fb_load(in, r * rowStride + j * colStride);
    out[j] = (float)acc;
  }
}

// Each entry's one parameter: 7 values in device memory, the three
// pointers (as integers) then the four integers, as Kiln's kernels take
// their buffer table.
#define KILN_FB_ENTRIES(SUFFIX, T)                                                \
  extern "C" __global__ void kiln_epilogue_bias_gelu_##SUFFIX(const long long *a) { \
    kiln_fb_bias_gelu((T *)a[0], (const T *)a[1], (T *)a[2], a[3], a[4], a[5]);   \
  }                                                                               \
  extern "C" __global__ void kiln_epilogue_dgelu_##SUFFIX(const long long *a) {   \
    kiln_fb_dgelu((T *)a[0], (const T *)a[1], a[3]);                              \
  }                                                                               \
  extern "C" __global__ void kiln_epilogue_sum_##SUFFIX(const long long *a) {     \
    kiln_fb_sum((const T *)a[0], (float *)a[1], a[3], a[4], a[5], a[6]);          \
  }
KILN_FB_ENTRIES(f32, float)
KILN_FB_ENTRIES(bf16, unsigned short)
)cuda";
}

namespace {

std::string entry(const char *name, bool bf16) {
  return std::string("kiln_epilogue_") + name + (bf16 ? "_bf16" : "_f32");
}

// The sums of a stored matrix: out has `cols` values, each over `rows`.
EpilogueLaunchPlan sum(int32_t in, bool inBf16, int32_t out, int64_t rows,
                       int64_t cols, int64_t rowStride, int64_t colStride) {
  return {entry("sum", inBf16), {in, out, -1}, {rows, cols, rowStride, colStride}, cols};
}

} // namespace

std::vector<EpilogueLaunchPlan> gemmEpilogueFallback(const schema::GemmCall &gemm,
                                                     bool cBf16, bool aBf16,
                                                     bool bBf16) {
  const int64_t m = gemm.m(), n = gemm.n(), k = gemm.k();
  const int32_t c = static_cast<int32_t>(gemm.c());
  const int32_t a = static_cast<int32_t>(gemm.a());
  const int32_t b = static_cast<int32_t>(gemm.b());
  switch (gemm.epilogue()) {
  case schema::GemmEpilogue_None:
    return {};
  case schema::GemmEpilogue_Bias:
  case schema::GemmEpilogue_Gelu:
  case schema::GemmEpilogue_BiasGelu: {
    bool gelu = gemm.epilogue() != schema::GemmEpilogue_Bias;
    return {{entry("bias_gelu", cBf16), {c, gemm.bias(), gemm.aux()}, {m, n, gelu, 0}, m * n}};
  }
  case schema::GemmEpilogue_Dgelu:
  case schema::GemmEpilogue_DgeluBgrad: {
    std::vector<EpilogueLaunchPlan> launches{
        {entry("dgelu", cBf16), {c, gemm.aux(), -1}, {m * n, 0, 0, 0}, m * n}};
    if (gemm.epilogue() == schema::GemmEpilogue_DgeluBgrad)
      launches.push_back(sum(c, cBf16, gemm.bias(), m, n, n, 1)); // over the M rows
    return launches;
  }
  case schema::GemmEpilogue_BgradA:
    // bias[i] = sum_k op(A)[i, k]: A stored [M, K] (or [K, M] transposed).
    return {gemm.trans_a() ? sum(a, aBf16, gemm.bias(), k, m, m, 1)
                           : sum(a, aBf16, gemm.bias(), k, m, 1, k)};
  case schema::GemmEpilogue_BgradB:
    // bias[j] = sum_k op(B)[k, j]: B stored [K, N] (or [N, K] transposed).
    return {gemm.trans_b() ? sum(b, bBf16, gemm.bias(), k, n, 1, k)
                           : sum(b, bBf16, gemm.bias(), k, n, n, 1)};
  }
  return {};
}

unsigned epilogueGrid(int64_t elements) {
  constexpr int64_t kMaxBlocks = 1024;
  int64_t blocks = (elements + kEpilogueBlock - 1) / kEpilogueBlock;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, kMaxBlocks));
}

} // namespace kiln::rt::cuda
