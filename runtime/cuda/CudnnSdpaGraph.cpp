//===- CudnnSdpaGraph.cpp - The SDPA forward as cuDNN backend operations --===//
//
// The graph cudnn-frontend builds for SDPA fprop with stats, written with
// the backend API (shapes beside each node; S = kv_len):
//   s   = matmul(Q [B,H,T,D], K^T [B,KVH,D,S])      [B,H,T,S] f32 (virtual)
//   s   = s * scale                                   (scale by value)
//   causal:  keep = gen_index(s, 2) >= gen_index(s, 3); s = keep ? s : -inf
//   padding: keep = gen_index(s, 2) < seq_len_q[b] and
//                   gen_index(s, 3) < seq_len_kv[b];   s = keep ? s : -inf
//            (both GEMMs also take seq_len_q / seq_len_kv as M / N / K
//             overrides, as the frontend does)
//   m   = max_j s                                     [B,H,T,1]
//   e   = exp(s - m)
//   l   = sum_j e                                     [B,H,T,1]
//   Stats = m + log(l)          -> Kiln's lse buffer ([B,H,T] f32: [B,H,T,1]
//                                  with strides [H*T, T, 1, 1])
//   P   = e / l
//   O   = matmul(P, V [B,KVH,S,Dv])                   [B,H,T,Dv] bf16
// GQA: K and V have KVH heads; cuDNN broadcasts them over H / KVH query heads
// from the head dims of the tensors. Every descriptor is finalized here:
// none of them needs a handle or a GPU.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/Cudnn.h"

namespace kiln::rt::cuda {
namespace {

// Strides of a contiguous row-major tensor.
std::vector<int64_t> contiguous(const std::vector<int64_t> &dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;)
    strides[i - 1] = strides[i] * dims[i];
  return strides;
}

class SdpaBuilder {
public:
  SdpaBuilder(const Cudnn &cudnn, SdpaOperations &out, std::string where)
      : cudnn(cudnn), out(out), where(std::move(where)) {}

  // A tensor descriptor; `uid` 0 makes a virtual one with a fresh id.
  StatusOr<const CudnnDescriptor *> tensor(const std::string &name, int64_t uid,
                                           cudnnDataType_t type,
                                           const std::vector<int64_t> &dims,
                                           std::vector<int64_t> strides = {},
                                           bool byValue = false) {
    if (strides.empty())
      strides = contiguous(dims);
    bool isVirtual = uid == 0;
    if (isVirtual)
      uid = nextVirtual++;
    KILN_ASSIGN_OR_RETURN(CudnnDescriptor t,
                          CudnnDescriptor::create(cudnn, CUDNN_BACKEND_TENSOR_DESCRIPTOR,
                                                  where + ": tensor " + name));
    int64_t alignment = 16;
    KILN_RETURN_IF_ERROR(t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type));
    KILN_RETURN_IF_ERROR(t.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64,
                               static_cast<int64_t>(dims.size()), dims.data()));
    KILN_RETURN_IF_ERROR(t.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64,
                               static_cast<int64_t>(strides.size()), strides.data()));
    KILN_RETURN_IF_ERROR(t.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid));
    KILN_RETURN_IF_ERROR(
        t.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment));
    KILN_RETURN_IF_ERROR(t.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &isVirtual));
    if (byValue)
      KILN_RETURN_IF_ERROR(t.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &byValue));
    KILN_RETURN_IF_ERROR(t.finalize());
    out.tensors.push_back(std::move(t));
    return &out.tensors.back();
  }

  // y = mode(x[, b][, t]) elementwise; `axis` >= 0 for gen_index.
  Status pointwise(const std::string &name, cudnnPointwiseMode_t mode,
                   const CudnnDescriptor *x, const CudnnDescriptor *b,
                   const CudnnDescriptor *t, const CudnnDescriptor *y,
                   int64_t axis = -1) {
    KILN_ASSIGN_OR_RETURN(CudnnDescriptor pw,
                          CudnnDescriptor::create(cudnn, CUDNN_BACKEND_POINTWISE_DESCRIPTOR,
                                                  where + ": pointwise " + name));
    cudnnDataType_t precision = CUDNN_DATA_FLOAT;
    KILN_RETURN_IF_ERROR(pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode));
    KILN_RETURN_IF_ERROR(
        pw.set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &precision));
    if (axis >= 0)
      KILN_RETURN_IF_ERROR(pw.set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis));
    KILN_RETURN_IF_ERROR(pw.finalize());
    KILN_ASSIGN_OR_RETURN(
        CudnnDescriptor op,
        CudnnDescriptor::create(cudnn, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR,
                                where + ": operation " + name));
    KILN_RETURN_IF_ERROR(op.set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw));
    KILN_RETURN_IF_ERROR(op.set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, *x));
    if (b)
      KILN_RETURN_IF_ERROR(op.set(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b));
    if (t)
      KILN_RETURN_IF_ERROR(op.set(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, *t));
    KILN_RETURN_IF_ERROR(op.set(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, *y));
    KILN_RETURN_IF_ERROR(op.finalize());
    return add(name, std::move(op), std::move(pw));
  }

  // y = reduce(x) over the last dim.
  Status reduction(const std::string &name, cudnnReduceTensorOp_t mode,
                   const CudnnDescriptor *x, const CudnnDescriptor *y) {
    KILN_ASSIGN_OR_RETURN(CudnnDescriptor r,
                          CudnnDescriptor::create(cudnn, CUDNN_BACKEND_REDUCTION_DESCRIPTOR,
                                                  where + ": reduction " + name));
    cudnnDataType_t precision = CUDNN_DATA_FLOAT;
    KILN_RETURN_IF_ERROR(
        r.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode));
    KILN_RETURN_IF_ERROR(r.set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &precision));
    KILN_RETURN_IF_ERROR(r.finalize());
    KILN_ASSIGN_OR_RETURN(
        CudnnDescriptor op,
        CudnnDescriptor::create(cudnn, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR,
                                where + ": operation " + name));
    KILN_RETURN_IF_ERROR(op.set(CUDNN_ATTR_OPERATION_REDUCTION_DESC, r));
    KILN_RETURN_IF_ERROR(op.set(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, *x));
    KILN_RETURN_IF_ERROR(op.set(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, *y));
    KILN_RETURN_IF_ERROR(op.finalize());
    return add(name, std::move(op), std::move(r));
  }

  // c = a @ b (batched over the two leading dims), with optional M / N / K
  // overrides (per-batch sizes from [B, 1, 1, 1] i32 tensors).
  Status matmul(const std::string &name, const CudnnDescriptor *a,
                const CudnnDescriptor *b, const CudnnDescriptor *c,
                const CudnnDescriptor *mOverride, const CudnnDescriptor *nOverride,
                const CudnnDescriptor *kOverride) {
    KILN_ASSIGN_OR_RETURN(CudnnDescriptor mm,
                          CudnnDescriptor::create(cudnn, CUDNN_BACKEND_MATMUL_DESCRIPTOR,
                                                  where + ": matmul " + name));
    cudnnDataType_t precision = CUDNN_DATA_FLOAT;
    KILN_RETURN_IF_ERROR(mm.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &precision));
    KILN_RETURN_IF_ERROR(mm.finalize());
    KILN_ASSIGN_OR_RETURN(
        CudnnDescriptor op,
        CudnnDescriptor::create(cudnn, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR,
                                where + ": operation " + name));
    KILN_RETURN_IF_ERROR(op.set(CUDNN_ATTR_OPERATION_MATMUL_ADESC, *a));
    KILN_RETURN_IF_ERROR(op.set(CUDNN_ATTR_OPERATION_MATMUL_BDESC, *b));
    KILN_RETURN_IF_ERROR(op.set(CUDNN_ATTR_OPERATION_MATMUL_CDESC, *c));
    KILN_RETURN_IF_ERROR(op.set(CUDNN_ATTR_OPERATION_MATMUL_DESC, mm));
    if (mOverride)
      KILN_RETURN_IF_ERROR(op.set(CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC, *mOverride));
    if (nOverride)
      KILN_RETURN_IF_ERROR(op.set(CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC, *nOverride));
    if (kOverride)
      KILN_RETURN_IF_ERROR(op.set(CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC, *kOverride));
    KILN_RETURN_IF_ERROR(op.finalize());
    return add(name, std::move(op), std::move(mm));
  }

private:
  Status add(const std::string &name, CudnnDescriptor op, CudnnDescriptor inner) {
    // The operation refers to its inner descriptor; keep both alive.
    out.tensors.push_back(std::move(inner));
    out.operations.push_back(std::move(op));
    out.nodeNames.push_back(name);
    return okStatus();
  }

  const Cudnn &cudnn;
  SdpaOperations &out;
  std::string where;
  int64_t nextVirtual = kSdpaFirstVirtual;
};

} // namespace

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

  KILN_ASSIGN_OR_RETURN(auto q, g.tensor("Q", kSdpaQ, bf16, {B, H, T, D}));
  // K stored [B, KVH, S, D]; the GEMM reads it as K^T [B, KVH, D, S].
  KILN_ASSIGN_OR_RETURN(auto kT, g.tensor("K^T", kSdpaK, bf16, {B, KVH, D, S},
                                          {KVH * S * D, S * D, 1, D}));
  KILN_ASSIGN_OR_RETURN(auto v, g.tensor("V", kSdpaV, bf16, {B, KVH, S, Dv}));
  KILN_ASSIGN_OR_RETURN(auto o, g.tensor("O", kSdpaO, bf16, {B, H, T, Dv}));
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
  KILN_RETURN_IF_ERROR(g.matmul("matmul Q K^T", q, kT, s0, seqQ, seqKv, nullptr));
  KILN_ASSIGN_OR_RETURN(auto s1, g.tensor("s * scale", 0, f32, scores));
  KILN_RETURN_IF_ERROR(g.pointwise("mul scale", CUDNN_POINTWISE_MUL, s0, scale, nullptr, s1));
  const CudnnDescriptor *s = s1;
  if (a.causal() || padding) {
    KILN_ASSIGN_OR_RETURN(auto negInf, g.tensor("-inf", kSdpaNegInf, f32, {1, 1, 1, 1},
                                                {1, 1, 1, 1}, /*byValue=*/true));
    KILN_ASSIGN_OR_RETURN(auto row, g.tensor("row index", 0, CUDNN_DATA_INT32, scores));
    KILN_RETURN_IF_ERROR(
        g.pointwise("gen_index rows", CUDNN_POINTWISE_GEN_INDEX, s, nullptr, nullptr, row, 2));
    KILN_ASSIGN_OR_RETURN(auto col, g.tensor("column index", 0, CUDNN_DATA_INT32, scores));
    KILN_RETURN_IF_ERROR(
        g.pointwise("gen_index columns", CUDNN_POINTWISE_GEN_INDEX, s, nullptr, nullptr, col, 3));
    if (a.causal()) {
      // keep j <= i (q_len == kv_len: Kiln's j <= i + S - T is the same)
      KILN_ASSIGN_OR_RETURN(auto keep, g.tensor("causal keep", 0, CUDNN_DATA_BOOLEAN, scores));
      KILN_RETURN_IF_ERROR(
          g.pointwise("cmp_ge row column", CUDNN_POINTWISE_CMP_GE, row, col, nullptr, keep));
      KILN_ASSIGN_OR_RETURN(auto masked, g.tensor("causal scores", 0, f32, scores));
      KILN_RETURN_IF_ERROR(g.pointwise("select causal", CUDNN_POINTWISE_BINARY_SELECT, s,
                                       negInf, keep, masked));
      s = masked;
    }
    if (padding) {
      // keep i < seq_len_q[b] (always: seq_len_q = T) and j < kv_lengths[b]
      KILN_ASSIGN_OR_RETURN(auto rowKeep, g.tensor("row keep", 0, CUDNN_DATA_BOOLEAN, scores));
      KILN_RETURN_IF_ERROR(
          g.pointwise("cmp_lt row seq_len_q", CUDNN_POINTWISE_CMP_LT, row, seqQ, nullptr, rowKeep));
      KILN_ASSIGN_OR_RETURN(auto colKeep, g.tensor("column keep", 0, CUDNN_DATA_BOOLEAN, scores));
      KILN_RETURN_IF_ERROR(g.pointwise("cmp_lt column seq_len_kv", CUDNN_POINTWISE_CMP_LT, col,
                                       seqKv, nullptr, colKeep));
      KILN_ASSIGN_OR_RETURN(auto keep, g.tensor("padding keep", 0, CUDNN_DATA_BOOLEAN, scores));
      KILN_RETURN_IF_ERROR(g.pointwise("and keeps", CUDNN_POINTWISE_LOGICAL_AND, rowKeep,
                                       colKeep, nullptr, keep));
      KILN_ASSIGN_OR_RETURN(auto masked, g.tensor("padded scores", 0, f32, scores));
      KILN_RETURN_IF_ERROR(g.pointwise("select padding", CUDNN_POINTWISE_BINARY_SELECT, s,
                                       negInf, keep, masked));
      s = masked;
    }
  }
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
  KILN_ASSIGN_OR_RETURN(auto p, g.tensor("P", 0, f32, scores));
  KILN_RETURN_IF_ERROR(g.pointwise("div sum", CUDNN_POINTWISE_DIV, e, rowSum, nullptr, p));
  KILN_RETURN_IF_ERROR(g.matmul("matmul P V", p, v, o, seqQ, nullptr, seqKv));
  return ops;
}

} // namespace kiln::rt::cuda
