//===- GemmEpilogue.h - A GemmCall's epilogue on the CPU, after sgemm -----===//
//
// What a fused GEMM (kiln.fusion gemm) does after its product, with the
// formulas of the unfused kernels it replaces, so that fused and unfused
// artifacts agree: the bias add of kiln.add, kiln_gelu / kiln_gelu_grad of
// the generated prelude (tanh through expf, same operation order), and the
// bias gradient of kiln.reduce_sum (a double accumulator per output, summed
// in index order, rounded to float once).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPU_GEMMEPILOGUE_H
#define KILN_RUNTIME_CPU_GEMMEPILOGUE_H

#include "runtime/schema/artifact_generated.h"

namespace kiln::rt::cpu {

// One GEMM's epilogue operands (the verifier checked their sizes: bias [N],
// or [M] for BgradA; aux [M, N]; batch 1).
struct GemmEpilogueArgs {
  schema::GemmEpilogue kind = schema::GemmEpilogue_None;
  const float *a = nullptr, *b = nullptr; // fp32 operands (widened if bf16)
  float *c = nullptr;                     // [M, N], holds the product P
  float *bias = nullptr;                  // read or written, see artifact.fbs
  float *aux = nullptr;                   // read or written; may be null for
                                          // Gelu / BiasGelu (not kept)
  int m = 0, n = 0, k = 0;
  bool transA = false, transB = false;
};

// Applies `args.kind` in place on C (and bias / aux). None does nothing.
void applyGemmEpilogue(const GemmEpilogueArgs &args);

// The generated kernels' GELU and its gradient (CpuKernelEmitter prelude).
float geluTanh(float x);
float geluTanhGrad(float x, float g);

} // namespace kiln::rt::cpu

#endif // KILN_RUNTIME_CPU_GEMMEPILOGUE_H
