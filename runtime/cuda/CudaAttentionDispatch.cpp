//===- CudaAttentionDispatch.cpp - cuDNN or Kiln's kernels per attention call ===//
//
// Part of the CUDA backend (CudaBackendImpl.h): the attention calls that
// carry a cudnn_attention get a cuDNN plan under --attention=auto|cudnn, the
// key-length clamp and empty-sample fix-ups around it (CudnnEmptyKeys.h),
// and, under auto, both are timed on the first run and the faster is kept.
// That first run (decideCalls) also times the GEMMs' algorithms under
// --gemm-algos=timed (GemmTuning.cpp).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaBackendImpl.h"

#include "runtime/cuda/CudnnEmptyKeys.h"
#include "runtime/metrics/Nvtx.h"
#include "runtime/cuda/JitCache.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>

namespace kiln::rt::cuda {

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
                      a.head_dim(), a.value_dim(), a.tokens_major())) {
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
  // Each plan's workspace goes where kilnc reserved it (its Workspace
  // buffer in the arena) when cuDNN asks no more; the others share one
  // allocation outside the plan, sized by the largest of them.
  int64_t outsideBytes = 0, reservedBytes = 0;
  size_t planned = 0, outside = 0;
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
    int64_t needed = (*plan)->workspaceBytes();
    if (a->workspace() >= 0) {
      uint32_t reserved = static_cast<uint32_t>(a->workspace());
      reservedBytes = std::max(reservedBytes, artifact.bufferInfo(reserved).bytes);
      if (needed <= artifact.bufferInfo(reserved).bytes)
        call->cudnnWorkspace = devicePointer(reserved);
    }
    if (needed > 0 && !call->cudnnWorkspace) {
      outsideBytes = std::max(outsideBytes, needed);
      ++outside;
    }
    call->cudnn = std::move(*plan);
    ++planned;
  }
  if (outsideBytes > 0)
    KILN_RETURN_IF_ERROR(
        allocateDevice(cudnnWorkspace, static_cast<size_t>(outsideBytes), "cuDNN workspace"));
  for (DeviceProgram &program : programs)
    for (DeviceCall &call : program.calls) {
      if (!call.cudnn)
        continue;
      KILN_RETURN_IF_ERROR(call.cudnn->bindWorkspace(
          call.cudnnWorkspace ? call.cudnnWorkspace : cudnnWorkspace));
      call.useCudnn = strict;
      call.undecided = !strict;
      program.undecided |= !strict;
    }
  std::string where =
      outside == 0
          ? detail::concat("workspace in the memory plan, at most ", reservedBytes,
                           " bytes a call")
          : detail::concat(outside, " of them need more workspace than kilnc reserved (",
                           reservedBytes, " bytes at most): ", outsideBytes,
                           " bytes allocated outside the memory plan, so the device peak "
                           "is the plan's plus that");
  note(detail::concat("cuDNN ", cudnn->version(), " planned for ", planned, " of ",
                      candidates.size(), " eligible calls (", where, ")",
                      strict ? "" : "; timed against the generated kernels at first use"));
  return okStatus();
}

Status CudaBackend::Impl::decideCalls(ProgramKind kind) {
  DeviceProgram &program = programs[static_cast<int>(kind)];
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
  // One line per kernel (a model's layers share one): its calls' choices
  // and times, in the order the kernels first ran.
  struct Tally {
    std::string what; // "kernel 'k_attention_...' at m.kiln:4:5"
    int calls = 0, cudnnChosen = 0;
    double cudnnMs = 0, kernelMs = 0;
  };
  std::vector<Tally> tallies;
  // A traced step shows this run too: each call from its (chosen) launch to
  // the synchronization after it, on the host clock, the timing reps in the
  // gaps between.
  TraceRecorder *traced = trace && trace->active() ? trace : nullptr;
  GemmTuningTally gemmTally;
  double programStart = traced ? traced->now() : 0;
  for (size_t i = 0; i < program.calls.size(); ++i) {
    DeviceCall &call = program.calls[i];
    if (call.undecided && call.gemm) {
      KILN_RETURN_IF_ERROR(tuneGemm(call, gemmTally));
    } else if (call.undecided) {
      KILN_ASSIGN_OR_RETURN(double kernelMs, timeMs(call, false));
      StatusOr<double> cudnnMs = timeMs(call, true);
      call.undecided = false;
      if (!cudnnMs.ok()) {
        call.useCudnn = false;
        note(call.where + ": generated kernel (cuDNN failed: " +
             cudnnMs.status().message() + ")");
      } else {
        call.useCudnn = *cudnnMs < kernelMs;
        size_t open = call.where.find(" (");
        std::string what = open == std::string::npos
                               ? call.where
                               : call.where.substr(open + 2, call.where.size() - open - 3);
        auto it = std::find_if(tallies.begin(), tallies.end(),
                               [&](const Tally &t) { return t.what == what; });
        Tally &t = it != tallies.end() ? *it : tallies.emplace_back(Tally{what});
        ++t.calls;
        t.cudnnChosen += call.useCudnn;
        t.cudnnMs += *cudnnMs;
        t.kernelMs += kernelMs;
      }
    }
    // The chosen one writes the outputs the rest of the program reads.
    double start = traced ? traced->now() : 0;
    nvtx::ScopedRange range(program.rangeNames[i]);
    KILN_RETURN_IF_ERROR(launch(call));
    KILN_RETURN_IF_ERROR(sync(call.where));
    if (traced)
      traced->entry(kind, i, start, traced->now());
  }
  if (traced)
    traced->program(kind, programStart, traced->now(),
                    "host clock: the first run, attention timed against cuDNN and "
                    "GEMM algorithms timed");
  for (const Tally &t : tallies)
    note(detail::concat(program.name, ": ", t.what, ", ", t.calls, " calls: cuDNN ",
                        t.cudnnMs / t.calls, " ms, generated ", t.kernelMs / t.calls,
                        " ms (mean) -> cuDNN for ", t.cudnnChosen, ", generated for ",
                        t.calls - t.cudnnChosen));
  KILN_RETURN_IF_ERROR(finishGemmTuning(program, gemmTally));
  program.undecided = false;
  return eager ? okStatus() : capture(program);
}

} // namespace kiln::rt::cuda
