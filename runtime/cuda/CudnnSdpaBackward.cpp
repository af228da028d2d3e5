//===- CudnnSdpaBackward.cpp - The SDPA backward as cuDNN backend operations ===//
//
// The graph cudnn-frontend builds for SDPA bprop (its composite backward
// node), written with the backend API (shapes beside each node; S = kv_len):
//   softmax_sum = rowsum(dO * O) * 1      [B,H,T,1] f32 (non-virtual: the
//                                          plan's scratch, as the frontend's
//                                          workspace tensor)
//   s   = matmul(Q [B,H,T,D], K^T [B,KVH,D,S]) * scale     [B,H,T,S] f32
//   s   = s - Stats                        (Stats: Kiln's lse, [B,H,T,1])
//   masks as the forward's (applySdpaMasks): causal (bottom-right), padding
//   P   = exp(s)                           (= the forward's softmax)
//   P^T = reshape(P)                       [B,H,S,T] bf16 (transposed strides)
//   dV  = matmul(P^T, dO [B,H,T,Dv])       [B,H,S,Dv] -> dV [B,KVH,S,Dv]
//   dP  = matmul(dO, V^T [B,KVH,Dv,S])     [B,H,T,S] f32
//   dS  = (dP - softmax_sum) * P * scale
//   dS^T = reshape(dS)                     [B,H,S,T] bf16
//   dK  = matmul(dS^T, Q)                  [B,H,S,D] -> dK [B,KVH,S,D]
//   K   = reshape(K^T)                     [B,KVH,S,D] (f32 virtual, as the frontend)
//   dQ_accum = matmul(dS, K)               [B,H,T,D] f32 (non-virtual scratch)
//   dQ  = identity(dQ_accum)               bf16
// GQA (KVH < H): dV and dK are computed per query head ([B,H,S,*] bf16,
// virtual) and summed over each group of H / KVH heads by a reduction into
// [B,KVH,S,*], as the frontend does for cuDNN 9. Padding graphs give every
// GEMM the seq_len_q / seq_len_kv M / N / K overrides the frontend gives.
// dQ_accum needs no zeroing from cuDNN 9.6 on (Cudnn.cpp refuses older
// libraries for the backward). Every descriptor is finalized here: none of
// them needs a handle or a GPU.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudnnSdpaBuilder.h"
#include "runtime/schema/CudnnWorkspace.h"

namespace kiln::rt::cuda {
int64_t sdpaBackwardScratchBytes(const schema::CudnnAttention &a) {
  return schema::cudnnSdpaScratchBytes(
      {a.backward(), a.batch(), a.heads(), a.kv_heads(), a.q_len(), a.kv_len(),
       a.head_dim(), a.value_dim()});
}

StatusOr<SdpaOperations> buildSdpaBackward(const Cudnn &cudnn,
                                           const schema::CudnnAttention &a,
                                           const std::string &where) {
  if (!a.backward())
    return invalidArgument(where, ": buildSdpaBackward of a forward cudnn_attention");
  SdpaOperations ops;
  // Descriptors are referenced by address: no reallocation while building.
  ops.tensors.reserve(96);
  ops.operations.reserve(48);
  sdpa::SdpaBuilder g(cudnn, ops, where);
  const int64_t B = a.batch(), H = a.heads(), KVH = a.kv_heads(), T = a.q_len(),
                S = a.kv_len(), D = a.head_dim(), Dv = a.value_dim();
  const cudnnDataType_t bf16 = CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT;
  const bool padding = a.kv_lengths() >= 0, grouped = KVH != H;
  const std::vector<int64_t> one = {1, 1, 1, 1};

  // Inputs and outputs (every one a Kiln buffer: contiguous [B, heads,
  // rows, width], or [B, rows, heads, width] with tokens_major).
  const bool tm = a.tokens_major();
  using sdpa::headStrides;
  KILN_ASSIGN_OR_RETURN(auto q, g.tensor("Q", kSdpaQ, bf16, {B, H, T, D},
                                         headStrides(tm, H, T, D)));
  // K stored [B, KVH, S, D], V [B, KVH, S, Dv] (or tokens first): the GEMMs
  // read K^T and V^T.
  KILN_ASSIGN_OR_RETURN(auto kT, g.tensor("K^T", kSdpaK, bf16, {B, KVH, D, S},
                                          sdpa::headStridesTransposed(tm, KVH, S, D)));
  KILN_ASSIGN_OR_RETURN(auto vT, g.tensor("V^T", kSdpaV, bf16, {B, KVH, Dv, S},
                                          sdpa::headStridesTransposed(tm, KVH, S, Dv)));
  KILN_ASSIGN_OR_RETURN(auto o, g.tensor("O", kSdpaO, bf16, {B, H, T, Dv},
                                         headStrides(tm, H, T, Dv)));
  KILN_ASSIGN_OR_RETURN(auto dO, g.tensor("dO", kSdpaDout, bf16, {B, H, T, Dv},
                                          headStrides(tm, H, T, Dv)));
  KILN_ASSIGN_OR_RETURN(auto stats, g.tensor("Stats", kSdpaStats, f32, {B, H, T, 1},
                                             {H * T, T, 1, 1}));
  KILN_ASSIGN_OR_RETURN(auto dQ, g.tensor("dQ", kSdpaDq, bf16, {B, H, T, D},
                                          headStrides(tm, H, T, D)));
  KILN_ASSIGN_OR_RETURN(auto dK, g.tensor("dK", kSdpaDk, bf16, {B, KVH, S, D},
                                          headStrides(tm, KVH, S, D)));
  KILN_ASSIGN_OR_RETURN(auto dV, g.tensor("dV", kSdpaDv, bf16, {B, KVH, S, Dv},
                                          headStrides(tm, KVH, S, Dv)));
  KILN_ASSIGN_OR_RETURN(auto scale,
                        g.tensor("scale", kSdpaScale, f32, one, one, /*byValue=*/true));
  KILN_ASSIGN_OR_RETURN(auto unit, g.tensor("1", kSdpaOne, f32, one, one, /*byValue=*/true));
  sdpa::SdpaLengths lengths;
  if (padding) {
    KILN_ASSIGN_OR_RETURN(lengths.q, g.tensor("seq_len_q", kSdpaSeqLenQ, CUDNN_DATA_INT32,
                                              {B, 1, 1, 1}, one));
    KILN_ASSIGN_OR_RETURN(lengths.kv, g.tensor("seq_len_kv", kSdpaSeqLenKv, CUDNN_DATA_INT32,
                                               {B, 1, 1, 1}, one));
  }
  const std::vector<int64_t> scores = {B, H, T, S}, rows = {B, H, T, 1};
  const std::vector<int64_t> transposed = {B, H, S, T},
                             transposedStrides = {H * T * S, T * S, 1, S};

  // dK or dV [B, KVH, S, width] = lhs^T-shaped [B, H, S, T] @ rhs [B, H, T,
  // width]: straight into the output with one kv head per query head, else
  // per query head (bf16 virtual) and summed over each group of H / KVH.
  auto kvGradient = [&](const std::string &product, const std::string &out,
                        const CudnnDescriptor *lhs, const CudnnDescriptor *rhs,
                        const CudnnDescriptor *result, int64_t width) -> Status {
    if (!grouped)
      return g.matmul("matmul " + product, lhs, rhs, result, lengths.kv, nullptr, lengths.q);
    KILN_ASSIGN_OR_RETURN(auto perHead, g.tensor(out + " per head", 0, bf16, {B, H, S, width}));
    KILN_RETURN_IF_ERROR(
        g.matmul("matmul " + product, lhs, rhs, perHead, lengths.kv, nullptr, lengths.q));
    return g.reduction("reduce " + out + " heads", CUDNN_REDUCE_TENSOR_ADD, perHead, result);
  };

  // 1. softmax_sum = rowsum(dO * O) (times the dropout-free scale 1).
  KILN_ASSIGN_OR_RETURN(auto dOO, g.tensor("dO * O", 0, f32, {B, H, T, Dv}));
  KILN_RETURN_IF_ERROR(g.pointwise("mul dO O", CUDNN_POINTWISE_MUL, dO, o, nullptr, dOO));
  KILN_ASSIGN_OR_RETURN(auto dOORows, g.tensor("rowsum dO * O", 0, f32, rows));
  KILN_RETURN_IF_ERROR(g.reduction("reduce dO O", CUDNN_REDUCE_TENSOR_ADD, dOO, dOORows));
  KILN_ASSIGN_OR_RETURN(auto softmaxSum, g.tensor("softmax_sum", kSdpaSoftmaxSum, f32, rows));
  KILN_RETURN_IF_ERROR(
      g.pointwise("mul softmax_sum 1", CUDNN_POINTWISE_MUL, dOORows, unit, nullptr, softmaxSum));

  // 2. P = exp(scale Q K^T - Stats), masked as in the forward.
  KILN_ASSIGN_OR_RETURN(auto s0, g.tensor("s", 0, f32, scores));
  KILN_RETURN_IF_ERROR(g.matmul("matmul Q K^T", q, kT, s0, lengths.q, lengths.kv, nullptr,
                                /*padScores=*/lengths.kv != nullptr));
  KILN_ASSIGN_OR_RETURN(auto s1, g.tensor("s * scale", 0, f32, scores));
  KILN_RETURN_IF_ERROR(g.pointwise("mul scale", CUDNN_POINTWISE_MUL, s0, scale, nullptr, s1));
  KILN_ASSIGN_OR_RETURN(auto s2, g.tensor("s - Stats", 0, f32, scores));
  KILN_RETURN_IF_ERROR(g.pointwise("sub Stats", CUDNN_POINTWISE_SUB, s1, stats, nullptr, s2));
  KILN_ASSIGN_OR_RETURN(const CudnnDescriptor *s, sdpa::applySdpaMasks(g, a, s2, lengths));
  KILN_ASSIGN_OR_RETURN(auto p, g.tensor("P", 0, f32, scores));
  KILN_RETURN_IF_ERROR(g.pointwise("exp", CUDNN_POINTWISE_EXP, s, nullptr, nullptr, p));

  // 3. dV = P^T dO (summed over each kv group).
  KILN_ASSIGN_OR_RETURN(auto pT, g.tensor("P^T", 0, bf16, transposed, transposedStrides));
  KILN_RETURN_IF_ERROR(g.reshape("reshape P", p, pT));
  KILN_RETURN_IF_ERROR(kvGradient("P^T dO", "dV", pT, dO, dV, Dv));

  // 4. dS = (dO V^T - softmax_sum) * P * scale.
  KILN_ASSIGN_OR_RETURN(auto dP, g.tensor("dP", 0, f32, scores));
  KILN_RETURN_IF_ERROR(g.matmul("matmul dO V^T", dO, vT, dP, lengths.q, lengths.kv, nullptr));
  KILN_ASSIGN_OR_RETURN(auto dP1, g.tensor("dP - softmax_sum", 0, f32, scores));
  KILN_RETURN_IF_ERROR(
      g.pointwise("sub softmax_sum", CUDNN_POINTWISE_SUB, dP, softmaxSum, nullptr, dP1));
  KILN_ASSIGN_OR_RETURN(auto dP2, g.tensor("(dP - softmax_sum) P", 0, f32, scores));
  KILN_RETURN_IF_ERROR(g.pointwise("mul P", CUDNN_POINTWISE_MUL, dP1, p, nullptr, dP2));
  KILN_ASSIGN_OR_RETURN(auto dS, g.tensor("dS", 0, f32, scores));
  KILN_RETURN_IF_ERROR(g.pointwise("mul dS scale", CUDNN_POINTWISE_MUL, dP2, scale, nullptr, dS));

  // 5. dK = dS^T Q (summed over each kv group).
  KILN_ASSIGN_OR_RETURN(auto dST, g.tensor("dS^T", 0, bf16, transposed, transposedStrides));
  KILN_RETURN_IF_ERROR(g.reshape("reshape dS", dS, dST));
  KILN_RETURN_IF_ERROR(kvGradient("dS^T Q", "dK", dST, q, dK, D));

  // 6. dQ = dS K, accumulated in f32 and converted.
  // The frontend leaves this reshape's output untyped, so it takes the
  // graph's intermediate type (FLOAT); kept the same here.
  KILN_ASSIGN_OR_RETURN(auto k, g.tensor("K", 0, f32, {B, KVH, S, D}));
  KILN_RETURN_IF_ERROR(g.reshape("reshape K", kT, k));
  KILN_ASSIGN_OR_RETURN(auto dQAccum, g.tensor("dQ_accum", kSdpaDqAccum, f32, {B, H, T, D}));
  KILN_RETURN_IF_ERROR(g.matmul("matmul dS K", dS, k, dQAccum, lengths.q, nullptr, lengths.kv));
  KILN_RETURN_IF_ERROR(
      g.pointwise("identity dQ", CUDNN_POINTWISE_IDENTITY, dQAccum, nullptr, nullptr, dQ));
  return ops;
}

} // namespace kiln::rt::cuda
