//===- CudnnSdpaGraph.cpp - The SDPA forward as cuDNN backend operations --===//
//
// The graph cudnn-frontend builds for SDPA fprop with stats, written with
// the backend API (shapes beside each node; S = kv_len):
//   s   = matmul(Q [B,H,T,D], K^T [B,KVH,D,S])      [B,H,T,S] f32 (virtual)
//   s   = s * scale                                   (scale by value)
//   causal:  keep = gen_index(s, 2) [+ (S - T)] >= gen_index(s, 3);
//            s = keep ? s : -inf   (Kiln's bottom-right causal j <= i + S - T)
//   padding: keep = gen_index(s, 2) < seq_len_q[b] and
//                   gen_index(s, 3) < seq_len_kv[b];   s = keep ? s : -inf
//            (both GEMMs also take seq_len_q / seq_len_kv as M / N / K
//             overrides, as the frontend does)
//   m   = max_j s                                     [B,H,T,1]
//   e   = exp(s - m)
//   l   = sum_j e                                     [B,H,T,1]
//   Stats = m + log(l)          -> Kiln's lse buffer ([B,H,T] f32: [B,H,T,1]
//                                  with strides [H*T, T, 1, 1])
//   P   = e / l                                       bf16 (virtual)
//   O   = matmul(P, V [B,KVH,S,Dv])                   [B,H,T,Dv] bf16
// GQA: K and V have KVH heads; cuDNN broadcasts them over H / KVH query heads
// from the head dims of the tensors. With tokens_major (the op's layout
// bthd) Q, K, V and O keep these dims with [B, T, H, D]-order strides. Every descriptor is finalized here:
// none of them needs a handle or a GPU.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudnnSdpaBuilder.h"

namespace kiln::rt::cuda {

using sdpa::SdpaBuilder;

namespace sdpa {

StatusOr<const CudnnDescriptor *> applySdpaMasks(SdpaBuilder &g,
                                                 const schema::CudnnAttention &a,
                                                 const CudnnDescriptor *s,
                                                 SdpaLengths lengths) {
  const bool padding = a.kv_lengths() >= 0;
  if (!a.causal() && !padding)
    return s;
  const std::vector<int64_t> scores = {a.batch(), a.heads(), a.q_len(), a.kv_len()};
  const std::vector<int64_t> one = {1, 1, 1, 1};
  // Index arithmetic in INT32 and the compares / and in BOOLEAN, as the
  // frontend sets their compute types; the selects compute in FLOAT.
  const cudnnDataType_t i32 = CUDNN_DATA_INT32, boolean = CUDNN_DATA_BOOLEAN;
  KILN_ASSIGN_OR_RETURN(auto negInf, g.tensor("-inf", kSdpaNegInf, CUDNN_DATA_FLOAT, one, one,
                                              /*byValue=*/true));
  KILN_ASSIGN_OR_RETURN(auto row, g.tensor("row index", 0, CUDNN_DATA_INT32, scores));
  KILN_RETURN_IF_ERROR(
      g.pointwise("gen_index rows", CUDNN_POINTWISE_GEN_INDEX, s, nullptr, nullptr, row, 2, i32));
  KILN_ASSIGN_OR_RETURN(auto col, g.tensor("column index", 0, CUDNN_DATA_INT32, scores));
  KILN_RETURN_IF_ERROR(
      g.pointwise("gen_index columns", CUDNN_POINTWISE_GEN_INDEX, s, nullptr, nullptr, col, 3, i32));
  if (padding) {
    // keep i < seq_len_q[b] (always: seq_len_q = T) and j < kv_lengths[b]
    KILN_ASSIGN_OR_RETURN(auto rowKeep, g.tensor("row keep", 0, CUDNN_DATA_BOOLEAN, scores));
    KILN_RETURN_IF_ERROR(g.pointwise("cmp_lt row seq_len_q", CUDNN_POINTWISE_CMP_LT, row,
                                     lengths.q, nullptr, rowKeep, -1, boolean));
    KILN_ASSIGN_OR_RETURN(auto colKeep, g.tensor("column keep", 0, CUDNN_DATA_BOOLEAN, scores));
    KILN_RETURN_IF_ERROR(g.pointwise("cmp_lt column seq_len_kv", CUDNN_POINTWISE_CMP_LT, col,
                                     lengths.kv, nullptr, colKeep, -1, boolean));
    KILN_ASSIGN_OR_RETURN(auto keep, g.tensor("padding keep", 0, CUDNN_DATA_BOOLEAN, scores));
    KILN_RETURN_IF_ERROR(g.pointwise("and keeps", CUDNN_POINTWISE_LOGICAL_AND, rowKeep, colKeep,
                                     nullptr, keep, -1, boolean));
    KILN_ASSIGN_OR_RETURN(auto masked, g.tensor("padded scores", 0, CUDNN_DATA_FLOAT, scores));
    KILN_RETURN_IF_ERROR(g.pointwise("select padding", CUDNN_POINTWISE_BINARY_SELECT, s, negInf,
                                     keep, masked));
    s = masked;
  }
  if (a.causal()) {
    // keep j <= i + (S - T): Kiln's causal is aligned bottom-right. With
    // S == T that is cuDNN's plain causal (no offset node, as the frontend
    // builds it); otherwise the row index is shifted first.
    const CudnnDescriptor *shiftedRow = row;
    if (a.kv_len() != a.q_len()) {
      KILN_ASSIGN_OR_RETURN(auto offset, g.tensor("S - T", kSdpaCausalOffset, CUDNN_DATA_INT32,
                                                  one, one, /*byValue=*/true));
      KILN_ASSIGN_OR_RETURN(shiftedRow, g.tensor("row index + S - T", 0, CUDNN_DATA_INT32, scores));
      KILN_RETURN_IF_ERROR(g.pointwise("add row S - T", CUDNN_POINTWISE_ADD, row, offset, nullptr,
                                       shiftedRow, -1, i32));
    }
    KILN_ASSIGN_OR_RETURN(auto keep, g.tensor("causal keep", 0, CUDNN_DATA_BOOLEAN, scores));
    KILN_RETURN_IF_ERROR(
        g.pointwise("cmp_ge row column", CUDNN_POINTWISE_CMP_GE, shiftedRow, col, nullptr, keep,
                    -1, boolean));
    KILN_ASSIGN_OR_RETURN(auto masked, g.tensor("causal scores", 0, CUDNN_DATA_FLOAT, scores));
    KILN_RETURN_IF_ERROR(g.pointwise("select causal", CUDNN_POINTWISE_BINARY_SELECT, s, negInf,
                                     keep, masked));
    s = masked;
  }
  return s;
}

} // namespace sdpa

StatusOr<SdpaOperations> buildSdpaForward(const Cudnn &cudnn,
                                          const schema::CudnnAttention &a,
                                          const std::string &where) {
  if (a.backward())
    return invalidArgument(where, ": buildSdpaForward of a backward cudnn_attention");
  SdpaOperations ops;
  // Descriptors are referenced by address: no reallocation while building.
  ops.tensors.reserve(64);
  ops.operations.reserve(32);
  SdpaBuilder g(cudnn, ops, where);
  const int64_t B = a.batch(), H = a.heads(), KVH = a.kv_heads(), T = a.q_len(),
                S = a.kv_len(), D = a.head_dim(), Dv = a.value_dim();
  const cudnnDataType_t bf16 = CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT;
  const bool padding = a.kv_lengths() >= 0;

  const bool tokensMajor = a.tokens_major();
  KILN_ASSIGN_OR_RETURN(auto q, g.tensor("Q", kSdpaQ, bf16, {B, H, T, D},
                                         sdpa::headStrides(tokensMajor, H, T, D)));
  // K stored [B, KVH, S, D] (or [B, S, KVH, D]); the GEMM reads it as K^T
  // [B, KVH, D, S].
  KILN_ASSIGN_OR_RETURN(
      auto kT, g.tensor("K^T", kSdpaK, bf16, {B, KVH, D, S},
                        sdpa::headStridesTransposed(tokensMajor, KVH, S, D)));
  KILN_ASSIGN_OR_RETURN(auto v, g.tensor("V", kSdpaV, bf16, {B, KVH, S, Dv},
                                         sdpa::headStrides(tokensMajor, KVH, S, Dv)));
  KILN_ASSIGN_OR_RETURN(auto o, g.tensor("O", kSdpaO, bf16, {B, H, T, Dv},
                                         sdpa::headStrides(tokensMajor, H, T, Dv)));
  KILN_ASSIGN_OR_RETURN(auto stats, g.tensor("Stats", kSdpaStats, f32, {B, H, T, 1},
                                             {H * T, T, 1, 1}));
  KILN_ASSIGN_OR_RETURN(auto scale, g.tensor("scale", kSdpaScale, f32, {1, 1, 1, 1},
                                             {1, 1, 1, 1}, /*byValue=*/true));
  const CudnnDescriptor *seqQ = nullptr, *seqKv = nullptr;
  if (padding) {
    KILN_ASSIGN_OR_RETURN(seqQ, g.tensor("seq_len_q", kSdpaSeqLenQ, CUDNN_DATA_INT32,
                                         {B, 1, 1, 1}, {1, 1, 1, 1}));
    KILN_ASSIGN_OR_RETURN(seqKv, g.tensor("seq_len_kv", kSdpaSeqLenKv, CUDNN_DATA_INT32,
                                          {B, 1, 1, 1}, {1, 1, 1, 1}));
  }
  const std::vector<int64_t> scores = {B, H, T, S}, rows = {B, H, T, 1};

  KILN_ASSIGN_OR_RETURN(auto s0, g.tensor("s", 0, f32, scores));
  KILN_RETURN_IF_ERROR(
      g.matmul("matmul Q K^T", q, kT, s0, seqQ, seqKv, nullptr, /*padScores=*/padding));
  KILN_ASSIGN_OR_RETURN(auto s1, g.tensor("s * scale", 0, f32, scores));
  KILN_RETURN_IF_ERROR(g.pointwise("mul scale", CUDNN_POINTWISE_MUL, s0, scale, nullptr, s1));
  KILN_ASSIGN_OR_RETURN(const CudnnDescriptor *s, sdpa::applySdpaMasks(g, a, s1, {seqQ, seqKv}));
  // Softmax with stats.
  KILN_ASSIGN_OR_RETURN(auto rowMax, g.tensor("row max", 0, f32, rows));
  KILN_RETURN_IF_ERROR(g.reduction("reduce max", CUDNN_REDUCE_TENSOR_MAX, s, rowMax));
  KILN_ASSIGN_OR_RETURN(auto shifted, g.tensor("s - max", 0, f32, scores));
  KILN_RETURN_IF_ERROR(g.pointwise("sub max", CUDNN_POINTWISE_SUB, s, rowMax, nullptr, shifted));
  KILN_ASSIGN_OR_RETURN(auto e, g.tensor("exp", 0, f32, scores));
  KILN_RETURN_IF_ERROR(g.pointwise("exp", CUDNN_POINTWISE_EXP, shifted, nullptr, nullptr, e));
  KILN_ASSIGN_OR_RETURN(auto rowSum, g.tensor("row sum", 0, f32, rows));
  KILN_RETURN_IF_ERROR(g.reduction("reduce sum", CUDNN_REDUCE_TENSOR_ADD, e, rowSum));
  KILN_ASSIGN_OR_RETURN(auto logSum, g.tensor("log sum", 0, f32, rows));
  KILN_RETURN_IF_ERROR(g.pointwise("log", CUDNN_POINTWISE_LOG, rowSum, nullptr, nullptr, logSum));
  KILN_RETURN_IF_ERROR(g.pointwise("add stats", CUDNN_POINTWISE_ADD, rowMax, logSum, nullptr, stats));
  // P enters the second GEMM in the inputs' type (the frontend converts it:
  // cuDNN's engines take bmm2's A operand as the i/o type).
  KILN_ASSIGN_OR_RETURN(auto p, g.tensor("P", 0, bf16, scores));
  KILN_RETURN_IF_ERROR(g.pointwise("div sum", CUDNN_POINTWISE_DIV, e, rowSum, nullptr, p));
  KILN_RETURN_IF_ERROR(g.matmul("matmul P V", p, v, o, seqQ, nullptr, seqKv));
  return ops;
}

} // namespace kiln::rt::cuda
