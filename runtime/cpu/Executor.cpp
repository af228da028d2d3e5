//===- Executor.cpp - Runs the programs of a verified artifact ------------===//

#include "runtime/cpu/Executor.h"

#include <cblas.h>
#include <chrono>

namespace kiln::rt::cpu {

Executor::Call Executor::resolve(const schema::Step &step,
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
                       g->trans_b()};
  return call;
}

Executor::Executor(const Artifact &artifact, const KernelLibrary &kernels,
                   const Arena &arena) {
  for (int kind = 0; kind < kNumProgramKinds; ++kind) {
    const schema::Program *program =
        artifact.program(static_cast<ProgramKind>(kind));
    if (!program)
      continue;
    programs_[kind].present = true;
    for (const schema::Step *step : *program->schedule())
      programs_[kind].calls.push_back(resolve(*step, kernels, arena));
  }
}

Status Executor::run(ProgramKind kind) {
  Program &program = programs_[static_cast<int>(kind)];
  if (!program.present)
    return failedPrecondition("the artifact has no '",
                              kind == ProgramKind::kEval ? "eval" : "step",
                              "' program");
  ++program.runs;
  if (!profiling_) {
    for (const Call &c : program.calls)
      call(c);
    return okStatus();
  }
  program.seconds.resize(program.calls.size(), 0.0);
  for (size_t i = 0; i < program.calls.size(); ++i) {
    auto start = std::chrono::steady_clock::now();
    call(program.calls[i]);
    program.seconds[i] += std::chrono::duration<double>(
                              std::chrono::steady_clock::now() - start)
                              .count();
  }
  return okStatus();
}

void Executor::call(const Call &call) {
  if (call.kernel) {
    call.kernel(call.buffers.data());
    return;
  }
  // C[b] = op(A[b]) * op(B[b]), row-major. Leading dimensions are those of
  // the stored (untransposed) matrices: A is [M,K] or [K,M], B is [K,N] or
  // [N,K], C is [M,N].
  const GemmArgs &g = call.gemm;
  int lda = g.transA ? g.m : g.k;
  int ldb = g.transB ? g.k : g.n;
  for (int64_t b = 0; b < g.batch; ++b) {
    cblas_sgemm(CblasRowMajor, g.transA ? CblasTrans : CblasNoTrans,
                g.transB ? CblasTrans : CblasNoTrans, g.m, g.n, g.k, 1.0f,
                g.a + b * g.strideA, lda, g.b + b * g.strideB, ldb, 0.0f,
                g.c + b * g.strideC, g.n);
  }
}

} // namespace kiln::rt::cpu
