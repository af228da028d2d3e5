//===- CudaBackend.cpp - The Backend on one NVIDIA GPU --------------------===//

#include "runtime/cuda/CudaBackend.h"

#include "runtime/cuda/CublasLt.h"
#include "runtime/cuda/Cudnn.h"
#include "runtime/cuda/CudnnEmptyKeys.h"
#include "runtime/cuda/CudaDriver.h"
#include "runtime/cuda/DeviceLayout.h"
#include "runtime/cuda/JitCache.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace kiln::rt::cuda {
namespace {

// cuBLASLt's workspace, shared by every GEMM (they run one after another on
// one stream). 32 MiB is what cuBLAS itself reserves on Hopper.
constexpr size_t kGemmWorkspaceBytes = 32u << 20;

// The most arena bytes one copy may span to read every scalar at once; a
// plan that scatters them further copies each.
constexpr int64_t kScalarSpanBytes = 1 << 20;

// A buffer's host view; allocated on first use (a 1B-parameter model's
// mirrors are only needed for what is checkpointed or inspected).
struct HostMirror {
  std::vector<uint8_t> bytes;
};

// One fix-up launch after a cuDNN attention call with key lengths
// (CudnnEmptyKeys.h): Kiln's result for the samples without keys.
struct EmptyKeysLaunch {
  CUfunction function = nullptr;
  CUdeviceptr lengths = 0, x = 0;
  long long perSample = 0, inner = 0, rows = 0, total = 0;
  float value = 0; // f32 fills only
  bool f32 = false;
  unsigned grid = 1;
};

// One schedule entry, resolved at setup.
struct DeviceCall {
  CUfunction function = nullptr;       // KernelCall
  CUdeviceptr argumentTable = 0;       // device array of buffer pointers
  unsigned grid = 1, block = 1, sharedBytes = 0;
  std::unique_ptr<GemmPlan> gemm;      // GemmCall
  CUdeviceptr a = 0, b = 0, c = 0;
  std::string where;                   // "step entry 3 ('k_gelu' at m.kiln:4:5)"
  // KernelCall with a cudnn_attention (Cudnn.h) whose plan cuDNN accepted:
  // `useCudnn` runs it instead of the kernel; `undecided` (--attention=auto)
  // until the first run of the program times both.
  std::unique_ptr<CudnnAttentionPlan> cudnn;
  std::vector<EmptyKeysLaunch> emptyKeys; // after cuDNN, with key lengths
  CUfunction clampLengths = nullptr;      // before cuDNN, with key lengths:
  CUdeviceptr lengths = 0, clamped = 0;   //   clamped = min(max(lengths, 0), S)
  long long batch = 0;
  int kvLen = 0;
  bool useCudnn = false;
  bool undecided = false;
};

struct DeviceProgram {
  bool present = false;
  const char *name = "";
  std::vector<DeviceCall> calls;
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  bool undecided = false; // a call is undecided: capture after the first run
};

const char *programName(int kind) {
  switch (static_cast<ProgramKind>(kind)) {
  case ProgramKind::kStep:
    return "step";
  case ProgramKind::kUpdate:
    return "update";
  case ProgramKind::kEval:
    return "eval";
  }
  return "?";
}

// The device's architecture for NVRTC: "sm_<major><minor>", with the
// artifact's arch-specific variant ("sm_90a") when it lists one for exactly
// this device (the generated kernels were checked for it).
std::string deviceArch(int major, int minor, const schema::Artifact &artifact) {
  std::string plain = "sm_" + std::to_string(major) + std::to_string(minor);
  if (artifact.archs())
    for (const flatbuffers::String *arch : *artifact.archs())
      if (arch->str() == plain + "a")
        return arch->str();
  return plain;
}

} // namespace

struct CudaBackend::Impl {
  const Artifact &artifact;
  BackendOptions options;
  std::unique_ptr<CudaDriver> driver;
  std::unique_ptr<CublasLt> cublas; // only when the artifact has GEMMs
  std::unique_ptr<Cudnn> cudnn;      // only when an attention call may use it
  CUdeviceptr cudnnWorkspace = 0;    // shared by every cuDNN plan (one stream)
  std::vector<CUdeviceptr> seqLenBuffers; // [B] i32 q_len per padding plan
  CUdevice device = 0;
  CUcontext context = nullptr;
  CUstream stream = nullptr;
  CUmodule module = nullptr;
  CUmodule emptyKeysModule = nullptr; // CudnnEmptyKeys.h, compiled on demand
  std::string arch;                   // NVRTC's target for this device
  CUdeviceptr arena = 0;      // every buffer
  CUdeviceptr tables = 0;     // every KernelCall's pointer array
  CUdeviceptr workspace = 0;  // cuBLASLt
  DeviceLayout layout;
  std::string deviceName;
  KernelLoad load;
  DeviceProgram programs[kNumProgramKinds];
  mutable std::vector<HostMirror> mirrors;
  std::vector<uint32_t> scalars; // buffers refreshed after every run
  bool eager = false;
  int64_t allocatedBytes = 0; // every cuMemAlloc of this backend (none is freed before teardown)
  // The arena bytes [first, second) that hold every scalar buffer, and the
  // host copy readScalars() reads them into.
  std::pair<int64_t, int64_t> scalarSpan{0, 0};
  std::vector<uint8_t> scalarStaging;

  explicit Impl(const Artifact &a) : artifact(a) {}
  ~Impl();

  CUdeviceptr devicePointer(uint32_t buffer) const {
    return arena + static_cast<CUdeviceptr>(layout.offsets[buffer]);
  }
  size_t bytes(uint32_t buffer) const {
    return static_cast<size_t>(artifact.bufferInfo(buffer).bytes);
  }
  HostMirror &mirror(uint32_t buffer) const {
    HostMirror &m = mirrors[buffer];
    if (m.bytes.size() != bytes(buffer))
      m.bytes.assign(bytes(buffer), 0);
    return m;
  }

  Status openDevice();
  // cuMemAlloc of `bytes` for `what`, counted in allocatedBytes.
  Status allocateDevice(CUdeviceptr &pointer, size_t bytes, const std::string &what);
  Status allocate(size_t tableBytes, bool needsWorkspace);
  Status loadKernels();
  Status resolvePrograms();
  Status launch(const DeviceCall &call) const;
  Status launchKernel(const DeviceCall &call) const;
  // The cuDNN plan of `call`, then its empty-sample fix-ups.
  Status runCudnn(const DeviceCall &call) const;
  // The fix-up launches for a planned call with key lengths.
  Status planEmptyKeys(DeviceCall &call, const schema::CudnnAttention &a);
  // cuDNN plans for the calls with a cudnn_attention (--attention).
  Status planCudnnAttention();
  // Times the kernel and cuDNN for each undecided call of `program` on the
  // real buffers, keeps the faster, runs the program once.
  Status decideAttention(DeviceProgram &program);
  Status capture(DeviceProgram &program);
  Status runEagerly(const DeviceProgram &program);
  // After a program: every scalar buffer into its host mirror, with one
  // synchronization and (when they are near each other) one copy.
  Status readScalars();
};

CudaBackend::Impl::~Impl() {
  if (!driver)
    return;
  // Teardown errors cannot be reported anywhere useful; the process is
  // ending or the next run reports the device's state.
  for (DeviceProgram &program : programs) {
    if (program.exec)
      driver->cuGraphExecDestroy(program.exec);
    if (program.graph)
      driver->cuGraphDestroy(program.graph);
    program.calls.clear(); // GEMM / cuDNN plans before their handles
  }
  cublas.reset();
  cudnn.reset();
  for (CUdeviceptr p : seqLenBuffers)
    driver->cuMemFree(p);
  if (cudnnWorkspace)
    driver->cuMemFree(cudnnWorkspace);
  if (module)
    driver->cuModuleUnload(module);
  if (emptyKeysModule)
    driver->cuModuleUnload(emptyKeysModule);
  for (CUdeviceptr p : {arena, tables, workspace})
    if (p)
      driver->cuMemFree(p);
  if (stream)
    driver->cuStreamDestroy(stream);
  if (context)
    driver->cuDevicePrimaryCtxRelease(device);
}

Status CudaBackend::Impl::openDevice() {
  const CudaDriver &d = *driver;
  KILN_RETURN_IF_ERROR(d.check(d.cuDeviceGet(&device, 0), "cuDeviceGet"));
  char name[256] = {};
  KILN_RETURN_IF_ERROR(
      d.check(d.cuDeviceGetName(name, sizeof(name) - 1, device), "cuDeviceGetName"));
  deviceName = name;
  KILN_RETURN_IF_ERROR(d.check(d.cuDevicePrimaryCtxRetain(&context, device),
                               "cuDevicePrimaryCtxRetain"));
  KILN_RETURN_IF_ERROR(d.check(d.cuCtxSetCurrent(context), "cuCtxSetCurrent"));
  KILN_RETURN_IF_ERROR(
      d.check(d.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate"));
  return okStatus();
}

Status CudaBackend::Impl::allocateDevice(CUdeviceptr &pointer, size_t bytes,
                                         const std::string &what) {
  KILN_RETURN_IF_ERROR(driver->check(driver->cuMemAlloc(&pointer, bytes), "cuMemAlloc",
                                     detail::concat(" (", what, ", ", bytes, " bytes)")));
  allocatedBytes += static_cast<int64_t>(bytes);
  return okStatus();
}

Status CudaBackend::Impl::allocate(size_t tableBytes, bool needsWorkspace) {
  const CudaDriver &d = *driver;
  layout = deviceLayout(artifact);
  size_t freeBytes = 0, totalBytes = 0;
  KILN_RETURN_IF_ERROR(d.check(d.cuMemGetInfo(&freeBytes, &totalBytes), "cuMemGetInfo"));
  int64_t extra = static_cast<int64_t>(tableBytes) +
                  (needsWorkspace ? static_cast<int64_t>(kGemmWorkspaceBytes) : 0);
  KILN_RETURN_IF_ERROR(checkDeviceFits(layout, extra,
                                       static_cast<int64_t>(freeBytes), deviceName));
  size_t arenaBytes = static_cast<size_t>(std::max<int64_t>(layout.arenaBytes, 1));
  KILN_RETURN_IF_ERROR(allocateDevice(arena, arenaBytes, "arena"));
  // Zero-filled like the CPU arena: optimizer state starts at zero.
  KILN_RETURN_IF_ERROR(d.check(d.cuMemsetD8Async(arena, 0, arenaBytes, stream),
                               "cuMemsetD8Async(arena)"));
  // The stream is non-blocking: the synchronous copies below (legacy default
  // stream) would not wait for the memset and could be zeroed after it.
  KILN_RETURN_IF_ERROR(d.check(d.cuStreamSynchronize(stream),
                               "cuStreamSynchronize(arena zeroing)"));
  if (tableBytes > 0)
    KILN_RETURN_IF_ERROR(allocateDevice(tables, tableBytes, "launch tables"));
  if (needsWorkspace)
    KILN_RETURN_IF_ERROR(allocateDevice(workspace, kGemmWorkspaceBytes, "cuBLASLt workspace"));
  for (uint32_t i = 0; i < artifact.numBuffers(); ++i) {
    const schema::Buffer &buffer = artifact.buffer(i);
    if (buffer.role() == schema::BufferRole_Constant && buffer.constant_data())
      KILN_RETURN_IF_ERROR(d.check(
          d.cuMemcpyHtoD(devicePointer(i), buffer.constant_data()->data(),
                         buffer.constant_data()->size()),
          "cuMemcpyHtoD(constant)", " for " + artifact.describeBuffer(i)));
  }
  return okStatus();
}

Status CudaBackend::Impl::loadKernels() {
  const CudaDriver &d = *driver;
  int major = 0, minor = 0;
  KILN_RETURN_IF_ERROR(d.check(
      d.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device),
      "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR)"));
  KILN_RETURN_IF_ERROR(d.check(
      d.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device),
      "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MINOR)"));
  arch = deviceArch(major, minor, artifact.root());
  auto start = std::chrono::steady_clock::now();
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Nvrtc> nvrtc, Nvrtc::load());
  JitCache cache(*nvrtc, JitCache::cudaCacheDir());
  KILN_ASSIGN_OR_RETURN(JitModule jit, cache.compileArtifact(artifact, arch));
  KILN_RETURN_IF_ERROR(d.check(d.cuModuleLoadData(&module, jit.cubin.data()),
                               "cuModuleLoadData", " (" + jit.cachePath + ")"));
  load.kernels = artifact.root().kernels() ? artifact.root().kernels()->size() : 0;
  load.cacheHit = jit.cacheHit;
  load.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                     .count();
  load.path = jit.cachePath;
  load.detail = arch + " on " + deviceName + ", NVRTC " + nvrtc->version() +
                (jit.cacheHit ? "" : detail::concat(", compile ", jit.seconds, " s"));
  return okStatus();
}

Status CudaBackend::Impl::resolvePrograms() {
  const CudaDriver &d = *driver;
  const schema::Artifact &root = artifact.root();
  // The launch tables of all KernelCalls, built on the host, uploaded once.
  std::vector<CUdeviceptr> table;
  std::vector<CUfunction> functions(root.kernels() ? root.kernels()->size() : 0);
  // The most shared memory (static + dynamic) one block may opt into here:
  // 99 KiB on sm_86/89/120, 163 KiB on sm_80, 227 KiB on sm_90. The
  // attention kernels' tiles are planned for the artifact's smallest arch
  // (codegen/CudaAttentionKernels.h), so an artifact not compiled for this
  // device's class may ask for more: said here, before any launch fails.
  int maxShared = 0;
  KILN_RETURN_IF_ERROR(d.check(
      d.cuDeviceGetAttribute(&maxShared,
                             CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                             device),
      "cuDeviceGetAttribute(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)"));
  for (size_t k = 0; k < functions.size(); ++k) {
    const schema::Kernel &kernel = *root.kernels()->Get(k);
    KILN_RETURN_IF_ERROR(d.check(
        d.cuModuleGetFunction(&functions[k], module, kernel.entry()->c_str()),
        "cuModuleGetFunction",
        detail::concat(" for '", kernel.entry()->str(), "' at ",
                       kernel.location() ? kernel.location()->str() : "?")));
    int staticShared = 0;
    KILN_RETURN_IF_ERROR(d.check(
        d.cuFuncGetAttribute(&staticShared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
                             functions[k]),
        "cuFuncGetAttribute(SHARED_SIZE_BYTES)",
        " for '" + kernel.entry()->str() + "'"));
    int64_t needed = int64_t(staticShared) + kernel.launch()->shared_bytes();
    if (needed > maxShared)
      return failedPrecondition(
          "kernel '", kernel.entry()->str(), "' (",
          kernel.location() ? kernel.location()->str() : "?", ") needs ",
          needed, " bytes of shared memory per block (", staticShared,
          " static + ", kernel.launch()->shared_bytes(), " dynamic) but ",
          deviceName, " allows ", maxShared,
          "; recompile with kilnc --cuda-arch listing this GPU's arch (",
          load.detail.substr(0, load.detail.find(' ')),
          ") so the tiles are planned for it");
    // Over 48 KiB of dynamic shared memory must be opted into per function.
    if (kernel.launch()->shared_bytes() > 48u * 1024u)
      KILN_RETURN_IF_ERROR(d.check(
          d.cuFuncSetAttribute(functions[k],
                               CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                               static_cast<int>(kernel.launch()->shared_bytes())),
          "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)",
          " for '" + kernel.entry()->str() + "'"));
  }
  std::vector<std::pair<DeviceCall *, size_t>> tableStarts;
  for (int kind = 0; kind < kNumProgramKinds; ++kind) {
    const schema::Program *program = artifact.program(static_cast<ProgramKind>(kind));
    DeviceProgram &dp = programs[kind];
    dp.name = programName(kind);
    if (!program)
      continue;
    dp.present = true;
    dp.calls.resize(program->schedule()->size());
    for (uint32_t i = 0; i < program->schedule()->size(); ++i) {
      const schema::Step &step = *program->schedule()->Get(i);
      DeviceCall &call = dp.calls[i];
      std::string location = step.location() ? step.location()->str() : "?";
      if (const schema::KernelCall *kc = step.op_as_KernelCall()) {
        const schema::Kernel &kernel = *root.kernels()->Get(kc->kernel());
        call.where = detail::concat(dp.name, " entry ", i, " (kernel '",
                                    kernel.entry()->str(), "' at ", location, ")");
        call.function = functions[kc->kernel()];
        call.grid = kernel.launch()->grid();
        call.block = kernel.launch()->block();
        call.sharedBytes = kernel.launch()->shared_bytes();
        tableStarts.push_back({&call, table.size()});
        if (kc->buffers())
          for (uint32_t b : *kc->buffers())
            table.push_back(devicePointer(b));
        continue;
      }
      const schema::GemmCall *g = step.op_as_GemmCall();
      call.where = detail::concat(dp.name, " entry ", i, " (GEMM at ", location, ")");
      call.a = devicePointer(g->a());
      call.b = devicePointer(g->b());
      call.c = devicePointer(g->c());
      // Element types from the buffers (bf16 operands, and a bf16 result
      // under precision = bf16; the verifier checked the combinations).
      ColumnMajorGemm layout = toColumnMajor(*g);
      for (ColumnMajorMatrix *m : {&layout.first, &layout.second, &layout.result})
        m->bf16 = artifact.buffer(m->buffer).dtype() == schema::DType_BF16;
      // The epilogue's bias / aux buffers (verified: present when used).
      ColumnMajorEpilogue epilogue =
          toColumnMajorEpilogue(*g, layout.result.bf16);
      CUdeviceptr bias = g->bias() >= 0 ? devicePointer(g->bias()) : 0;
      CUdeviceptr aux = g->aux() >= 0 ? devicePointer(g->aux()) : 0;
      KILN_ASSIGN_OR_RETURN(call.gemm,
                            GemmPlan::create(*cublas, layout, options.tf32,
                                             kGemmWorkspaceBytes, call.where,
                                             epilogue, bias, aux));
    }
  }
  if (!table.empty()) {
    KILN_RETURN_IF_ERROR(d.check(
        d.cuMemcpyHtoD(tables, table.data(), table.size() * sizeof(CUdeviceptr)),
        "cuMemcpyHtoD(launch tables)"));
  }
  for (auto [call, start] : tableStarts)
    call->argumentTable = tables + start * sizeof(CUdeviceptr);
  return okStatus();
}

Status CudaBackend::Impl::launch(const DeviceCall &call) const {
  if (call.useCudnn)
    return runCudnn(call);
  return launchKernel(call);
}

Status CudaBackend::Impl::runCudnn(const DeviceCall &call) const {
  if (call.clampLengths) {
    CUdeviceptr lengths = call.lengths, clamped = call.clamped;
    long long batch = call.batch;
    int kvLen = call.kvLen;
    void *params[] = {&lengths, &clamped, &batch, &kvLen};
    KILN_RETURN_IF_ERROR(driver->check(
        driver->cuLaunchKernel(call.clampLengths, emptyKeysGrid(batch), 1, 1, kEmptyKeysBlock, 1,
                               1, 0, stream, params, nullptr),
        "cuLaunchKernel", " for the key-length clamp of " + call.where));
  }
  KILN_RETURN_IF_ERROR(call.cudnn->run());
  for (const EmptyKeysLaunch &fill : call.emptyKeys) {
    // The bf16 kernel takes the first six parameters; the driver reads as
    // many as the entry declares.
    EmptyKeysLaunch args = fill;
    void *params[] = {&args.lengths, &args.x,     &args.perSample, &args.inner,
                      &args.rows,    &args.total, &args.value};
    KILN_RETURN_IF_ERROR(driver->check(
        driver->cuLaunchKernel(fill.function, fill.grid, 1, 1, kEmptyKeysBlock, 1, 1, 0,
                               stream, params, nullptr),
        "cuLaunchKernel", " for the empty-key fix-up of " + call.where));
  }
  return okStatus();
}

Status CudaBackend::Impl::planEmptyKeys(DeviceCall &call, const schema::CudnnAttention &a) {
  const CudaDriver &d = *driver;
  if (!emptyKeysModule) {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<Nvrtc> nvrtc, Nvrtc::load());
    JitCache cache(*nvrtc, JitCache::cudaCacheDir());
    KILN_ASSIGN_OR_RETURN(JitModule jit,
                          cache.compile(cudnnEmptyKeysSource(), "cudnn_empty_keys.cu", arch));
    KILN_RETURN_IF_ERROR(d.check(d.cuModuleLoadData(&emptyKeysModule, jit.cubin.data()),
                                 "cuModuleLoadData", " (cuDNN empty-key fix-up)"));
  }
  CUfunction bf16 = nullptr, f32 = nullptr;
  KILN_RETURN_IF_ERROR(d.check(
      d.cuModuleGetFunction(&call.clampLengths, emptyKeysModule, kClampLengthsEntry),
      "cuModuleGetFunction", " (cuDNN key-length clamp)"));
  call.lengths = devicePointer(static_cast<uint32_t>(a.kv_lengths()));
  call.batch = a.batch();
  call.kvLen = static_cast<int>(a.kv_len());
  KILN_RETURN_IF_ERROR(allocateDevice(
      call.clamped, static_cast<size_t>(a.batch()) * sizeof(int32_t), "clamped seq_len_kv"));
  seqLenBuffers.push_back(call.clamped);
  KILN_RETURN_IF_ERROR(d.check(d.cuModuleGetFunction(&bf16, emptyKeysModule, kEmptyKeysBf16Entry),
                               "cuModuleGetFunction", " (cuDNN empty-key fix-up)"));
  KILN_RETURN_IF_ERROR(d.check(d.cuModuleGetFunction(&f32, emptyKeysModule, kEmptyKeysF32Entry),
                               "cuModuleGetFunction", " (cuDNN empty-key fix-up)"));
  using Output = EmptyKeysFill::Output;
  for (const EmptyKeysFill &fill :
       emptyKeysFills(a.backward(), a.batch(), a.heads(), a.kv_heads(), a.q_len(), a.kv_len(),
                      a.head_dim(), a.value_dim())) {
    EmptyKeysLaunch launch;
    launch.function = fill.f32 ? f32 : bf16;
    launch.f32 = fill.f32;
    launch.lengths = devicePointer(static_cast<uint32_t>(a.kv_lengths()));
    uint32_t buffer = 0;
    switch (fill.output) {
    case Output::kOut: buffer = a.out(); break;
    case Output::kLse: buffer = a.lse(); break;
    case Output::kDq: buffer = static_cast<uint32_t>(a.dq()); break;
    case Output::kDk: buffer = static_cast<uint32_t>(a.dk()); break;
    case Output::kDv: buffer = static_cast<uint32_t>(a.dv()); break;
    }
    launch.x = devicePointer(buffer);
    launch.perSample = fill.perSample;
    launch.inner = fill.inner;
    launch.rows = fill.rows;
    launch.total = fill.total;
    launch.value = -std::numeric_limits<float>::infinity(); // lse of no key
    launch.grid = emptyKeysGrid(fill.total);
    call.emptyKeys.push_back(launch);
  }
  return okStatus();
}

Status CudaBackend::Impl::launchKernel(const DeviceCall &call) const {
  if (call.gemm)
    return call.gemm->run(call.a, call.b, call.c, workspace, kGemmWorkspaceBytes,
                          stream);
  // The entry's only parameter: void* const* buffers (the device table).
  CUdeviceptr table = call.argumentTable;
  void *params[] = {&table};
  return driver->check(driver->cuLaunchKernel(call.function, call.grid, 1, 1,
                                              call.block, 1, 1, call.sharedBytes,
                                              stream, params, nullptr),
                       "cuLaunchKernel", " for " + call.where);
}

namespace {

// One line on stderr, for choices made once (not per step).
void note(const std::string &text) {
  std::fprintf(stderr, "kiln-run: attention: %s\n", text.c_str());
}

} // namespace

Status CudaBackend::Impl::planCudnnAttention() {
  if (options.attention == AttentionDispatch::kKiln)
    return okStatus();
  const bool strict = options.attention == AttentionDispatch::kCudnn;
  std::vector<std::pair<DeviceCall *, const schema::CudnnAttention *>> candidates;
  for (int kind = 0; kind < kNumProgramKinds; ++kind)
    if (const schema::Program *program = artifact.program(static_cast<ProgramKind>(kind)))
      for (uint32_t i = 0; i < program->schedule()->size(); ++i)
        if (const schema::KernelCall *kc = program->schedule()->Get(i)->op_as_KernelCall())
          if (kc->cudnn_attention())
            candidates.push_back({&programs[kind].calls[i], kc->cudnn_attention()});
  if (candidates.empty()) {
    if (strict)
      return failedPrecondition(
          "--attention=cudnn: no attention op of this artifact is one cuDNN's fused "
          "attention computes exactly (bf16 q/k/v, no score mod, no mask or a causal "
          "or key-length mask, head dims multiples of 8 up to 128); kilnc "
          "--target=cuda --dump-phases-to=DIR gives each attention kernel's reason");
    return okStatus();
  }
  // The library and a handle; without them auto keeps the generated kernels.
  StatusOr<std::unique_ptr<Cudnn>> loaded = Cudnn::load();
  Status ready = loaded.status();
  if (ready.ok()) {
    cudnn = std::move(*loaded);
    ready = cudnn->createHandle(stream);
  }
  if (!ready.ok()) {
    cudnn.reset();
    if (strict)
      return ready.withPrefix("--attention=cudnn: ");
    note("generated kernels (cuDNN unavailable: " + ready.message() + ")");
    return okStatus();
  }
  const CudaDriver &d = *driver;
  int64_t workspaceBytes = 0;
  size_t planned = 0;
  for (auto [call, a] : candidates) {
    CudnnAttentionPlan::Buffers buffers;
    buffers.q = devicePointer(a->q());
    buffers.k = devicePointer(a->k());
    buffers.v = devicePointer(a->v());
    buffers.out = devicePointer(a->out());
    buffers.lse = devicePointer(a->lse());
    if (a->backward()) {
      buffers.dout = devicePointer(static_cast<uint32_t>(a->dout()));
      buffers.dq = devicePointer(static_cast<uint32_t>(a->dq()));
      buffers.dk = devicePointer(static_cast<uint32_t>(a->dk()));
      buffers.dv = devicePointer(static_cast<uint32_t>(a->dv()));
    }
    if (a->kv_lengths() >= 0) {
      // seq_len_q: every query row of every sample is computed (Kiln masks
      // keys only), so q_len for each sample.
      std::vector<int32_t> qLens(static_cast<size_t>(a->batch()),
                                 static_cast<int32_t>(a->q_len()));
      CUdeviceptr qLen = 0;
      size_t bytes = qLens.size() * sizeof(int32_t);
      KILN_RETURN_IF_ERROR(allocateDevice(qLen, bytes, "seq_len_q"));
      seqLenBuffers.push_back(qLen);
      KILN_RETURN_IF_ERROR(
          d.check(d.cuMemcpyHtoD(qLen, qLens.data(), bytes), "cuMemcpyHtoD(seq_len_q)"));
      buffers.seqLenQ = qLen;
      // The clamp and fix-up kernels (CudnnEmptyKeys.h): without them
      // cuDNN's result for an empty sample (or a length outside [0, S]) is
      // not Kiln's, so the call keeps its generated kernel.
      Status fixup = planEmptyKeys(*call, *a);
      if (!fixup.ok()) {
        if (strict)
          return fixup.withPrefix("--attention=cudnn: ");
        note("generated kernel: " + fixup.message());
        continue;
      }
      buffers.seqLenKv = call->clamped;
    }
    StatusOr<std::unique_ptr<CudnnAttentionPlan>> plan =
        CudnnAttentionPlan::create(*cudnn, *a, buffers, call->where);
    if (!plan.ok()) {
      // --attention=cudnn: every eligible call must run on cuDNN.
      if (strict)
        return plan.status().withPrefix("--attention=cudnn: ");
      note("generated kernel: " + plan.status().message());
      continue;
    }
    workspaceBytes = std::max(workspaceBytes, (*plan)->workspaceBytes());
    call->cudnn = std::move(*plan);
    ++planned;
  }
  if (workspaceBytes > 0)
    KILN_RETURN_IF_ERROR(
        allocateDevice(cudnnWorkspace, static_cast<size_t>(workspaceBytes), "cuDNN workspace"));
  for (DeviceProgram &program : programs)
    for (DeviceCall &call : program.calls) {
      if (!call.cudnn)
        continue;
      KILN_RETURN_IF_ERROR(call.cudnn->bindWorkspace(cudnnWorkspace));
      call.useCudnn = strict;
      call.undecided = !strict;
      program.undecided |= !strict;
    }
  note(detail::concat("cuDNN ", cudnn->version(), " planned for ", planned, " of ",
                      candidates.size(), " eligible calls (workspace ", workspaceBytes,
                      " bytes, allocated outside the memory plan)",
                      strict ? "" : "; timed against the generated kernels at first use"));
  return okStatus();
}

Status CudaBackend::Impl::decideAttention(DeviceProgram &program) {
  const CudaDriver &d = *driver;
  // Host timing around a synchronized stream: a few reps after a warm-up
  // are enough to order two kernels of the same op.
  constexpr int kReps = 3;
  auto sync = [&](const std::string &where) {
    return d.check(d.cuStreamSynchronize(stream), "cuStreamSynchronize", " after " + where);
  };
  auto timeMs = [&](const DeviceCall &call, bool useCudnn) -> StatusOr<double> {
    auto once = [&] { return useCudnn ? runCudnn(call) : launchKernel(call); };
    KILN_RETURN_IF_ERROR(once());
    KILN_RETURN_IF_ERROR(sync(call.where));
    auto start = std::chrono::steady_clock::now();
    for (int r = 0; r < kReps; ++r)
      KILN_RETURN_IF_ERROR(once());
    KILN_RETURN_IF_ERROR(sync(call.where));
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
               .count() /
           kReps;
  };
  // Forward and backward calls are timed and chosen independently: both
  // sides compute the same lse (natural log, [B, H, T] f32) and the backward
  // recomputes P from it, so a cuDNN forward with a generated backward (or
  // the reverse) is as exact as either pair. Every candidate overwrites its
  // outputs (no accumulation), so the timing reps leave them as one run.
  for (DeviceCall &call : program.calls) {
    if (call.undecided) {
      KILN_ASSIGN_OR_RETURN(double kernelMs, timeMs(call, false));
      StatusOr<double> cudnnMs = timeMs(call, true);
      call.undecided = false;
      if (!cudnnMs.ok()) {
        call.useCudnn = false;
        note(call.where + ": generated kernel (cuDNN failed: " +
             cudnnMs.status().message() + ")");
      } else {
        call.useCudnn = *cudnnMs < kernelMs;
        note(detail::concat(call.where, ": cuDNN ", *cudnnMs, " ms, generated ", kernelMs,
                            " ms -> ", call.useCudnn ? "cuDNN" : "generated kernel"));
      }
    }
    // The chosen one writes the outputs the rest of the program reads.
    KILN_RETURN_IF_ERROR(launch(call));
    KILN_RETURN_IF_ERROR(sync(call.where));
  }
  program.undecided = false;
  return eager ? okStatus() : capture(program);
}

Status CudaBackend::Impl::capture(DeviceProgram &program) {
  const CudaDriver &d = *driver;
  KILN_RETURN_IF_ERROR(d.check(
      d.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
      "cuStreamBeginCapture", detail::concat(" for '", program.name, "'")));
  Status launched = okStatus();
  for (const DeviceCall &call : program.calls) {
    launched = launch(call);
    if (!launched.ok())
      break;
  }
  // End the capture on every path, or the stream stays unusable.
  CUresult ended = d.cuStreamEndCapture(stream, &program.graph);
  KILN_RETURN_IF_ERROR(launched.withPrefix(
      detail::concat("capturing '", program.name, "' as a CUDA graph: ")));
  KILN_RETURN_IF_ERROR(d.check(ended, "cuStreamEndCapture",
                               detail::concat(" for '", program.name, "'")));
  return d.check(d.cuGraphInstantiate(&program.exec, program.graph, 0),
                 "cuGraphInstantiateWithFlags",
                 detail::concat(" for '", program.name, "'"));
}

Status CudaBackend::Impl::runEagerly(const DeviceProgram &program) {
  for (const DeviceCall &call : program.calls) {
    KILN_RETURN_IF_ERROR(launch(call));
    KILN_RETURN_IF_ERROR(driver->check(driver->cuStreamSynchronize(stream),
                                       "cuStreamSynchronize", " after " + call.where));
  }
  return okStatus();
}

CudaBackend::CudaBackend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaBackend::~CudaBackend() = default;

StatusOr<std::unique_ptr<CudaBackend>>
CudaBackend::create(const Artifact &artifact, const BackendOptions &options) {
  auto impl = std::make_unique<Impl>(artifact);
  impl->options = options;
  const char *eager = std::getenv("KILN_CUDA_EAGER");
  impl->eager = eager && std::strcmp(eager, "1") == 0;
  KILN_ASSIGN_OR_RETURN(impl->driver, CudaDriver::load());
  KILN_RETURN_IF_ERROR(impl->openDevice());

  size_t tableEntries = 0;
  bool hasGemm = false;
  for (int kind = 0; kind < kNumProgramKinds; ++kind)
    if (const schema::Program *program = artifact.program(static_cast<ProgramKind>(kind)))
      for (const schema::Step *step : *program->schedule()) {
        if (const schema::KernelCall *kc = step->op_as_KernelCall())
          tableEntries += kc->buffers() ? kc->buffers()->size() : 0;
        else
          hasGemm = true;
      }
  // Memory first: a step that cannot fit fails before the JIT.
  KILN_RETURN_IF_ERROR(impl->allocate(tableEntries * sizeof(CUdeviceptr), hasGemm));
  if (hasGemm) {
    KILN_ASSIGN_OR_RETURN(impl->cublas, CublasLt::load());
  }
  KILN_RETURN_IF_ERROR(impl->loadKernels());
  KILN_RETURN_IF_ERROR(impl->resolvePrograms());
  KILN_RETURN_IF_ERROR(impl->planCudnnAttention());
  // A program with an undecided attention call is captured after its first
  // run (decideAttention), with the faster of the two in it.
  if (!impl->eager)
    for (DeviceProgram &program : impl->programs)
      if (program.present && !program.undecided)
        KILN_RETURN_IF_ERROR(impl->capture(program));

  impl->mirrors.resize(artifact.numBuffers());
  for (uint32_t i = 0; i < artifact.numBuffers(); ++i)
    if (artifact.bufferInfo(i).elements == 1 &&
        artifact.buffer(i).dtype() == schema::DType_F32)
      impl->scalars.push_back(i);
  if (!impl->scalars.empty()) {
    auto &[first, end] = impl->scalarSpan;
    first = std::numeric_limits<int64_t>::max();
    end = 0;
    for (uint32_t s : impl->scalars) {
      first = std::min(first, impl->layout.offsets[s]);
      end = std::max(end, impl->layout.offsets[s] + static_cast<int64_t>(impl->bytes(s)));
    }
  }
  return std::unique_ptr<CudaBackend>(new CudaBackend(std::move(impl)));
}

Status CudaBackend::run(ProgramKind kind) {
  Impl &m = *impl_;
  const DeviceProgram &program = m.programs[static_cast<int>(kind)];
  if (!program.present)
    return failedPrecondition("the artifact has no '", program.name, "' program");
  if (program.undecided) {
    KILN_RETURN_IF_ERROR(m.decideAttention(m.programs[static_cast<int>(kind)]));
  } else if (m.eager) {
    KILN_RETURN_IF_ERROR(m.runEagerly(program));
  } else {
    KILN_RETURN_IF_ERROR(m.driver->check(
        m.driver->cuGraphLaunch(program.exec, m.stream), "cuGraphLaunch",
        detail::concat(" for '", program.name, "'")));
    KILN_RETURN_IF_ERROR(m.driver->check(
        m.driver->cuStreamSynchronize(m.stream), "running the CUDA graph of",
        detail::concat(" '", program.name, "' (rerun with KILN_CUDA_EAGER=1 to "
                       "name the failing kernel and its model line)")));
  }
  return m.readScalars();
}

Status CudaBackend::Impl::readScalars() {
  if (scalars.empty())
    return okStatus();
  KILN_RETURN_IF_ERROR(driver->check(driver->cuStreamSynchronize(stream), "cuStreamSynchronize",
                                     " before reading the step's scalars"));
  if (scalarSpan.second - scalarSpan.first > kScalarSpanBytes) {
    // Scattered over the arena: one copy each (still one synchronization).
    for (uint32_t s : scalars)
      KILN_RETURN_IF_ERROR(driver->check(
          driver->cuMemcpyDtoH(mirror(s).bytes.data(), devicePointer(s), bytes(s)),
          "cuMemcpyDtoH", " for " + artifact.describeBuffer(s)));
    return okStatus();
  }
  // Every scalar (loss, norms, metrics) with one copy of the arena span
  // holding them all.
  scalarStaging.resize(static_cast<size_t>(scalarSpan.second - scalarSpan.first));
  KILN_RETURN_IF_ERROR(driver->check(
      driver->cuMemcpyDtoH(scalarStaging.data(), arena + static_cast<CUdeviceptr>(scalarSpan.first),
                           scalarStaging.size()),
      "cuMemcpyDtoH", " (the step's scalars)"));
  for (uint32_t s : scalars)
    std::memcpy(mirror(s).bytes.data(),
                scalarStaging.data() + (layout.offsets[s] - scalarSpan.first), bytes(s));
  return okStatus();
}

void *CudaBackend::hostData(uint32_t buffer) const {
  return impl_->mirror(buffer).bytes.data();
}

Status CudaBackend::upload(uint32_t buffer) {
  Impl &m = *impl_;
  // Ordered on the backend's stream before the next graph replay; from
  // pageable memory the call returns once the source has been staged, so
  // the host view may be rewritten right after.
  return m.driver->check(
      m.driver->cuMemcpyHtoDAsync(m.devicePointer(buffer), hostData(buffer),
                                  m.bytes(buffer), m.stream),
      "cuMemcpyHtoDAsync", " for " + m.artifact.describeBuffer(buffer));
}

Status CudaBackend::download(uint32_t buffer) {
  Impl &m = *impl_;
  KILN_RETURN_IF_ERROR(m.driver->check(m.driver->cuStreamSynchronize(m.stream),
                                       "cuStreamSynchronize"));
  return m.driver->check(
      m.driver->cuMemcpyDtoH(hostData(buffer), m.devicePointer(buffer), m.bytes(buffer)),
      "cuMemcpyDtoH", " for " + m.artifact.describeBuffer(buffer));
}

Status CudaBackend::zero(uint32_t buffer) {
  Impl &m = *impl_;
  std::memset(hostData(buffer), 0, m.bytes(buffer));
  return m.driver->check(
      m.driver->cuMemsetD8Async(m.devicePointer(buffer), 0, m.bytes(buffer), m.stream),
      "cuMemsetD8Async", " for " + m.artifact.describeBuffer(buffer));
}

const KernelLoad &CudaBackend::kernelLoad() const { return impl_->load; }

std::string CudaBackend::deviceName() const { return impl_->deviceName; }

std::optional<int64_t> CudaBackend::devicePeakBytes() const {
  return impl_->allocatedBytes;
}

} // namespace kiln::rt::cuda
