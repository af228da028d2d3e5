//===- CudnnAttentionCheck.cpp - Verifier of KernelCall.cudnn_attention ---===//
//
// 1. Only on CUDA artifacts.
// 2. Sizes: every dim positive, kv_heads divides heads, head dims multiples
//    of 8 and at most 128, causal only with q_len <= kv_len (Kiln's causal
//    is bottom-right aligned, j <= i + kv_len - q_len; with q_len > kv_len
//    the first rows would keep no key), a finite scale.
// 3. Buffers: each index is one of the call's buffers (the cuDNN call must
//    touch nothing the generated kernel does not), with the dtype and exact
//    shape the sizes and tokens_major imply; the backward's four extra buffers
//    present exactly when `backward` is set.
// 4. Workspace: -1, or a Workspace buffer the KernelCall does not pass (the
//    memory plan's checker makes it live at this entry only).
//
//===----------------------------------------------------------------------===//

#include "runtime/CudnnAttentionCheck.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace kiln::rt {
namespace {

constexpr int64_t kMaxHeadDim = 128;

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// `buffer` (a field named `field`) is one of the call's buffers, of `dtype`
// and exactly `shape`.
Status checkOperand(const schema::Artifact &artifact,
                    const schema::KernelCall &call, const std::string &where,
                    const char *field, int64_t buffer, schema::DType dtype,
                    const std::vector<int64_t> &shape) {
  const auto *passed = call.buffers();
  bool isPassed = passed && buffer >= 0 &&
                  std::find(passed->begin(), passed->end(),
                            static_cast<uint32_t>(buffer)) != passed->end();
  if (!isPassed)
    return invalidArgument(where, ": cudnn_attention.", field, " is buffer ",
                           buffer, ", which the KernelCall does not pass");
  const schema::Buffer &b = *artifact.buffers()->Get(static_cast<uint32_t>(buffer));
  std::vector<int64_t> actual;
  if (b.shape())
    actual.assign(b.shape()->begin(), b.shape()->end());
  if (b.dtype() != dtype || actual != shape)
    return invalidArgument(where, ": cudnn_attention.", field, " (buffer ",
                           buffer, ") is ", schema::EnumNameDType(b.dtype()), " ",
                           shapeText(actual), ", but the attention needs ",
                           schema::EnumNameDType(dtype), " ", shapeText(shape));
  return okStatus();
}

} // namespace

Status checkCudnnAttention(const schema::Artifact &artifact,
                           const schema::KernelCall &call,
                           const std::string &where) {
  const schema::CudnnAttention *a = call.cudnn_attention();
  if (!a)
    return okStatus();
  // 1.
  if (!artifact.target() || artifact.target()->str() != "cuda")
    return invalidArgument(where, ": cudnn_attention on a non-CUDA artifact");
  // 2.
  int64_t B = a->batch(), H = a->heads(), KVH = a->kv_heads(), T = a->q_len(),
          S = a->kv_len(), D = a->head_dim(), Dv = a->value_dim();
  for (int64_t dim : {B, H, KVH, T, S, D, Dv})
    if (dim <= 0)
      return invalidArgument(where, ": cudnn_attention has a non-positive size "
                                    "(batch ", B, ", heads ", H, ", kv_heads ",
                             KVH, ", q_len ", T, ", kv_len ", S, ", head_dim ",
                             D, ", value_dim ", Dv, ")");
  if (H % KVH != 0)
    return invalidArgument(where, ": cudnn_attention kv_heads ", KVH,
                           " does not divide heads ", H);
  for (int64_t d : {D, Dv})
    if (d % 8 != 0 || d > kMaxHeadDim)
      return invalidArgument(where, ": cudnn_attention head dim ", d,
                             " is not a multiple of 8 at most ", kMaxHeadDim);
  if (a->causal() && T > S)
    return invalidArgument(where, ": cudnn_attention is causal with q_len ", T,
                           " > kv_len ", S, " (query rows without a key)");
  if (!std::isfinite(a->scale()))
    return invalidArgument(where, ": cudnn_attention scale is not finite");
  // 3.
  using schema::DType_BF16;
  // Per-head tensors [B, heads, rows, width]; [B, rows, heads, width] with
  // tokens_major.
  auto perHead = [&](int64_t heads, int64_t rows, int64_t width) {
    return a->tokens_major() ? std::vector<int64_t>{B, rows, heads, width}
                             : std::vector<int64_t>{B, heads, rows, width};
  };
  std::vector<int64_t> qShape = perHead(H, T, D), kShape = perHead(KVH, S, D),
                       vShape = perHead(KVH, S, Dv), oShape = perHead(H, T, Dv);
  KILN_RETURN_IF_ERROR(checkOperand(artifact, call, where, "q", a->q(), DType_BF16, qShape));
  KILN_RETURN_IF_ERROR(checkOperand(artifact, call, where, "k", a->k(), DType_BF16, kShape));
  KILN_RETURN_IF_ERROR(checkOperand(artifact, call, where, "v", a->v(), DType_BF16, vShape));
  KILN_RETURN_IF_ERROR(checkOperand(artifact, call, where, "out", a->out(), DType_BF16, oShape));
  KILN_RETURN_IF_ERROR(checkOperand(artifact, call, where, "lse", a->lse(),
                                    schema::DType_F32, {B, H, T}));
  if (a->kv_lengths() != -1)
    KILN_RETURN_IF_ERROR(checkOperand(artifact, call, where, "kv_lengths",
                                      a->kv_lengths(), schema::DType_I32, {B}));
  struct Extra {
    const char *field;
    int32_t buffer;
    const std::vector<int64_t> &shape;
  };
  Extra extras[] = {{"dout", a->dout(), oShape}, {"dq", a->dq(), qShape},
                    {"dk", a->dk(), kShape},     {"dv", a->dv(), vShape}};
  for (const Extra &extra : extras) {
    if (!a->backward()) {
      if (extra.buffer != -1)
        return invalidArgument(where, ": cudnn_attention is a forward but sets ",
                               extra.field);
      continue;
    }
    KILN_RETURN_IF_ERROR(checkOperand(artifact, call, where, extra.field,
                                      extra.buffer, DType_BF16, extra.shape));
  }
  // 4.
  if (int32_t w = a->workspace(); w != -1) {
    const auto *passed = call.buffers();
    if (w < 0 || static_cast<uint32_t>(w) >= artifact.buffers()->size() ||
        artifact.buffers()->Get(static_cast<uint32_t>(w))->role() !=
            schema::BufferRole_Workspace ||
        (passed && std::find(passed->begin(), passed->end(),
                             static_cast<uint32_t>(w)) != passed->end()))
      return invalidArgument(where, ": cudnn_attention.workspace is buffer ", w,
                             ", not a Workspace buffer of its own (the KernelCall "
                             "must not pass it)");
  }
  return okStatus();
}

} // namespace kiln::rt
