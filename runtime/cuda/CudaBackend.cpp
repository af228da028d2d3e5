//===- CudaBackend.cpp - The Backend on one NVIDIA GPU --------------------===//

#include "runtime/cuda/CudaBackendImpl.h"

#include "runtime/cuda/GemmEpilogueFallback.h"
#include "runtime/cuda/JitCache.h"
#include "runtime/metrics/Nvtx.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <unistd.h>

namespace kiln::rt::cuda {
namespace {

// The most arena bytes one copy may span to read every scalar at once; a
// plan that scatters them further copies each.
constexpr int64_t kScalarSpanBytes = 1 << 20;

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

CudaBackend::Impl::~Impl() {
  if (!driver)
    return;
  // Teardown errors cannot be reported anywhere useful; the process is
  // ending or the next run reports the device's state.
  releaseStepGraph();
  if (stepGraph.pinned)
    driver->cuMemFreeHost(stepGraph.pinned);
  for (CUevent e : {stepGraph.start, stepGraph.end})
    if (e)
      driver->cuEventDestroy(e);
  for (const std::vector<CUevent> *group : {&events, &forkEvents})
    for (CUevent e : *group)
      driver->cuEventDestroy(e);
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
  if (tuningScratch) // a GEMM timing that failed before freeing it
    driver->cuMemFree(tuningScratch);
  for (CUmodule module : modules)
    driver->cuModuleUnload(module);
  if (emptyKeysModule)
    driver->cuModuleUnload(emptyKeysModule);
  if (epilogueModule)
    driver->cuModuleUnload(epilogueModule);
  for (CUdeviceptr p : {arena, tables, workspace, epilogueArgs})
    if (p)
      driver->cuMemFree(p);
  if (stream)
    driver->cuStreamDestroy(stream);
  if (commStream)
    driver->cuStreamDestroy(commStream);
  if (context)
    driver->cuDevicePrimaryCtxRelease(device);
}

Status CudaBackend::Impl::openDevice() {
  const CudaDriver &d = *driver;
  // A rank's GPU: its index among the node's ranks (LOCAL_RANK).
  int count = 0;
  KILN_RETURN_IF_ERROR(d.check(d.cuDeviceGetCount(&count), "cuDeviceGetCount"));
  if (options.device >= count)
    return failedPrecondition("this rank's GPU is device ", options.device,
                              " (its local rank) but the node has ", count,
                              ": start at most one rank per GPU");
  KILN_RETURN_IF_ERROR(d.check(d.cuDeviceGet(&device, options.device), "cuDeviceGet"));
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
  load.kernels = artifact.root().kernels() ? artifact.root().kernels()->size() : 0;
  StatusOr<JitArtifact> cached = cache.compileArtifact(
      artifact, arch, JitCache::kArtifactParts, ::isatty(STDERR_FILENO) ? stderr : nullptr);
  KILN_ASSIGN_OR_RETURN(JitArtifact jit, std::move(cached));
  for (uint32_t k = 0; k < load.kernels; ++k)
    kernelParts.push_back(jit.partOf(k));
  for (const JitModule &part : jit.parts) {
    CUmodule module = nullptr;
    KILN_RETURN_IF_ERROR(d.check(d.cuModuleLoadData(&module, part.cubin.data()),
                                 "cuModuleLoadData", " (" + part.cachePath + ")"));
    modules.push_back(module);
  }
  load.cacheHit = jit.cacheHit;
  load.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                     .count();
  load.path = jit.cachePaths();
  load.detail = arch + " on " + deviceName + ", NVRTC " + nvrtc->version() +
                (jit.cacheHit ? ""
                              : detail::concat(", compile ", jit.seconds, " s in ",
                                               jit.parts.size(), " parallel parts"));
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
    // The kernel is in its part's module (asking the others would be an API
    // error each, which compute-sanitizer reports).
    KILN_RETURN_IF_ERROR(d.check(
        d.cuModuleGetFunction(&functions[k], modules[kernelParts[k]], kernel.entry()->c_str()),
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
  // GEMM epilogues run as Kiln kernels: (CUBLASLT_EPILOGUE_ name, location).
  std::vector<std::pair<std::string, std::string>> fallbacks;
  for (int kind = 0; kind < kNumProgramKinds; ++kind) {
    const schema::Program *program = artifact.program(static_cast<ProgramKind>(kind));
    DeviceProgram &dp = programs[kind];
    dp.name = programName(kind);
    if (!program)
      continue;
    dp.present = true;
    dp.calls.resize(program->schedule()->size());
    dp.rangeNames = nvtx::entryRangeNames(artifact, static_cast<ProgramKind>(kind));
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
      if (const schema::CollectiveCall *cc = step.op_as_CollectiveCall()) {
        call.where = detail::concat(dp.name, " entry ", i, " (",
                                    schema::EnumNameCollectiveKind(cc->kind()), " at ",
                                    location, ")");
        call.collectiveMean = cc->reduction() == schema::Reduction_Mean;
        call.collectiveKind = cc->kind();
        auto axisComm = axisNccl.find(cc->axis()->string_view());
        call.comm = axisComm != axisNccl.end() ? axisComm->second.get() : nccl.get();
        call.overlap = cc->overlap() && options.commOverlap &&
                       (cc->kind() == schema::CollectiveKind_AllReduce ||
                        cc->kind() == schema::CollectiveKind_AllGather);
        call.overlapUntil = cc->overlap_until();
        if (call.overlap) {
          if (!commStream)
            KILN_RETURN_IF_ERROR(d.check(d.cuStreamCreate(&commStream, CU_STREAM_NON_BLOCKING),
                                         "cuStreamCreate", " (collectives)"));
          for (CUevent *e : {&call.ready, &call.done}) {
            KILN_RETURN_IF_ERROR(
                d.check(d.cuEventCreate(e, CU_EVENT_DISABLE_TIMING), "cuEventCreate"));
            forkEvents.push_back(*e);
          }
        }
        // A local shard is a copy of this rank's block, of any element
        // type (an i32 iota split over 'model'): its counts are bytes.
        bool localShard = cc->kind() == schema::CollectiveKind_LocalShard;
        for (uint32_t b : *cc->buffers()) {
          if (!localShard && artifact.buffer(b).dtype() != schema::DType_F32)
            return failedPrecondition(call.where, ": ", artifact.describeBuffer(b),
                                      " is not f32; NCCL's collectives here are f32");
          call.collective.push_back(NcclBuffer{
              devicePointer(b),
              static_cast<size_t>(localShard ? bytes(b) : bytes(b) / sizeof(float))});
        }
        continue;
      }
      call.where = detail::concat(dp.name, " entry ", i, " (GEMM at ", location, ")");
      KILN_RETURN_IF_ERROR(planGemm(call, *step.op_as_GemmCall(), location, fallbacks));
      call.gemmResultBytes = bytes(step.op_as_GemmCall()->c());
      if (call.gemm->candidates() > 1)
        call.undecided = dp.undecided = true; // timed at the first run
    }
  }
  // Said once per run: slower than the fused epilogue, never wrong.
  if (!fallbacks.empty()) {
    // Every fallback launch's arguments in one device array.
    std::vector<EpilogueLaunch *> launches;
    for (DeviceProgram &program : programs)
      for (DeviceCall &call : program.calls)
        for (EpilogueLaunch &e : call.epilogue)
          launches.push_back(&e);
    std::vector<long long> args;
    for (EpilogueLaunch *e : launches)
      args.insert(args.end(), std::begin(e->args), std::end(e->args));
    KILN_RETURN_IF_ERROR(allocateDevice(epilogueArgs, args.size() * sizeof(long long),
                                        "GEMM epilogue arguments"));
    KILN_RETURN_IF_ERROR(d.check(
        d.cuMemcpyHtoD(epilogueArgs, args.data(), args.size() * sizeof(long long)),
        "cuMemcpyHtoD(GEMM epilogue arguments)"));
    for (size_t i = 0; i < launches.size(); ++i)
      launches[i]->table = epilogueArgs + i * kEpilogueArgs * sizeof(long long);
    // Per epilogue kind: how many, and where the first is.
    std::vector<std::pair<std::string, std::pair<int, std::string>>> kinds;
    for (const auto &[kind, location] : fallbacks) {
      auto it = std::find_if(kinds.begin(), kinds.end(),
                             [&, k = kind](const auto &e) { return e.first == k; });
      if (it == kinds.end())
        kinds.push_back({kind, {1, location}});
      else
        ++it->second.first;
    }
    std::string list;
    for (const auto &[kind, stat] : kinds)
      list += detail::concat(list.empty() ? "" : ", ", kind, " x", stat.first,
                             " (first at ", stat.second, ")");
    std::fprintf(stderr,
                 "kiln-run: note: cuBLASLt has no algorithm for the epilogue of %zu "
                 "GEMM%s on %s; %s run%s as the plain GEMM and a Kiln kernel: %s\n",
                 fallbacks.size(), fallbacks.size() == 1 ? "" : "s", deviceName.c_str(),
                 fallbacks.size() == 1 ? "it" : "they", fallbacks.size() == 1 ? "s" : "",
                 list.c_str());
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

Status CudaBackend::Impl::planGemm(DeviceCall &call, const schema::GemmCall &g,
                                   const std::string &location,
                                   std::vector<std::pair<std::string, std::string>> &fallbacks) {
  call.a = devicePointer(g.a());
  call.b = devicePointer(g.b());
  call.c = devicePointer(g.c());
  // Element types from the buffers (bf16 operands, and a bf16 result
  // under precision = bf16; the verifier checked the combinations).
  ColumnMajorGemm layout = toColumnMajor(g);
  for (ColumnMajorMatrix *m : {&layout.first, &layout.second, &layout.result})
    m->bf16 = artifact.buffer(m->buffer).dtype() == schema::DType_BF16;
  // The epilogue's bias / aux buffers (verified: present when used).
  ColumnMajorEpilogue epilogue = toColumnMajorEpilogue(g, layout.result.bf16);
  CUdeviceptr bias = g.bias() >= 0 ? devicePointer(g.bias()) : 0;
  CUdeviceptr aux = g.aux() >= 0 ? devicePointer(g.aux()) : 0;
  const int candidates =
      options.gemmAlgorithms == GemmAlgorithms::kTimed ? kGemmCandidates : 1;
  StatusOr<std::unique_ptr<GemmPlan>> plan =
      GemmPlan::create(*cublas, layout, options.tf32, kGemmWorkspaceBytes,
                       call.where, epilogue, bias, aux, candidates);
  if (plan.ok() || epilogue.kind == LtEpilogue::Default ||
      plan.status().code() != StatusCode::kUnavailable) {
    KILN_ASSIGN_OR_RETURN(call.gemm, std::move(plan));
    return okStatus();
  }
  // No algorithm with this epilogue: the plain GEMM, then the epilogue's
  // formulas as Kiln kernels on the same stream.
  KILN_ASSIGN_OR_RETURN(call.gemm,
                        GemmPlan::create(*cublas, layout, options.tf32,
                                         kGemmWorkspaceBytes, call.where, {}, 0, 0,
                                         candidates));
  const CudaDriver &d = *driver;
  if (!epilogueModule) {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<Nvrtc> nvrtc, Nvrtc::load());
    JitCache cache(*nvrtc, JitCache::cudaCacheDir());
    KILN_ASSIGN_OR_RETURN(JitModule jit, cache.compile(gemmEpilogueSource(),
                                                       "gemm_epilogue.cu", arch));
    KILN_RETURN_IF_ERROR(d.check(d.cuModuleLoadData(&epilogueModule, jit.cubin.data()),
                                 "cuModuleLoadData", " (GEMM epilogue kernels)"));
  }
  for (const EpilogueLaunchPlan &p :
       gemmEpilogueFallback(g, layout.result.bf16,
                            artifact.buffer(g.a()).dtype() == schema::DType_BF16,
                            artifact.buffer(g.b()).dtype() == schema::DType_BF16)) {
    EpilogueLaunch launch;
    KILN_RETURN_IF_ERROR(d.check(
        d.cuModuleGetFunction(&launch.function, epilogueModule, p.entry.c_str()),
        "cuModuleGetFunction", " ('" + p.entry + "' for " + call.where + ")"));
    for (int i = 0; i < 3; ++i)
      launch.args[i] = static_cast<long long>(
          p.buffers[i] >= 0 ? devicePointer(static_cast<uint32_t>(p.buffers[i])) : 0);
    for (int i = 0; i < 4; ++i)
      launch.args[3 + i] = p.values[i];
    launch.grid = epilogueGrid(p.elements);
    call.epilogue.push_back(launch);
  }
  fallbacks.push_back({ltEpilogueName(epilogue.kind), location});
  return okStatus();
}

Status CudaBackend::Impl::launch(const DeviceCall &call) const {
  if (call.useCudnn)
    return runCudnn(call);
  return launchKernel(call);
}

Status CudaBackend::Impl::runCollective(const DeviceCall &call, CUstream on) const {
  const Nccl *nccl = call.comm;
  if (call.collectiveKind == schema::CollectiveKind_AllReduce)
    return nccl->allReduce(call.collective, call.collectiveMean, on, call.where);
  // [in, out]: the verifier checked that one is the axis' ranks times the other.
  const NcclBuffer &in = call.collective[0], &out = call.collective[1];
  switch (call.collectiveKind) {
  case schema::CollectiveKind_ReduceScatter:
    return nccl->reduceScatter(in.data, out.data, out.count, call.collectiveMean, on,
                               call.where);
  case schema::CollectiveKind_AllGather:
    return nccl->allGather(in.data, out.data, in.count, on, call.where);
  default: // LocalShard: this rank's slice, copied on the stream (counts in bytes)
    return driver->check(
        driver->cuMemcpyDtoDAsync(out.data,
                                  in.data + static_cast<CUdeviceptr>(nccl->rank()) * out.count,
                                  out.count, on),
        "cuMemcpyDtoDAsync", " for " + call.where);
  }
}

Status CudaBackend::Impl::launchKernel(const DeviceCall &call) const {
  if (!call.collective.empty())
    return runCollective(call, stream);
  if (call.gemm) {
    KILN_RETURN_IF_ERROR(call.gemm->run(call.a, call.b, call.c, workspace,
                                        kGemmWorkspaceBytes, stream));
    for (const EpilogueLaunch &e : call.epilogue) {
      CUdeviceptr table = e.table;
      void *params[] = {&table};
      KILN_RETURN_IF_ERROR(driver->check(
          driver->cuLaunchKernel(e.function, e.grid, 1, 1, kEpilogueBlock, 1, 1, 0,
                                 stream, params, nullptr),
          "cuLaunchKernel", " for the GEMM epilogue of " + call.where));
    }
    return okStatus();
  }
  // The entry's only parameter: void* const* buffers (the device table).
  CUdeviceptr table = call.argumentTable;
  void *params[] = {&table};
  return driver->check(driver->cuLaunchKernel(call.function, call.grid, 1, 1,
                                              call.block, 1, 1, call.sharedBytes,
                                              stream, params, nullptr),
                       "cuLaunchKernel", " for " + call.where);
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
  bool hasGemm = false, hasCollective = false;
  for (int kind = 0; kind < kNumProgramKinds; ++kind)
    if (const schema::Program *program = artifact.program(static_cast<ProgramKind>(kind)))
      for (const schema::Step *step : *program->schedule()) {
        if (const schema::KernelCall *kc = step->op_as_KernelCall())
          tableEntries += kc->buffers() ? kc->buffers()->size() : 0;
        else if (step->op_as_GemmCall())
          hasGemm = true;
        else
          hasCollective = true;
      }
  // Memory first: a step that cannot fit fails before the JIT.
  KILN_RETURN_IF_ERROR(impl->allocate(tableEntries * sizeof(CUdeviceptr), hasGemm));
  if (hasGemm) {
    KILN_ASSIGN_OR_RETURN(impl->cublas, CublasLt::load());
  }
  if (hasCollective) {
    // This rank of the artifact's mesh; one rank needs no CPU communicator.
    Communicator *comm = options.communicator;
    int rank = comm ? comm->rank() : 0, size = comm ? comm->size() : 1;
    if (size != artifact.ranks())
      return failedPrecondition(artifact.name(), " was compiled for ", artifact.ranks(),
                                " ranks but runs as ", size);
    KILN_ASSIGN_OR_RETURN(impl->nccl, Nccl::open(comm, rank, size));
    // A NCCL communicator per mesh axis that spans part of the ranks (the
    // axes the run split a CPU communicator for), its unique id passed over
    // that axis's CPU communicator; every rank opens them in the same
    // (name) order.
    if (options.mesh)
      for (const auto &[axis, axisComm] : options.mesh->axes) {
        KILN_ASSIGN_OR_RETURN(impl->axisNccl[axis],
                              Nccl::open(axisComm.get(), axisComm->rank(),
                                         axisComm->size()));
      }
  }
  KILN_RETURN_IF_ERROR(impl->loadKernels());
  KILN_RETURN_IF_ERROR(impl->resolvePrograms());
  if (impl->nccl && (options.communicator ? options.communicator->rank() : 0) == 0)
    // Once per run, as the other choices made at start-up.
    std::fprintf(stderr, "kiln-run: collectives: %s over %lld rank%s, on the step's stream%s\n",
                 impl->nccl->describe().c_str(), static_cast<long long>(artifact.ranks()),
                 artifact.ranks() == 1 ? "" : "s",
                 impl->commStream ? " (gradient buckets on a stream of their own, beside "
                                    "the backward)"
                                  : "");
  KILN_RETURN_IF_ERROR(impl->planCudnnAttention());
  // A program with an undecided attention call is captured after its first
  // run (decideCalls), with the faster of the two in it.
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

bool CudaBackend::setProfiling(bool enabled) {
  impl_->profiling = enabled;
  return true;
}

const ScheduleTiming &CudaBackend::entryTiming(ProgramKind program) const {
  return impl_->timing[static_cast<int>(program)];
}

void CudaBackend::traceEntries(TraceRecorder *trace) { impl_->trace = trace; }

std::string CudaBackend::deviceName() const { return impl_->deviceName; }

int64_t CudaBackend::collectiveBytesPerStep() const {
  // "step" runs grad_accum times a training step, the others once.
  int64_t total = 0;
  for (int kind = 0; kind < kNumProgramKinds; ++kind) {
    int64_t runs = kind == static_cast<int>(ProgramKind::kStep) ? impl_->artifact.gradAccum()
                   : kind == static_cast<int>(ProgramKind::kUpdate) ? 1
                                                                    : 0;
    for (const DeviceCall &call : impl_->programs[kind].calls) {
      // What each call hands to NCCL (Communicator::communicatedBytes).
      switch (call.collectiveKind) {
      case schema::CollectiveKind_AllReduce:
        for (const NcclBuffer &b : call.collective)
          total += runs * static_cast<int64_t>(b.count * sizeof(float));
        break;
      case schema::CollectiveKind_ReduceScatter:
        total += runs * static_cast<int64_t>(call.collective[0].count * sizeof(float));
        break;
      case schema::CollectiveKind_AllGather:
        total += runs * static_cast<int64_t>(call.collective[1].count * sizeof(float));
        break;
      default: // a local shard communicates nothing
        break;
      }
    }
  }
  return total;
}

std::optional<int64_t> CudaBackend::devicePeakBytes() const {
  return impl_->allocatedBytes;
}

std::optional<double> CudaBackend::lastStepDeviceSeconds() const {
  return impl_->stepGraph.lastSeconds;
}

} // namespace kiln::rt::cuda
