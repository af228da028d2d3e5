//===- CudnnEmptyKeys.cpp - Fix-up kernels for samples without keys -------===//

#include "runtime/cuda/CudnnEmptyKeys.h"

#include <algorithm>

namespace kiln::rt::cuda {

const char *cudnnEmptyKeysSource() {
  // A sample with kv_lengths[b] <= 0 has no key: Kiln's out / gradients are
  // 0 and its lse is -inf (passed as `value`); other samples are untouched.
  return R"cuda(
extern "C" __global__ void kiln_cudnn_empty_keys_bf16(const int *lengths, unsigned short *x,
                                                      long long perSample, long long total) {
  long long step = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step)
    if (lengths[i / perSample] <= 0)
      x[i] = 0; // bf16 +0.0
}

extern "C" __global__ void kiln_cudnn_empty_keys_f32(const int *lengths, float *x,
                                                     long long perSample, long long total,
                                                     float value) {
  long long step = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step)
    if (lengths[i / perSample] <= 0)
      x[i] = value;
}
)cuda";
}

std::vector<EmptyKeysFill> emptyKeysFills(bool backward, int64_t batch, int64_t heads,
                                          int64_t kvHeads, int64_t qLen, int64_t kvLen,
                                          int64_t headDim, int64_t valueDim) {
  using Output = EmptyKeysFill::Output;
  auto fill = [&](Output output, bool f32, int64_t perSample) {
    return EmptyKeysFill{output, f32, perSample, batch * perSample};
  };
  if (!backward)
    return {fill(Output::kOut, false, heads * qLen * valueDim),
            fill(Output::kLse, true, heads * qLen)};
  return {fill(Output::kDq, false, heads * qLen * headDim),
          fill(Output::kDk, false, kvHeads * kvLen * headDim),
          fill(Output::kDv, false, kvHeads * kvLen * valueDim)};
}

unsigned emptyKeysGrid(int64_t total) {
  // Enough blocks to fill the GPU; the loop strides over the rest.
  constexpr int64_t kMaxBlocks = 1024;
  int64_t blocks = (total + kEmptyKeysBlock - 1) / kEmptyKeysBlock;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, kMaxBlocks));
}

} // namespace kiln::rt::cuda
