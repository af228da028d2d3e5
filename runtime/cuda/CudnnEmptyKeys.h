//===- CudnnEmptyKeys.h - Kiln's result for samples without keys on cuDNN -===//
//
// Kiln defines attention over a sample whose key length is 0 (kv_lengths[b]
// <= 0: every key masked) as out = 0, lse = -inf and zero gradients dq, dk,
// dv. cuDNN leaves that case undefined (its softmax divides by an empty sum;
// its engines may skip the rows). Lengths are data, so no plan-time check
// can rule it out: after a cuDNN call with key lengths, the backend runs one
// small kernel per output that rewrites exactly those samples:
//   forward:  out [B, H, T, Dv] bf16 <- 0,  lse [B, H, T] f32 <- -inf
//   backward: dq [B, H, T, D], dk [B, KVH, S, D], dv [B, KVH, S, Dv] <- 0
// The same launches also zero dk / dv at the masked keys j >= len[b] of
// every sample: the backward GEMMs take seq_len_kv as their M override (as
// cudnn-frontend builds them), so cuDNN need not write those rows, while
// Kiln's gradient there is exactly 0 (and flows on into the parameters).
// Every output is batch-major, so sample b is the elements
// [b * perSample, (b + 1) * perSample), and key row j of dk / dv is
// (i / inner) % rows. Everything else is not touched, so the fix-up is
// exact and costs one pass over the outputs.
//
// Before cuDNN runs, a third kernel copies the lengths clamped to [0, S]
// into the plan's own seq_len_kv: Kiln reads a length above S as "every
// key" and one below 0 as "no key", while cuDNN takes seq_len_kv as a GEMM
// size (an M / N / K override) that must lie within the tensor.
//
// The kernels are runtime source compiled by NVRTC (the runtime has no
// compiler inside; this header has no CUDA type, so tests compile the same
// source for the host with the CUDA emulation).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CUDA_CUDNNEMPTYKEYS_H
#define KILN_RUNTIME_CUDA_CUDNNEMPTYKEYS_H

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::rt::cuda {

// The CUDA C++ source of the fix-up kernels (no header needed):
//   kiln_cudnn_empty_keys_bf16(const int *lengths, unsigned short *x,
//                              long long perSample, long long inner,
//                              long long rows, long long total)
//   kiln_cudnn_empty_keys_f32(const int *lengths, float *x, long long perSample,
//                             long long inner, long long rows, long long total,
//                             float value)
//   kiln_cudnn_clamp_lengths(const int *lengths, int *clamped,
//                            long long batch, int kvLen)
// The fills set x[i] (bf16 +0, or `value`) where len = lengths[i / perSample]
// is <= 0, or, when inner > 0 (key-major outputs), where the key row
// (i / inner) % rows is >= len; a grid-stride loop over [0, total).
const char *cudnnEmptyKeysSource();
inline constexpr const char *kEmptyKeysBf16Entry = "kiln_cudnn_empty_keys_bf16";
inline constexpr const char *kEmptyKeysF32Entry = "kiln_cudnn_empty_keys_f32";
inline constexpr const char *kClampLengthsEntry = "kiln_cudnn_clamp_lengths";

// One output of a cuDNN attention call to rewrite for empty samples.
struct EmptyKeysFill {
  enum class Output { kOut, kLse, kDq, kDk, kDv };
  Output output;
  bool f32 = false;      // lse (value -inf); else bf16 zero
  int64_t perSample = 0; // elements of one sample
  int64_t inner = 0;     // dk / dv: elements of one key row (D or Dv; KVH * D or
                         // KVH * Dv with tokens_major); else 0
  int64_t rows = 0;      // dk / dv: key rows S; else 0
  int64_t total = 0;     // elements of the buffer (batch * perSample)
};

// The fills of one call (sizes and layout as in schema::CudnnAttention).
std::vector<EmptyKeysFill> emptyKeysFills(bool backward, int64_t batch, int64_t heads,
                                          int64_t kvHeads, int64_t qLen, int64_t kvLen,
                                          int64_t headDim, int64_t valueDim,
                                          bool tokensMajor = false);

// Threads per block and blocks of one fill's launch (grid-stride).
inline constexpr unsigned kEmptyKeysBlock = 256;
unsigned emptyKeysGrid(int64_t total);

} // namespace kiln::rt::cuda

#endif // KILN_RUNTIME_CUDA_CUDNNEMPTYKEYS_H
