//===- CudnnSdpaBuilder.h - Backend descriptors of the SDPA graphs --------===//
//
// Internal to CudnnSdpaGraph.cpp (forward) and CudnnSdpaBackward.cpp
// (backward): a small builder that creates and finalizes tensor, pointwise,
// reduction, matmul and reshape descriptors into an SdpaOperations, and the
// mask chain both graphs share (applySdpaMasks). Nothing here needs a
// handle or a GPU.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CUDA_CUDNNSDPABUILDER_H
#define KILN_RUNTIME_CUDA_CUDNNSDPABUILDER_H

#include "runtime/cuda/Cudnn.h"

namespace kiln::rt::cuda::sdpa {


// Strides of a contiguous row-major tensor.
inline std::vector<int64_t> contiguous(const std::vector<int64_t> &dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;)
    strides[i - 1] = strides[i] * dims[i];
  return strides;
}

// Strides of a per-head tensor (q, k, v, o and their gradients) read as
// dims [B, heads, rows, width]: contiguous, or stored [B, rows, heads,
// width] when `tokensMajor` (schema::CudnnAttention::tokens_major).
inline std::vector<int64_t> headStrides(bool tokensMajor, int64_t heads, int64_t rows,
                                        int64_t width) {
  if (tokensMajor)
    return {rows * heads * width, width, heads * width, 1};
  return {heads * rows * width, rows * width, width, 1};
}
// The same storage read transposed, as dims [B, heads, width, rows] (K^T,
// V^T for the GEMMs).
inline std::vector<int64_t> headStridesTransposed(bool tokensMajor, int64_t heads,
                                                  int64_t rows, int64_t width) {
  std::vector<int64_t> s = headStrides(tokensMajor, heads, rows, width);
  return {s[0], s[1], s[3], s[2]};
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
                   int64_t axis = -1, cudnnDataType_t precision = CUDNN_DATA_FLOAT) {
    KILN_ASSIGN_OR_RETURN(CudnnDescriptor pw,
                          CudnnDescriptor::create(cudnn, CUDNN_BACKEND_POINTWISE_DESCRIPTOR,
                                                  where + ": pointwise " + name));
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
  // overrides (per-batch sizes from [B, 1, 1, 1] i32 tensors). `padScores`
  // sets the matmul's padding value to 0 (the frontend does for Q K^T under
  // a padding mask: entries past the overridden sizes read as 0).
  Status matmul(const std::string &name, const CudnnDescriptor *a,
                const CudnnDescriptor *b, const CudnnDescriptor *c,
                const CudnnDescriptor *mOverride, const CudnnDescriptor *nOverride,
                const CudnnDescriptor *kOverride, bool padScores = false) {
    KILN_ASSIGN_OR_RETURN(CudnnDescriptor mm,
                          CudnnDescriptor::create(cudnn, CUDNN_BACKEND_MATMUL_DESCRIPTOR,
                                                  where + ": matmul " + name));
    cudnnDataType_t precision = CUDNN_DATA_FLOAT;
    KILN_RETURN_IF_ERROR(mm.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &precision));
    if (padScores) {
      double zero = 0.0;
      KILN_RETURN_IF_ERROR(mm.set(CUDNN_ATTR_MATMUL_PADDING_VALUE, CUDNN_TYPE_DOUBLE, 1, &zero));
    }
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

  // y = x viewed with y's dims and strides (the frontend's transposes of P,
  // dS and K in the backward).
  Status reshape(const std::string &name, const CudnnDescriptor *x,
                 const CudnnDescriptor *y) {
    KILN_ASSIGN_OR_RETURN(
        CudnnDescriptor op,
        CudnnDescriptor::create(cudnn, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR,
                                where + ": operation " + name));
    KILN_RETURN_IF_ERROR(op.set(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, *x));
    KILN_RETURN_IF_ERROR(op.set(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, *y));
    KILN_RETURN_IF_ERROR(op.finalize());
    return add(name, std::move(op), CudnnDescriptor());
  }

private:
  Status add(const std::string &name, CudnnDescriptor op, CudnnDescriptor inner) {
    // The operation refers to its inner descriptor; keep both alive.
    if (inner.get())
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


// The seq_len_q / seq_len_kv tensors of a padding graph (null without one).
struct SdpaLengths {
  const CudnnDescriptor *q = nullptr, *kv = nullptr;
};

// Kiln's masks on the scores `s` [B, H, T, S] (f32), as gen_index + cmp +
// binary_select nodes, padding first as the frontend orders them; returns
// `s` itself when `a` has no mask:
//   causal:  keep j <= i + (S - T) (bottom-right aligned; for S != T the
//            row index is offset by a by-value INT32 S - T before the
//            cmp_ge, as cudnn-frontend's bottom-right causal mask does);
//   padding: keep i < seq_len_q[b] and j < seq_len_kv[b].
// Masked scores become the by-value -inf (kSdpaNegInf).
StatusOr<const CudnnDescriptor *> applySdpaMasks(SdpaBuilder &g,
                                                 const schema::CudnnAttention &a,
                                                 const CudnnDescriptor *s,
                                                 SdpaLengths lengths);

} // namespace kiln::rt::cuda::sdpa

#endif // KILN_RUNTIME_CUDA_CUDNNSDPABUILDER_H
