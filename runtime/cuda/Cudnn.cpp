//===- Cudnn.cpp - cuDNN 9 loaded at run time; attention plans ------------===//
//
// CudnnAttentionPlan::create, after buildSdpaForward (CudnnSdpaGraph.cpp) or
// buildSdpaBackward (CudnnSdpaBackward.cpp):
//  1. the operation graph over the operations, on the handle;
//  2. engine heuristics (mode A), every config it returns, in its order;
//  3. the first config that finalizes into an execution plan wins (a
//     config may be refused for this device or these sizes);
//  4. its workspace size (plus, for the backward, softmax_sum and the f32 dQ
//     accumulator after cuDNN's part), and the variant pack (uids -> device
//     addresses, host addresses for the by-value scalars) built once.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/Cudnn.h"
#include "runtime/schema/CudnnWorkspace.h"

#include <limits>

namespace kiln::rt::cuda {

#define KILN_STRINGIZE_EXPANDED(x) KILN_STRINGIZE(x)
#define KILN_STRINGIZE(x) #x

StatusOr<std::unique_ptr<Cudnn>> Cudnn::load() {
  std::unique_ptr<Cudnn> cudnn(new Cudnn());
  KILN_ASSIGN_OR_RETURN(cudnn->library_,
                        DynamicLibrary::open("cuDNN", {"libcudnn.so.9", "libcudnn.so"}));
#define KILN_RESOLVE_CUDNN_FN(name)                                            \
  KILN_RETURN_IF_ERROR(                                                        \
      cudnn->library_->resolve(KILN_STRINGIZE_EXPANDED(name), cudnn->name));
  KILN_CUDNN_FUNCTIONS(KILN_RESOLVE_CUDNN_FN)
#undef KILN_RESOLVE_CUDNN_FN
  // The graph API with the SDPA patterns Kiln builds is cuDNN 9's.
  size_t version = cudnn->cudnnGetVersion();
  if (version < 90000)
    return failedPrecondition("cuDNN ", cudnn->library_->path(), " is version ",
                              version, "; Kiln's fused attention needs cuDNN 9");
  return cudnn;
}

Status Cudnn::createHandle(CUstream stream) {
  KILN_RETURN_IF_ERROR(check(cudnnCreate(&handle_), "cudnnCreate",
                             "cuDNN " + version() + " (" + path() + ")"));
  return check(cudnnSetStream(handle_, reinterpret_cast<cudaStream_t>(stream)),
               "cudnnSetStream");
}

Cudnn::~Cudnn() {
  if (handle_)
    cudnnDestroy(handle_);
}

std::string Cudnn::version() const {
  size_t v = cudnnGetVersion();
  return detail::concat(v / 10000, ".", (v / 100) % 100, ".", v % 100);
}

Status Cudnn::check(cudnnStatus_t status, const char *call,
                    const std::string &context) const {
  if (status == CUDNN_STATUS_SUCCESS)
    return okStatus();
  char last[512] = {};
  if (cudnnGetLastErrorString)
    cudnnGetLastErrorString(last, sizeof(last) - 1);
  const char *name = cudnnGetErrorString ? cudnnGetErrorString(status) : "";
  return unavailable(context, context.empty() ? "" : ": ", call, ": ", name,
                     last[0] ? std::string(" (") + last + ")" : std::string());
}

CudnnDescriptor &CudnnDescriptor::operator=(CudnnDescriptor &&other) noexcept {
  std::swap(cudnn_, other.cudnn_);
  std::swap(desc_, other.desc_);
  std::swap(what_, other.what_);
  return *this;
}

CudnnDescriptor::~CudnnDescriptor() {
  if (desc_)
    cudnn_->cudnnBackendDestroyDescriptor(desc_);
}

StatusOr<CudnnDescriptor> CudnnDescriptor::create(const Cudnn &cudnn,
                                                  cudnnBackendDescriptorType_t type,
                                                  std::string what) {
  CudnnDescriptor d;
  d.cudnn_ = &cudnn;
  d.what_ = std::move(what);
  KILN_RETURN_IF_ERROR(cudnn.check(cudnn.cudnnBackendCreateDescriptor(type, &d.desc_),
                                   "cudnnBackendCreateDescriptor", d.what_));
  return d;
}

Status CudnnDescriptor::set(cudnnBackendAttributeName_t name,
                            cudnnBackendAttributeType_t type, int64_t count,
                            const void *values) {
  return cudnn_->check(cudnn_->cudnnBackendSetAttribute(desc_, name, type, count, values),
                       "cudnnBackendSetAttribute",
                       detail::concat(what_, ", attribute ", static_cast<int>(name)));
}

Status CudnnDescriptor::set(cudnnBackendAttributeName_t name,
                            const CudnnDescriptor &value) {
  cudnnBackendDescriptor_t d = value.get();
  return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &d);
}

Status CudnnDescriptor::set(cudnnBackendAttributeName_t name,
                            const std::vector<const CudnnDescriptor *> &values) {
  std::vector<cudnnBackendDescriptor_t> raw;
  for (const CudnnDescriptor *value : values)
    raw.push_back(value->get());
  return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(raw.size()),
             raw.data());
}

Status CudnnDescriptor::finalize() {
  return cudnn_->check(cudnn_->cudnnBackendFinalize(desc_), "cudnnBackendFinalize",
                       what_);
}

Status sdpaSupported(size_t version, const schema::CudnnAttention &a,
                     const std::string &where) {
  auto refuse = [&](const std::string &why) {
    return failedPrecondition(where, ": cuDNN ", version / 10000, ".", version / 100 % 100, ".",
                              version % 100, " ", why);
  };
  // The frontend refuses both directions on these two releases (known bugs).
  if (version >= 91000 && version < 91002)
    return refuse("(9.10.0 and 9.10.1 have known SDPA bugs; use 9.10.2 or newer)");
  // Kiln's causal with S != T is cuDNN's bottom-right causal mask.
  if (a.causal() && a.kv_len() != a.q_len()) {
    if (version < 90300)
      return refuse("(bottom-right causal attention, q_len != kv_len, needs cuDNN 9.3)");
    if (version < 90600 && (a.q_len() % 64 != 0 || a.kv_len() % 64 != 0))
      return refuse("(bottom-right causal attention needs q_len and kv_len multiples of 64 "
                    "before cuDNN 9.6)");
  }
  if (!a.backward())
    return okStatus();
  // Before 9.6 the f32 dQ accumulator had to be zeroed before every run
  // (the frontend did it); Kiln does not, so it refuses those libraries.
  if (version < 90600)
    return refuse("(the attention backward needs cuDNN 9.6 or newer)");
  // Up to 9.15 the frontend adds a padding mask of full lengths to an
  // unpadded backward with S % 128 != 0 (an engine workaround); Kiln builds
  // no such mask, so it refuses that case there.
  if (version < 91600 && a.kv_lengths() < 0 && a.kv_len() % 128 != 0)
    return refuse(detail::concat("backward with kv_len ", a.kv_len(),
                                 " (not a multiple of 128 needs cuDNN 9.16 or newer)"));
  if (a.q_len() == 1 && a.kv_len() == 1)
    return refuse("backward with q_len = kv_len = 1 (outside cuDNN's support surface)");
  return okStatus();
}

float sdpaMaskedScore(size_t version) {
  return version < 91000 ? std::numeric_limits<float>::lowest()
                         : -std::numeric_limits<float>::infinity();
}

StatusOr<std::unique_ptr<CudnnAttentionPlan>>
CudnnAttentionPlan::create(const Cudnn &cudnn, const schema::CudnnAttention &a,
                           const Buffers &buffers, std::string where) {
  if (!cudnn.handle())
    return failedPrecondition(where, ": no cuDNN handle");
  KILN_RETURN_IF_ERROR(sdpaSupported(cudnn.cudnnGetVersion(), a, where));
  std::unique_ptr<CudnnAttentionPlan> p(new CudnnAttentionPlan(cudnn));
  p->where_ = std::move(where);
  if (a.backward()) {
    KILN_ASSIGN_OR_RETURN(p->ops_, buildSdpaBackward(cudnn, a, p->where_));
  } else {
    KILN_ASSIGN_OR_RETURN(p->ops_, buildSdpaForward(cudnn, a, p->where_));
  }

  // 1. The operation graph.
  KILN_ASSIGN_OR_RETURN(p->graph_, CudnnDescriptor::create(
                                       cudnn, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR,
                                       p->where_ + ": operation graph"));
  std::vector<const CudnnDescriptor *> nodes;
  for (const CudnnDescriptor &op : p->ops_.operations)
    nodes.push_back(&op);
  cudnnHandle_t handle = cudnn.handle();
  KILN_RETURN_IF_ERROR(p->graph_.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, nodes));
  KILN_RETURN_IF_ERROR(
      p->graph_.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle));
  KILN_RETURN_IF_ERROR(p->graph_.finalize());

  // 2. Heuristics.
  KILN_ASSIGN_OR_RETURN(p->heuristics_, CudnnDescriptor::create(
                                            cudnn, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR,
                                            p->where_ + ": engine heuristics"));
  cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  KILN_RETURN_IF_ERROR(p->heuristics_.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, p->graph_));
  KILN_RETURN_IF_ERROR(
      p->heuristics_.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode));
  KILN_RETURN_IF_ERROR(p->heuristics_.finalize());
  constexpr int64_t kMaxConfigs = 8;
  for (int64_t i = 0; i < kMaxConfigs; ++i) {
    KILN_ASSIGN_OR_RETURN(CudnnDescriptor config,
                          CudnnDescriptor::create(cudnn, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR,
                                                  p->where_ + ": engine config"));
    p->engineConfigs_.push_back(std::move(config));
  }
  std::vector<cudnnBackendDescriptor_t> raw;
  for (const CudnnDescriptor &config : p->engineConfigs_)
    raw.push_back(config.get());
  int64_t found = 0;
  KILN_RETURN_IF_ERROR(cudnn.check(
      cudnn.cudnnBackendGetAttribute(p->heuristics_.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, kMaxConfigs, &found,
                                     raw.data()),
      "cudnnBackendGetAttribute(ENGINEHEUR_RESULTS)", p->where_));
  if (found == 0)
    return unavailable(p->where_, ": cuDNN ", cudnn.version(),
                       " has no engine for this attention graph");

  // 3. The first config that makes a plan.
  Status lastRefusal = okStatus();
  for (int64_t i = 0; i < found && !p->plan_.get(); ++i) {
    KILN_ASSIGN_OR_RETURN(CudnnDescriptor plan,
                          CudnnDescriptor::create(cudnn,
                                                  CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR,
                                                  detail::concat(p->where_,
                                                                 ": execution plan ", i)));
    KILN_RETURN_IF_ERROR(plan.set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                  p->engineConfigs_[i]));
    KILN_RETURN_IF_ERROR(
        plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle));
    lastRefusal = plan.finalize();
    if (lastRefusal.ok()) {
      p->plan_ = std::move(plan);
      p->engine_ = detail::concat("heuristic config ", i, " of ", found);
    }
  }
  if (!p->plan_.get())
    return lastRefusal;

  // 4. Workspace and variant pack.
  int64_t count = 0;
  KILN_RETURN_IF_ERROR(cudnn.check(
      cudnn.cudnnBackendGetAttribute(p->plan_.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                     CUDNN_TYPE_INT64, 1, &count, &p->engineWorkspaceBytes_),
      "cudnnBackendGetAttribute(EXECUTION_PLAN_WORKSPACE_SIZE)", p->where_));
  // The backward's scratch tensors follow cuDNN's part, 256-byte aligned.
  p->engineWorkspaceBytes_ = schema::cudnnAligned(p->engineWorkspaceBytes_);
  p->workspaceBytes_ = p->engineWorkspaceBytes_ + sdpaBackwardScratchBytes(a);
  p->backward_ = a.backward();
  p->rows_ = a.batch() * a.heads() * a.q_len();
  p->scale_ = a.scale();
  p->negInf_ = sdpaMaskedScore(cudnn.cudnnGetVersion());
  p->causalOffset_ = static_cast<int32_t>(a.kv_len() - a.q_len());
  auto add = [&](int64_t uid, void *pointer) {
    p->uids_.push_back(uid);
    p->pointers_.push_back(pointer);
  };
  auto device = [](CUdeviceptr d) { return reinterpret_cast<void *>(d); };
  add(kSdpaQ, device(buffers.q));
  add(kSdpaK, device(buffers.k));
  add(kSdpaV, device(buffers.v));
  add(kSdpaO, device(buffers.out));
  add(kSdpaStats, device(buffers.lse));
  add(kSdpaScale, &p->scale_);
  if (a.causal() || a.kv_lengths() >= 0)
    add(kSdpaNegInf, &p->negInf_);
  if (a.causal() && a.kv_len() != a.q_len())
    add(kSdpaCausalOffset, &p->causalOffset_);
  if (a.backward()) {
    add(kSdpaDout, device(buffers.dout));
    add(kSdpaDq, device(buffers.dq));
    add(kSdpaDk, device(buffers.dk));
    add(kSdpaDv, device(buffers.dv));
    add(kSdpaOne, &p->one_);
  }
  if (a.kv_lengths() >= 0) {
    add(kSdpaSeqLenQ, device(buffers.seqLenQ));
    add(kSdpaSeqLenKv, device(buffers.seqLenKv));
  }
  return p;
}

Status CudnnAttentionPlan::bindWorkspace(CUdeviceptr workspace) {
  KILN_ASSIGN_OR_RETURN(variantPack_,
                        CudnnDescriptor::create(cudnn_, CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR,
                                                where_ + ": variant pack"));
  void *scratch = reinterpret_cast<void *>(workspace);
  std::vector<int64_t> uids = uids_;
  std::vector<void *> pointers = pointers_;
  if (backward_) {
    // softmax_sum [B, H, T, 1] f32, then dQ_accum (sdpaBackwardScratchBytes).
    CUdeviceptr softmaxSum = workspace + static_cast<CUdeviceptr>(engineWorkspaceBytes_);
    CUdeviceptr dqAccum = softmaxSum + static_cast<CUdeviceptr>(schema::cudnnAligned(rows_ * 4));
    uids.push_back(kSdpaSoftmaxSum);
    pointers.push_back(reinterpret_cast<void *>(softmaxSum));
    uids.push_back(kSdpaDqAccum);
    pointers.push_back(reinterpret_cast<void *>(dqAccum));
  }
  KILN_RETURN_IF_ERROR(variantPack_.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64,
                                        static_cast<int64_t>(uids.size()), uids.data()));
  KILN_RETURN_IF_ERROR(variantPack_.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
                                        CUDNN_TYPE_VOID_PTR,
                                        static_cast<int64_t>(pointers.size()),
                                        pointers.data()));
  KILN_RETURN_IF_ERROR(
      variantPack_.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &scratch));
  return variantPack_.finalize();
}

Status CudnnAttentionPlan::run() const {
  if (!variantPack_.get())
    return failedPrecondition(where_, ": cuDNN plan run before bindWorkspace");
  return cudnn_.check(
      cudnn_.cudnnBackendExecute(cudnn_.handle(), plan_.get(), variantPack_.get()),
      "cudnnBackendExecute", where_);
}

} // namespace kiln::rt::cuda
