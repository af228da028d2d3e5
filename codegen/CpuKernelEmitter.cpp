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
// The per-element statements come from PointwiseBody (shared with the CUDA
// emitter): broadcasts inside a group read their (external) input with the
// index arithmetic of the static shapes baked in. Every other op gets a
// bespoke loop nest from CpuBespokeKernels.cpp.
//
//===----------------------------------------------------------------------===//

#include "codegen/CpuKernelEmitter.h"

#include "codegen/CpuBespokeKernels.h"
#include "codegen/KernelSourceWriter.h"
#include "codegen/PointwiseBody.h"

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
  return w.finish();
}

} // namespace

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
  if (group.ops.size() != 1)
    return group.ops.front()->emitError()
           << "only pointwise ops can share a kernel";
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
