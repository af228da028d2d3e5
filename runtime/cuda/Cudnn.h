//===- Cudnn.h - cuDNN 9's fused attention, loaded at run time ------------===//
//
// libcudnn.so.9 is dlopen'ed like cuBLASLt (DynamicLibrary.h) and driven
// through its backend (graph) API only. A KernelCall carrying a
// cudnn_attention (artifact.fbs) can be run by a CudnnAttentionPlan instead
// of its generated kernel:
//   - the forward is the SDPA operation graph cudnn-frontend builds for
//     fprop with stats (CudnnSdpaGraph.cpp): S = Q K^T, S *= scale, the
//     causal / key-length mask as gen_index + cmp + binary_select, softmax
//     with stats (max, exp, sum, log, stats = max + log sum, P = exp / sum),
//     O = P V; Stats is written straight into Kiln's lse buffer ([B, H, T]
//     f32, natural log, the same quantity as Kiln's lse), so a cuDNN forward
//     pairs with Kiln's generated backward;
//   - the backward is the SDPA bprop graph cudnn-frontend builds
//     (CudnnSdpaBackward.cpp): it recomputes P = exp(scale Q K^T - Stats)
//     from Kiln's lse and writes dQ, dK, dV; so a forward and its backward
//     pair exactly whichever of cuDNN and the generated kernel runs each;
//   - a call with key lengths may have samples whose length is 0; Kiln
//     defines them (out 0, lse -inf, gradients 0) and cuDNN does not, so a
//     small runtime kernel (CudnnEmptyKeys.h) rewrites them after cuDNN
//     (and zeroes dk / dv at masked keys); cuDNN's seq_len_kv is a copy of
//     the lengths clamped to [0, S] by another one before it.
// Building the operation descriptors needs no GPU (tests build and finalize
// them on CPU machines); the operation graph, heuristics and plans need a
// cuDNN handle, and cudnnCreate needs a device. Plans are built once at
// load and own their variant pack (the arena's device addresses are fixed);
// each plan's workspace is sized at load time by cuDNN (reported by
// workspaceBytes()) and bound to the arena buffer kilnc reserved for it
// (CudnnAttention.workspace, runtime/schema/CudnnWorkspace.h) when it fits,
// else to one allocation next to the arena, outside the memory plan. Only
// runtime/cuda/*.cpp include this header.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CUDA_CUDNN_H
#define KILN_RUNTIME_CUDA_CUDNN_H

#include "runtime/Status.h"
#include "runtime/cuda/DynamicLibrary.h"
#include "runtime/schema/artifact_generated.h"

#include <cuda.h>
#include <cudnn_graph.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::rt::cuda {

class Cudnn {
public:
  // Opens libcudnn.so.9 and resolves the functions below; needs no GPU.
  static StatusOr<std::unique_ptr<Cudnn>> load();
  // cudnnCreate on the current context's device, with the stream to run on.
  Status createHandle(CUstream stream);
  ~Cudnn();

  // OK for CUDNN_STATUS_SUCCESS, else "<context>: <call>: <name> (<last
  // error message>)".
  Status check(cudnnStatus_t status, const char *call,
               const std::string &context = "") const;

  cudnnHandle_t handle() const { return handle_; }
  // "9.19.0" (of the library loaded, not of the headers).
  std::string version() const;
  const std::string &path() const { return library_->path(); }

#define KILN_CUDNN_FUNCTIONS(X)                                                \
  X(cudnnGetVersion)                                                           \
  X(cudnnGetErrorString)                                                       \
  X(cudnnGetLastErrorString)                                                   \
  X(cudnnCreate)                                                               \
  X(cudnnDestroy)                                                              \
  X(cudnnSetStream)                                                            \
  X(cudnnBackendCreateDescriptor)                                              \
  X(cudnnBackendDestroyDescriptor)                                             \
  X(cudnnBackendSetAttribute)                                                  \
  X(cudnnBackendGetAttribute)                                                  \
  X(cudnnBackendFinalize)                                                      \
  X(cudnnBackendExecute)
#define KILN_DECLARE_CUDNN_FN(name) decltype(&::name) name = nullptr;
  KILN_CUDNN_FUNCTIONS(KILN_DECLARE_CUDNN_FN)
#undef KILN_DECLARE_CUDNN_FN

private:
  Cudnn() = default;
  std::unique_ptr<DynamicLibrary> library_;
  cudnnHandle_t handle_ = nullptr;
};

// One backend descriptor, destroyed with its owner.
class CudnnDescriptor {
public:
  CudnnDescriptor() = default;
  CudnnDescriptor(CudnnDescriptor &&other) noexcept { *this = std::move(other); }
  CudnnDescriptor &operator=(CudnnDescriptor &&other) noexcept;
  ~CudnnDescriptor();

  static StatusOr<CudnnDescriptor> create(const Cudnn &cudnn,
                                          cudnnBackendDescriptorType_t type,
                                          std::string what);
  // cudnnBackendSetAttribute of `count` values of `type` at `values`.
  Status set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
             int64_t count, const void *values);
  Status set(cudnnBackendAttributeName_t name, const CudnnDescriptor &value);
  Status set(cudnnBackendAttributeName_t name,
             const std::vector<const CudnnDescriptor *> &values);
  Status finalize();

  cudnnBackendDescriptor_t get() const { return desc_; }
  const std::string &what() const { return what_; }

private:
  const Cudnn *cudnn_ = nullptr;
  cudnnBackendDescriptor_t desc_ = nullptr;
  std::string what_; // "tensor Q", "pointwise mul (scale)" for messages
};

// The unique ids of the SDPA graph's non-virtual tensors (variant pack keys).
enum SdpaTensorId : int64_t {
  kSdpaQ = 1,
  kSdpaK,
  kSdpaV,
  kSdpaO,
  kSdpaStats,
  kSdpaScale,    // by value
  kSdpaNegInf,   // by value: what masked scores become (sdpaMaskedScore)
  kSdpaSeqLenQ,  // [B, 1, 1, 1] i32, every entry q_len
  kSdpaSeqLenKv, // [B, 1, 1, 1] i32, Kiln's kv_lengths buffer
  kSdpaCausalOffset, // by value i32: S - T (causal with S != T)
  kSdpaDout,         // backward: dO [B, H, T, Dv] bf16
  kSdpaDq,           // backward: dQ [B, H, T, D] bf16
  kSdpaDk,           // backward: dK [B, KVH, S, D] bf16
  kSdpaDv,           // backward: dV [B, KVH, S, Dv] bf16
  kSdpaOne,          // backward: by value 1.0f (the frontend's dropout-free scale)
  kSdpaSoftmaxSum,   // backward: rowsum(dO * O) [B, H, T, 1] f32, plan scratch
  kSdpaDqAccum,      // backward: dQ in f32 [B, H, T, D], plan scratch
  kSdpaFirstVirtual = 100,
};

// The finalized tensor and operation descriptors of one SDPA forward or
// backward (no handle needed), in graph order.
struct SdpaOperations {
  std::vector<CudnnDescriptor> tensors;    // owned; referenced by operations
  std::vector<CudnnDescriptor> operations; // the graph's nodes
  std::vector<std::string> nodeNames;      // "matmul Q K^T", ... (for tests)
};
StatusOr<SdpaOperations> buildSdpaForward(const Cudnn &cudnn,
                                          const schema::CudnnAttention &a,
                                          const std::string &where);
StatusOr<SdpaOperations> buildSdpaBackward(const Cudnn &cudnn,
                                           const schema::CudnnAttention &a,
                                           const std::string &where);

// Bytes of the backward's own scratch tensors (softmax_sum and the f32 dQ
// accumulator, each 256-byte aligned) that live in the plan's workspace after
// cuDNN's part; 0 for a forward.
int64_t sdpaBackwardScratchBytes(const schema::CudnnAttention &a);

// OK when cuDNN `version` (cudnnGetVersion(): 91900 for 9.19.0) can run the
// graph of `a`, else why not: the version gates cudnn-frontend's SDPA
// support surface applies (known-bad releases, bottom-right causal, the
// backward's dQ accumulator and S % 128 workaround, T = S = 1).
Status sdpaSupported(size_t version, const schema::CudnnAttention &a,
                     const std::string &where);

// What masked scores become in both graphs: -inf, except before cuDNN 9.10
// where the frontend uses the lowest finite float (those engines' online
// softmax meets -inf - -inf = NaN on a tile with every score masked).
float sdpaMaskedScore(size_t version);

// One cudnn_attention made ready to run: graph, plan, variant pack.
class CudnnAttentionPlan {
public:
  // Device addresses of the call's buffers (fixed for the arena's life).
  struct Buffers {
    CUdeviceptr q = 0, k = 0, v = 0, out = 0, lse = 0;
    CUdeviceptr seqLenQ = 0;  // [B] i32 filled with q_len (padding only)
    CUdeviceptr seqLenKv = 0; // the kv_lengths buffer (padding only)
    CUdeviceptr dout = 0, dq = 0, dk = 0, dv = 0; // backward only
  };
  // Needs cudnn.handle(). Fails (with cuDNN's reason) when cuDNN has no
  // engine for the graph.
  static StatusOr<std::unique_ptr<CudnnAttentionPlan>>
  create(const Cudnn &cudnn, const schema::CudnnAttention &a,
         const Buffers &buffers, std::string where);

  // Bytes of device scratch the plan needs (its engine's choice, plus the
  // backward's softmax_sum and dQ accumulator).
  int64_t workspaceBytes() const { return workspaceBytes_; }
  // Binds the workspace (at least workspaceBytes(); 0 when none needed).
  Status bindWorkspace(CUdeviceptr workspace);
  // Runs on the stream the handle was created with.
  Status run() const;
  const std::string &engine() const { return engine_; }

private:
  explicit CudnnAttentionPlan(const Cudnn &cudnn) : cudnn_(cudnn) {}
  const Cudnn &cudnn_;
  std::string where_;
  SdpaOperations ops_;
  CudnnDescriptor graph_, heuristics_, plan_, variantPack_;
  std::vector<CudnnDescriptor> engineConfigs_;
  std::vector<int64_t> uids_;
  std::vector<void *> pointers_;
  float scale_ = 1, negInf_ = 0, one_ = 1;
  int32_t causalOffset_ = 0;
  int64_t workspaceBytes_ = 0;
  int64_t engineWorkspaceBytes_ = 0; // cuDNN's part, first in the workspace
  bool backward_ = false;
  int64_t rows_ = 0; // B * H * T (the backward's scratch layout)
  std::string engine_;
};

} // namespace kiln::rt::cuda

#endif // KILN_RUNTIME_CUDA_CUDNN_H
