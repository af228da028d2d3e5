//===- CudnnEmptyKeys.cpp - Fix-up kernels for samples without keys -------===//

#include "runtime/cuda/CudnnEmptyKeys.h"

#include <algorithm>

namespace kiln::rt::cuda {

const char *cudnnEmptyKeysSource() {
  // A sample with kv_lengths[b] <= 0 has no key: Kiln's out / gradients are
  // 0 and its lse is -inf (passed as `value`). A key row j >= len of dk / dv
  // (inner > 0) is a masked key: gradient 0. Everything else is untouched.
  return R"cuda(
__device__ __forceinline__ bool kiln_cudnn_absent(const int *lengths, long long i,
                                                  long long perSample, long long inner,
                                                  long long rows) {
  long long len = lengths[i / perSample];
  return len <= 0 || (inner > 0 && (i / inner) % rows >= len);
}

extern "C" __global__ void kiln_cudnn_empty_keys_bf16(const int *lengths, unsigned short *x,
                                                      long long perSample, long long inner,
                                                      long long rows, long long total) {
  long long step = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step)
    if (kiln_cudnn_absent(lengths, i, perSample, inner, rows))
      x[i] = 0; // bf16 +0.0
}

extern "C" __global__ void kiln_cudnn_clamp_lengths(const int *lengths, int *clamped,
                                                    long long batch, int kvLen) {
  long long step = (long long)gridDim.x * blockDim.x;
  for (long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x; b < batch; b += step) {
    int len = lengths[b];
    clamped[b] = len < 0 ? 0 : (len > kvLen ? kvLen : len);
  }
}

extern "C" __global__ void kiln_cudnn_empty_keys_f32(const int *lengths, float *x,
                                                     long long perSample, long long inner,
                                                     long long rows, long long total,
                                                     float value) {
  long long step = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step)
    if (kiln_cudnn_absent(lengths, i, perSample, inner, rows))
      x[i] = value;
}
)cuda";
}

std::vector<EmptyKeysFill> emptyKeysFills(bool backward, int64_t batch, int64_t heads,
                                          int64_t kvHeads, int64_t qLen, int64_t kvLen,
                                          int64_t headDim, int64_t valueDim,
                                          bool tokensMajor) {
  using Output = EmptyKeysFill::Output;
  // Query-major outputs (inner 0): whole samples only. dk / dv: also the
  // key rows at or beyond the sample's length; a key row is `width`
  // elements, or kvHeads rows of them when the tokens dim comes first.
  const int64_t keyRows = tokensMajor ? kvHeads : 1;
  auto fill = [&](Output output, bool f32, int64_t perSample, int64_t inner) {
    return EmptyKeysFill{output, f32, perSample, inner, inner ? kvLen : 0,
                         batch * perSample};
  };
  if (!backward)
    return {fill(Output::kOut, false, heads * qLen * valueDim, 0),
            fill(Output::kLse, true, heads * qLen, 0)};
  return {fill(Output::kDq, false, heads * qLen * headDim, 0),
          fill(Output::kDk, false, kvHeads * kvLen * headDim, keyRows * headDim),
          fill(Output::kDv, false, kvHeads * kvLen * valueDim, keyRows * valueDim)};
}

unsigned emptyKeysGrid(int64_t total) {
  // Enough blocks to fill the GPU; the loop strides over the rest.
  constexpr int64_t kMaxBlocks = 1024;
  int64_t blocks = (total + kEmptyKeysBlock - 1) / kEmptyKeysBlock;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, kMaxBlocks));
}

} // namespace kiln::rt::cuda
