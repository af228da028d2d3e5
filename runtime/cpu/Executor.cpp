//===- Executor.cpp - Runs the programs of a verified artifact ------------===//

#include "runtime/cpu/Executor.h"

#include "runtime/metrics/Nvtx.h"

#include <cblas.h>
#include <algorithm>
#include <chrono>
#include <cstring>

namespace kiln::rt::cpu {

namespace {

// Elements of one GEMM operand: (batch - 1) * stride + rows * cols.
size_t operandElements(int64_t batch, int64_t stride, int64_t rows,
                       int64_t cols) {
  return static_cast<size_t>((batch - 1) * stride + rows * cols);
}

// bf16 bits -> float, exactly (the top half of the float's bits).
void widenBf16(const uint16_t *bits, float *out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t word = static_cast<uint32_t>(bits[i]) << 16;
    std::memcpy(&out[i], &word, sizeof word);
  }
}

// float -> bf16 bits, rounded to nearest even; any NaN becomes the canonical
// NaN 0x7fff (rounding could carry it into infinity). The same rule as the
// kernels' kiln_f32_to_bf16 (and the GPU's cvt.rn.bf16.f32), so a GEMM's
// bf16 result equals an fp32 result narrowed by a kiln.convert kernel.
void narrowToBf16(const float *in, uint16_t *bits, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t word;
    std::memcpy(&word, &in[i], sizeof word);
    if ((word & 0x7fffffffu) > 0x7f800000u) {
      bits[i] = 0x7fffu;
      continue;
    }
    word += 0x7fffu + ((word >> 16) & 1u);
    bits[i] = static_cast<uint16_t>(word >> 16);
  }
}

} // namespace

Executor::Call Executor::resolve(const Artifact &artifact,
                                 const schema::Step &step,
                                 const KernelLibrary &kernels,
                                 const Arena &arena) {
  Call call;
  if (const schema::KernelCall *kc = step.op_as_KernelCall()) {
    call.kernel = kernels.entry(kc->kernel());
    if (kc->buffers())
      for (uint32_t b : *kc->buffers())
        call.buffers.push_back(arena.data(b));
    return call;
  }
  if (const schema::CollectiveCall *cc = step.op_as_CollectiveCall()) {
    Collective &c = call.collective.emplace();
    c.kind = cc->kind();
    c.overlap = cc->overlap() && (c.kind == schema::CollectiveKind_AllReduce ||
                                  c.kind == schema::CollectiveKind_AllGather);
    if (cc->overlap_until() >= 0)
      c.until = static_cast<size_t>(cc->overlap_until());
    c.reduction = cc->reduction() == schema::Reduction_Mean ? Reduction::kMean
                                                            : Reduction::kSum;
    if (c.kind != schema::CollectiveKind_AllReduce) {
      // [in, out], checked by the verifier; a slice is the smaller one.
      uint32_t in = cc->buffers()->Get(0), out = cc->buffers()->Get(1);
      c.parts.push_back(ShardPart{
          arena.as<const float>(in), arena.as<float>(out),
          static_cast<size_t>(std::min(artifact.bufferInfo(in).elements,
                                       artifact.bufferInfo(out).elements))});
      return call;
    }
    for (uint32_t b : *cc->buffers())
      c.buffers.emplace_back(arena.as<float>(b),
                             artifact.bufferInfo(b).elements);
    // Buffers that sit back to back in the arena (the persistent gradients
    // mostly do) go to MPI as one range: one call per run, not per tensor.
    // Every rank has the same arena layout, so the ranks still meet in the
    // same calls.
    std::sort(c.buffers.begin(), c.buffers.end());
    std::vector<std::pair<float *, size_t>> ranges;
    for (const auto &[data, elements] : c.buffers) {
      if (!ranges.empty() &&
          ranges.back().first + ranges.back().second == data)
        ranges.back().second += elements;
      else
        ranges.emplace_back(data, elements);
    }
    c.buffers = std::move(ranges);
    return call;
  }
  const schema::GemmCall *g = step.op_as_GemmCall();
  // Dimensions were range-checked (<= 2^31-1) by the verifier.
  call.gemm = GemmArgs{arena.as<const float>(g->a()),
                       arena.as<const float>(g->b()),
                       arena.as<float>(g->c()),
                       static_cast<int>(g->m()),
                       static_cast<int>(g->n()),
                       static_cast<int>(g->k()),
                       g->batch(),
                       g->stride_a(),
                       g->stride_b(),
                       g->stride_c(),
                       g->trans_a(),
                       g->trans_b(),
                       g->accumulate() ? 1.0f : 0.0f};
  // bf16 operands (the verifier checked A and B agree): OpenBLAS has no
  // bf16 GEMM here, so they are widened exactly into fp32 scratch before
  // each call -- the same products and fp32 accumulation a tensor core does.
  if (artifact.buffer(g->a()).dtype() == schema::DType_BF16) {
    call.bf16A = arena.as<const uint16_t>(g->a());
    call.bf16B = arena.as<const uint16_t>(g->b());
    call.wideA.resize(
        operandElements(g->batch(), g->stride_a(), g->m(), g->k()));
    call.wideB.resize(
        operandElements(g->batch(), g->stride_b(), g->k(), g->n()));
    call.gemm.a = call.wideA.data();
    call.gemm.b = call.wideB.data();
  }
  // A bf16 result (the verifier allows it for bf16 operands only): fp32
  // accumulation into scratch, rounded after the call.
  if (artifact.buffer(g->c()).dtype() == schema::DType_BF16) {
    call.bf16C = arena.as<uint16_t>(g->c());
    call.wideC.resize(
        operandElements(g->batch(), g->stride_c(), g->m(), g->n()));
    call.gemm.c = call.wideC.data();
  }
  // The verifier checked the epilogue's buffers (present when used, F32,
  // sized for m and n, batch 1).
  GemmEpilogueArgs &e = call.epilogue;
  e.kind = g->epilogue();
  e.a = call.gemm.a;
  e.b = call.gemm.b;
  e.c = call.gemm.c;
  e.bias = g->bias() >= 0 ? arena.as<float>(g->bias()) : nullptr;
  e.aux = g->aux() >= 0 ? arena.as<float>(g->aux()) : nullptr;
  // With a bf16 C the verifier allows only Bias / BiasGelu, with a bf16
  // bias (widened before the epilogue) and a bf16 aux (written in fp32
  // scratch, rounded with C), and Dgelu, with a bf16 aux read (widened
  // before the epilogue): the epilogue runs on the fp32 accumulator and C
  // is rounded once, after it, as cuBLASLt rounds D.
  if (call.bf16C && g->bias() >= 0) {
    call.bf16Bias = arena.as<const uint16_t>(g->bias());
    call.wideBias.resize(g->n());
    e.bias = call.wideBias.data();
  }
  if (call.bf16C && g->aux() >= 0) {
    if (g->epilogue() == schema::GemmEpilogue_Dgelu)
      call.bf16AuxIn = arena.as<const uint16_t>(g->aux());
    else
      call.bf16Aux = arena.as<uint16_t>(g->aux());
    call.wideAux.resize(static_cast<size_t>(g->m()) * g->n());
    e.aux = call.wideAux.data();
  }
  e.m = call.gemm.m;
  e.n = call.gemm.n;
  e.k = call.gemm.k;
  e.transA = call.gemm.transA;
  e.transB = call.gemm.transB;
  return call;
}

StatusOr<std::unique_ptr<Executor>>
Executor::create(const Artifact &artifact, const KernelLibrary &kernels,
                 const Arena &arena, const MeshCommunicators *mesh,
                 bool commOverlap) {
  std::unique_ptr<Executor> executor(new Executor());
  for (int kind = 0; kind < kNumProgramKinds; ++kind) {
    const schema::Program *program =
        artifact.program(static_cast<ProgramKind>(kind));
    if (!program)
      continue;
    executor->programs_[kind].present = true;
    executor->programs_[kind].name = program->name()->str();
    executor->programs_[kind].rangeNames =
        nvtx::entryRangeNames(artifact, static_cast<ProgramKind>(kind));
    for (const schema::Step *step : *program->schedule()) {
      Call call = resolve(artifact, *step, kernels, arena);
      if (const schema::CollectiveCall *cc = step->op_as_CollectiveCall()) {
        // An axis of one rank: the collective is the identity (a copy).
        const std::string_view axis = cc->axis()->string_view();
        const int64_t ranks = artifact.axisRanks(axis);
        Communicator *comm = mesh && ranks > 1 ? mesh->forAxis(axis) : nullptr;
        if (ranks > 1 && (!comm || comm->size() != ranks))
          return failedPrecondition(
              artifact.name(), ": has collectives over ", artifact.ranks(),
              " ranks, but this process ",
              mesh && mesh->world ? detail::concat("is one of ", mesh->world->size())
                                  : std::string("runs alone"),
              " (launch it with `mpirun -np ", artifact.ranks(), " kiln-run ...`)");
        call.collective->comm = comm;
      }
      executor->programs_[kind].calls.push_back(std::move(call));
    }
    joinShardCollectives(executor->programs_[kind].calls);
    for (const Call &call : executor->programs_[kind].calls)
      if (call.collective && call.collective->overlap && call.collective->comm &&
          commOverlap && !executor->commThread_)
        executor->commThread_ = std::make_unique<CommThread>();
  }
  return executor;
}

Status Executor::run(ProgramKind kind) {
  Program &program = programs_[static_cast<int>(kind)];
  if (!program.present)
    return failedPrecondition("the artifact has no '",
                              kind == ProgramKind::kEval ? "eval" : "step",
                              "' program");
  ++program.runs;
  nvtx::ScopedRange range(program.name);
  TraceRecorder *trace = trace_ && trace_->active() ? trace_ : nullptr;
  if (!profiling_ && !trace) {
    // An overlapped collective runs on the communication thread while the
    // entries after it run here, up to the first that touches its buffers
    // (which waits), or the program's end. A collective run here waits
    // for the thread first: the ranks meet in the schedule's order, and
    // the library is called from one thread at a time.
    Status status = okStatus();
    bool pending = false;
    size_t waitAt = SIZE_MAX;
    for (size_t i = 0; i < program.calls.size() && status.ok(); ++i) {
      const Call &c = program.calls[i];
      if (pending && (i >= waitAt || (c.collective && !c.collective->overlap))) {
        status = commThread_->finish();
        pending = false;
        waitAt = SIZE_MAX;
        if (!status.ok())
          break;
      }
      nvtx::ScopedRange entry(program.rangeNames[i]);
      if (commThread_ && c.collective && c.collective->overlap) {
        if (!c.collective->joined) {
          const Collective *collectiveCall = &*c.collective;
          commThread_->submit([this, collectiveCall] { return collective(*collectiveCall); });
          pending = true;
          waitAt = std::min(waitAt, c.collective->until);
        }
        continue;
      }
      status = call(c);
    }
    Status communicated = pending ? commThread_->finish() : okStatus();
    KILN_RETURN_IF_ERROR(status);
    return communicated;
  }
  // Profiled or traced: every entry on its own, timed where it runs.
  if (profiling_) {
    program.timing.seconds.resize(program.calls.size(), 0.0);
    ++program.timing.runs;
  }
  // On the trace's clock when tracing, else any steady clock: both count
  // seconds.
  auto clock = [&] {
    return trace ? trace->now()
                 : std::chrono::duration<double>(
                       std::chrono::steady_clock::now().time_since_epoch())
                       .count();
  };
  double runStart = clock();
  for (size_t i = 0; i < program.calls.size(); ++i) {
    double start = clock();
    {
      nvtx::ScopedRange entry(program.rangeNames[i]);
      KILN_RETURN_IF_ERROR(call(program.calls[i]));
    }
    double end = clock();
    if (profiling_)
      program.timing.seconds[i] += end - start;
    if (trace)
      trace->entry(kind, i, start, end);
  }
  if (trace)
    trace->program(kind, runStart, clock());
  return okStatus();
}

void Executor::joinShardCollectives(std::vector<Call> &calls) {
  Collective *lead = nullptr;
  for (Call &call : calls) {
    Collective *c = call.collective ? &*call.collective : nullptr;
    bool joins = c && lead && c->kind == lead->kind && c->reduction == lead->reduction &&
                 c->overlap == lead->overlap && c->comm == lead->comm &&
                 (c->kind == schema::CollectiveKind_ReduceScatter ||
                  c->kind == schema::CollectiveKind_AllGather);
    // Not when it reads what an earlier part of the run writes.
    if (joins) {
      size_t total = c->parts.front().slice;
      for (const ShardPart &earlier : lead->parts)
        total += earlier.slice;
      joins = total <= kPackedFloats;
    }
    if (joins) {
      const size_t ranks = c->comm ? static_cast<size_t>(c->comm->size()) : 1;
      const bool scatter = c->kind == schema::CollectiveKind_ReduceScatter;
      const ShardPart &part = c->parts.front();
      const float *in = part.in, *inEnd = in + part.slice * (scatter ? ranks : 1);
      for (const ShardPart &earlier : lead->parts) {
        const float *out = earlier.out, *outEnd = out + earlier.slice * (scatter ? 1 : ranks);
        if (in < outEnd && out < inEnd)
          joins = false;
      }
    }
    if (joins) {
      lead->parts.push_back(c->parts.front());
      lead->until = std::min(lead->until, c->until); // done before any part is read
      c->joined = true;
      continue;
    }
    lead = c;
  }
}

Status Executor::collective(const Collective &c) {
  if (c.joined)
    return okStatus(); // its part went with the first of its run
  // Without a communicator the axis has one rank (Executor::create): a
  // sum or mean over it is the value itself, its one slice the whole.
  Communicator *comm = c.comm;
  const size_t rank = comm ? static_cast<size_t>(comm->rank()) : 0;
  switch (c.kind) {
  case schema::CollectiveKind_AllReduce:
    if (comm)
      for (auto [data, elements] : c.buffers)
        KILN_RETURN_IF_ERROR(comm->allReduce(data, elements, c.reduction));
    return okStatus();
  case schema::CollectiveKind_ReduceScatter:
  case schema::CollectiveKind_AllGather:
    if (!comm) {
      for (const ShardPart &p : c.parts)
        std::copy_n(p.in, p.slice, p.out);
      return okStatus();
    }
    if (c.parts.size() > 1)
      return packedCollective(c);
    return c.kind == schema::CollectiveKind_ReduceScatter
               ? comm->reduceScatter(c.parts[0].in, c.parts[0].out,
                                     c.parts[0].slice, c.reduction)
               : comm->allGatherInto(c.parts[0].in, c.parts[0].out,
                                     c.parts[0].slice);
  case schema::CollectiveKind_LocalShard:
    for (const ShardPart &p : c.parts)
      std::copy_n(p.in + rank * p.slice, p.slice, p.out);
    return okStatus();
  }
  return internalError("unknown collective kind ", int(c.kind));
}

Status Executor::packedCollective(const Collective &c) {
  // One flat tensor of every part: rank r's share is each part's slice r,
  // part after part, so one library call moves them all.
  Communicator *comm = c.comm;
  const size_t ranks = static_cast<size_t>(comm->size());
  size_t total = 0;
  for (const ShardPart &p : c.parts)
    total += p.slice;
  stagingIn_.resize(c.kind == schema::CollectiveKind_ReduceScatter ? total * ranks : total);
  stagingOut_.resize(c.kind == schema::CollectiveKind_ReduceScatter ? total : total * ranks);
  if (c.kind == schema::CollectiveKind_ReduceScatter) {
    for (size_t r = 0, at = 0; r < ranks; ++r)
      for (const ShardPart &p : c.parts) {
        std::copy_n(p.in + r * p.slice, p.slice, stagingIn_.data() + at);
        at += p.slice;
      }
    KILN_RETURN_IF_ERROR(comm->reduceScatter(stagingIn_.data(), stagingOut_.data(),
                                             total, c.reduction));
    size_t at = 0;
    for (const ShardPart &p : c.parts) {
      std::copy_n(stagingOut_.data() + at, p.slice, p.out);
      at += p.slice;
    }
    return okStatus();
  }
  size_t at = 0;
  for (const ShardPart &p : c.parts) {
    std::copy_n(p.in, p.slice, stagingIn_.data() + at);
    at += p.slice;
  }
  KILN_RETURN_IF_ERROR(comm->allGatherInto(stagingIn_.data(), stagingOut_.data(), total));
  at = 0;
  for (size_t r = 0; r < ranks; ++r)
    for (const ShardPart &p : c.parts) {
      std::copy_n(stagingOut_.data() + at, p.slice, p.out + r * p.slice);
      at += p.slice;
    }
  return okStatus();
}

Status Executor::call(const Call &call) {
  if (call.kernel) {
    call.kernel(call.buffers.data());
    return okStatus();
  }
  if (call.collective)
    return collective(*call.collective);
  // C[b] = op(A[b]) * op(B[b]), row-major. Leading dimensions are those of
  // the stored (untransposed) matrices: A is [M,K] or [K,M], B is [K,N] or
  // [N,K], C is [M,N].
  if (call.bf16A) {
    widenBf16(call.bf16A, call.wideA.data(), call.wideA.size());
    widenBf16(call.bf16B, call.wideB.data(), call.wideB.size());
  }
  const GemmArgs &g = call.gemm;
  int lda = g.transA ? g.m : g.k;
  int ldb = g.transB ? g.k : g.n;
  for (int64_t b = 0; b < g.batch; ++b) {
    cblas_sgemm(CblasRowMajor, g.transA ? CblasTrans : CblasNoTrans,
                g.transB ? CblasTrans : CblasNoTrans, g.m, g.n, g.k, 1.0f,
                g.a + b * g.strideA, lda, g.b + b * g.strideB, ldb, g.beta,
                g.c + b * g.strideC, g.n);
  }
  if (call.bf16Bias)
    widenBf16(call.bf16Bias, call.wideBias.data(), call.wideBias.size());
  if (call.bf16AuxIn)
    widenBf16(call.bf16AuxIn, call.wideAux.data(), call.wideAux.size());
  applyGemmEpilogue(call.epilogue);
  if (call.bf16C)
    for (int64_t b = 0; b < g.batch; ++b)
      narrowToBf16(g.c + b * g.strideC, call.bf16C + b * g.strideC,
                   static_cast<size_t>(g.m) * g.n);
  if (call.bf16Aux)
    narrowToBf16(call.wideAux.data(), call.bf16Aux, call.wideAux.size());
  return okStatus();
}

} // namespace kiln::rt::cpu
