//===- CpuKernelEmitter.cpp - C++ CPU kernels for groups of kiln ops ------===//
//
// Pointwise groups become one flat loop over the output:
//
//   for (int64_t i = 0; i < N; ++i) {      // N = elements of the output
//     const float v0 = <load or broadcast load of an input>;
//     const float v1 = <ScalarExprEmitter expression of op 1 over v0 ...>;
//     out0[i] = v1;
//   }
//
// The per-element statements come from PointwiseStatements (shared with
// the CUDA emitter through PointwiseBody): broadcasts inside a group read
// their (external) input with the index arithmetic of the static shapes baked
// in. A row op (layer_norm, softmax, ...) with pointwise ops runs them per
// row inside its own row loop; several optimizer updates run one after the
// other. Every other op gets a bespoke loop nest from CpuBespokeKernels.cpp.
//
//===----------------------------------------------------------------------===//

#include "codegen/CpuKernelEmitter.h"

#include "codegen/CpuBespokeKernels.h"
#include "codegen/KernelSourceWriter.h"
#include "codegen/PointwiseBody.h"
#include "codegen/PointwiseStatements.h"
#include "codegen/RowGroup.h"
#include "codegen/ScalarExprEmitter.h"

#include "ir/KilnOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
namespace k = mlir::kiln;

namespace kiln {

KernelGroup KernelGroup::forOp(Operation *op) {
  KernelGroup group;
  group.ops.push_back(op);
  for (Value v : op->getOperands())
    if (!llvm::is_contained(group.inputs, v))
      group.inputs.push_back(v);
  for (Value v : op->getResults())
    group.outputs.push_back(v);
  return group;
}

namespace {

// One flat loop over the output, one scalar expression per op.
FailureOr<CpuKernel> emitPointwiseGroup(const KernelGroup &group) {
  KernelSourceWriter w(group);
  if (failed(w.declareBuffers()))
    return failure();
  FailureOr<PointwiseBody> body = PointwiseBody::build(group, w, "i");
  if (failed(body))
    return failure();
  int64_t n = body->elements;
  w.line("// " + std::to_string(n) + " elements, one per iteration");
  w.parallelFor(n * static_cast<int64_t>(group.ops.size()));
  w.open("for (int64_t i = 0; i < " + std::to_string(n) + "; ++i)");
  for (const std::string &statement : body->statements)
    w.line(statement);
  for (const std::string &store : body->stores)
    w.line(store);
  w.close();
  // Broadcasts, iota and causal masks compute other indices than i; without
  // them every load and store of the loop above is element i
  // (isElementwiseGroup).
  return w.finish();
}

// A row op with pointwise ops before it (prologue: computed per row at the
// top of its row loop, the values it reads written to their buffers first)
// and after it (epilogue: computed per row at the bottom of the loop from the
// row output it just wrote); RowGroup checks the group.
// kiln.fusion sum: the pointwise statements of each element, then the
// element added to the total, in the order of the CPU's whole-tensor
// kiln.reduce_sum (64 fixed chunks in parallel, combined in order; one pass
// below kParallelWork), so fusing it changes no bit.
// One chain's total (all of a single sum's kernel; a scope of its own in a
// multi-tensor one), into the buffers `w` declared.
LogicalResult emitSumChain(const KernelGroup &chain, KernelSourceWriter &w) {
  FailureOr<PointwiseBody> body = PointwiseBody::buildSum(chain, w, "r");
  if (failed(body))
    return failure();
  const std::string n = std::to_string(body->elements);
  auto element = [&] {
    for (const std::string &statement : body->statements)
      w.line(statement);
    for (const std::string &store : body->stores)
      w.line(store);
    w.line("acc += " + body->summand + ";");
  };
  w.line("// " + n + " elements summed as they are computed");
  if (body->elements >= kParallelWork) {
    w.line("double partial[64];");
    w.line("#pragma omp parallel for schedule(static)");
    w.open("for (int64_t c = 0; c < 64; ++c)");
    w.line("double acc = 0;");
    w.open("for (int64_t r = " + n + " * c / 64; r < " + n + " * (c + 1) / 64; ++r)");
    element();
    w.close();
    w.line("partial[c] = acc;");
    w.close();
    w.line("double acc = 0;");
    w.line("for (int64_t c = 0; c < 64; ++c) acc += partial[c];");
  } else {
    w.line("double acc = 0;");
    w.open("for (int64_t r = 0; r < " + n + "; ++r)");
    element();
    w.close();
  }
  w.line(w.ptr(body->total) + "[0] = (float)acc;");
  return success();
}

// kiln.fusion sum: per chain (PointwiseBody::sumChains; several in a
// multi-tensor kernel, one after the other), the pointwise statements of
// each element, then the element added to the total, in the order of the
// CPU's whole-tensor kiln.reduce_sum (64 fixed chunks in parallel, combined
// in order; one pass below kParallelWork), so fusing it changes no bit.
FailureOr<CpuKernel> emitSumGroup(const KernelGroup &group) {
  KernelSourceWriter w(group);
  if (failed(w.declareBuffers()))
    return failure();
  SmallVector<KernelGroup> chains = PointwiseBody::sumChains(group);
  if (chains.size() == 1) {
    if (failed(emitSumChain(group, w)))
      return failure();
    return w.finish();
  }
  w.line("// " + std::to_string(chains.size()) + " whole-tensor sums in one kernel");
  for (const KernelGroup &chain : chains) {
    w.open("");
    if (failed(emitSumChain(chain, w)))
      return failure();
    w.close();
  }
  return w.finish();
}

FailureOr<CpuKernel> emitRowGroup(const KernelGroup &group) {
  FailureOr<RowGroup> parts = RowGroup::split(group);
  if (failed(parts))
    return failure();
  Operation *rowOp = parts->rowOp;
  ArrayRef<Operation *> prologue = parts->prologue, epilogue = parts->epilogue;
  KernelSourceWriter w(group);
  if (failed(w.declareBuffers()))
    return failure();
  bool began = false, ended = false, failedPart = false;
  // With an element epilogue the row op hands each element of its result 0
  // to the epilogue as it computes it (rowElement); endRow has nothing left.
  bool elementEpilogue = parts->elementEpilogue;
  w.setRowHooks(
      [&](StringRef row, int64_t length) {
        began = true;
        failedPart |= failed(emitRowPart(w, group, prologue, row, length, "0", "1"));
      },
      [&](StringRef row, int64_t length) {
        ended = true;
        if (!elementEpilogue)
          failedPart |= failed(emitRowPart(w, group, epilogue, row, length, "0", "1"));
      });
  w.setRowElementHook([&](Value result, StringRef index, StringRef value) {
    failedPart |= failed(emitRowElement(
        w, &group, elementEpilogue ? epilogue : ArrayRef<Operation *>(), result, value,
        RowElementAccess{index.str(), nullptr, nullptr}));
  });
  if (failed(emitBespokeCpuKernel(rowOp, w)) || failedPart)
    return failure();
  if ((!prologue.empty() && !began) || (!epilogue.empty() && !ended))
    return rowOp->emitError() << "has no row loop to fuse a prologue or "
                                 "epilogue into";
  return w.finish();
}

// Several optimizer updates, one after the other, each in a lambda of its
// own: an update's early `return` (skipped step) ends only its own part.
FailureOr<CpuKernel> emitOptimizerGroup(const KernelGroup &group) {
  KernelSourceWriter w(group);
  if (failed(w.declareBuffers()))
    return failure();
  w.line("// " + std::to_string(group.ops.size()) +
         " optimizer updates in one kernel");
  for (Operation *op : group.ops) {
    w.open("[&]()");
    if (failed(emitBespokeCpuKernel(op, w)))
      return failure();
    w.close("();");
  }
  return w.finish();
}

} // namespace

bool isElementwiseGroup(const KernelGroup &group) {
  if (group.outputs.empty() ||
      !llvm::all_of(group.ops, PointwiseBody::isPointwise))
    return false;
  int64_t n = numElements(shapeOf(group.outputs.front()));
  auto sameSize = [&](Value v) { return numElements(shapeOf(v)) == n; };
  return llvm::none_of(group.ops,
                       [](Operation *op) {
                         return isa<k::BroadcastOp, k::IotaOp,
                                    k::CausalMaskOp>(op);
                       }) &&
         llvm::all_of(group.inputs, sameSize) &&
         llvm::all_of(group.outputs, sameSize);
}

bool writesInPlace(const KernelGroup &group) {
  if (isElementwiseGroup(group))
    return true;
  if (group.ops.size() != 1 || !isa<k::CrossEntropyGradOp>(group.ops.front()))
    return false;
  // One class: the targets [N] and the gradient [N, 1] have as many
  // elements, and a target's row is not behind a barrier.
  ArrayRef<int64_t> logits = shapeOf(group.ops.front()->getOperand(0));
  return !logits.empty() && logits.back() > 1;
}

bool CpuKernelEmitter::isPointwise(Operation *op) {
  return PointwiseBody::isPointwise(op);
}

bool CpuKernelEmitter::supports(Operation *op) {
  return isPointwise(op) || hasBespokeCpuKernel(op);
}

FailureOr<CpuKernel> CpuKernelEmitter::emit(const KernelGroup &group) {
  if (group.ops.empty())
    return failure();
  for (Operation *op : group.ops)
    if (!supports(op))
      return op->emitError() << "codegen has no CPU kernel for '"
                             << op->getName() << "'";
  if (llvm::all_of(group.ops, isPointwise))
    return emitPointwiseGroup(group);
  if (group.ops.size() > 1 && llvm::all_of(group.ops, hasOptimizerCpuKernel))
    return emitOptimizerGroup(group);
  if (PointwiseBody::isSumGroup(group))
    return emitSumGroup(group);
  if (group.ops.size() > 1)
    return emitRowGroup(group);
  KernelSourceWriter w(group);
  if (failed(w.declareBuffers()) ||
      failed(emitBespokeCpuKernel(group.ops.front(), w)))
    return failure();
  return w.finish();
}

FailureOr<CpuKernel> CpuKernelEmitter::emitCopy(RankedTensorType type) {
  std::string t = cElementType(type.getElementType());
  if (t.empty() || !type.hasStaticShape())
    return failure();
  std::string n = std::to_string(numElements(type.getShape()));
  std::string text =
      "// copy of " + shapeString(type.getShape()) + " " + t + "\n" +
      "extern \"C\" void " + kEntryPlaceholder.str() +
      "(void* const* buffers) {\n" + "  const " + t + "* src = (const " + t +
      "*)buffers[0];\n" + "  " + t + "* dst = (" + t + "*)buffers[1];\n" +
      "  memcpy(dst, src, " + n + " * sizeof(" + t + "));\n}\n";
  return nameKernel(std::move(text), "copy", "copy");
}

const char *CpuKernelEmitter::prelude() {
  return R"(// Kiln generated CPU kernels. Shared prelude.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

// tanh through expf: glibc's expf is several times faster than its tanhf and
// this is within ~1e-7 absolute of tanh, which is what GELU needs (it adds t
// to 1 or multiplies 1 - t*t); |x| > 10 is +-1 in float32 anyway.
static inline float kiln_tanh(float x) {
  const float a = fabsf(x);
  if (a > 10.0f)
    return copysignf(1.0f, x);
  const float e = expf(2.0f * a);
  return copysignf(1.0f - 2.0f / (e + 1.0f), x);
}

// bf16 as raw bits: the top half of the float's bits, rounded to nearest
// even; any NaN becomes the canonical NaN 0x7fff instead of rounding into
// infinity (the GPU's cvt.rn.bf16.f32 rule).
static inline uint16_t kiln_f32_to_bf16(float x) {
  uint32_t bits;
  memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)0x7fffu;
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return (uint16_t)(bits >> 16);
}

static inline float kiln_bf16_to_f32(uint16_t h) {
  const uint32_t bits = (uint32_t)h << 16;
  float x;
  memcpy(&x, &bits, sizeof x);
  return x;
}

// `v` exactly as a store and a reload would give it: the compiler cannot
// contract the operation that made it with the next one into an FMA (a row
// op's result handed to its fused epilogue in a register).
static inline float kiln_no_contract(float v) {
#if defined(__GNUC__) && defined(__x86_64__)
  __asm__("" : "+x"(v));
#elif defined(__GNUC__) && defined(__aarch64__)
  __asm__("" : "+w"(v));
#else
  volatile float stored = v;
  v = stored;
#endif
  return v;
}

// GPT-2's GELU: 0.5 x (1 + tanh(s (x + c x^3))), s = sqrt(2/pi), c = 0.044715.
static inline float kiln_gelu(float x) {
  const float t = kiln_tanh(0.7978845608028654f * (x + 0.044715f * x * x * x));
  return 0.5f * x * (1.0f + t);
}

// d/dx gelu(x) * g = (0.5 (1 + t) + 0.5 x (1 - t^2) s (1 + 3 c x^2)) * g.
static inline float kiln_gelu_grad(float x, float g) {
  const float t = kiln_tanh(0.7978845608028654f * (x + 0.044715f * x * x * x));
  return (0.5f * (1.0f + t) +
          0.5f * x * (1.0f - t * t) * 0.7978845608028654f *
              (1.0f + 3.0f * 0.044715f * x * x)) * g;
}
)";
}

} // namespace kiln
