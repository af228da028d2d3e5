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
// Broadcasts inside a group read their (external) input with the index
// arithmetic of the static shapes baked in. Every other op gets a bespoke loop
// nest from CpuBespokeKernels.cpp.
//
//===----------------------------------------------------------------------===//

#include "codegen/CpuKernelEmitter.h"

#include "codegen/CpuBespokeKernels.h"
#include "codegen/KernelSourceWriter.h"
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

bool isSplatConstant(Operation *op) {
  auto constant = dyn_cast<k::ConstantOp>(op);
  if (!constant)
    return false;
  auto value = constant->getAttrOfType<DenseElementsAttr>("value");
  return value && value.isSplat();
}

// The C literal of a splat constant.
std::string splatLiteral(Operation *op) {
  auto value = op->getAttrOfType<DenseElementsAttr>("value");
  if (isa<FloatType>(value.getElementType()))
    return ScalarExprEmitter::floatLiteral(
        value.getSplatValue<APFloat>().convertToDouble());
  return "((" + cElementType(value.getElementType()) + ")" +
         std::to_string(value.getSplatValue<APInt>().getSExtValue()) + "LL)";
}

// The flat index into `input` (shape `in`) of output element `i` of a
// broadcast to `out` that maps input dim j to output dim dims[j].
std::string broadcastIndex(ArrayRef<int64_t> in, ArrayRef<int64_t> out,
                           ArrayRef<int64_t> dims) {
  SmallVector<int64_t> outStrides = rowMajorStrides(out);
  SmallVector<int64_t> inStrides = rowMajorStrides(in);
  std::string sum;
  for (size_t j = 0; j < in.size(); ++j) {
    if (in[j] == 1)
      continue;
    int64_t d = dims[j];
    addTerm(sum, coordinate("i", outStrides[d], out[d], d == 0), inStrides[j]);
  }
  return sum.empty() ? "0" : sum;
}

// One flat loop over the output, one scalar expression per op.
FailureOr<CpuKernel> emitPointwiseGroup(const KernelGroup &group) {
  KernelSourceWriter w(group);
  if (failed(w.declareBuffers()))
    return failure();
  if (group.outputs.empty())
    return group.ops.front()->emitError() << "a kernel needs an output";
  int64_t n = numElements(shapeOf(group.outputs.front()));
  for (Operation *op : group.ops)
    if (numElements(shapeOf(op->getResult(0))) != n)
      return op->emitError()
             << "pointwise ops of one kernel must all produce " << n
             << " elements";

  llvm::DenseMap<Value, std::string> vars;
  auto load = [&](Value v) -> std::string {
    auto it = vars.find(v);
    if (it != vars.end())
      return it->second;
    return w.ptr(v) + "[i]";
  };

  w.line("// " + std::to_string(n) + " elements, one per iteration");
  w.parallelFor(n * static_cast<int64_t>(group.ops.size()));
  w.open("for (int64_t i = 0; i < " + std::to_string(n) + "; ++i)");
  for (Operation *op : group.ops) {
    Value result = op->getResult(0);
    std::string expr;
    if (auto bcast = dyn_cast<k::BroadcastOp>(op)) {
      Value input = op->getOperand(0);
      auto dims = op->getAttrOfType<DenseI64ArrayAttr>("dims");
      if (vars.count(input)) {
        if (shapeOf(input) != shapeOf(result))
          return op->emitError()
                 << "cannot broadcast a value computed in the same kernel";
        expr = vars[input];
      } else {
        expr = w.ptr(input) + "[" +
               broadcastIndex(shapeOf(input), shapeOf(result),
                              dims.asArrayRef()) +
               "]";
      }
    } else if (isSplatConstant(op)) {
      expr = splatLiteral(op);
    } else if (isa<k::IotaOp>(op)) {
      expr = "(" + w.cType(result) + ")i";
    } else if (isa<k::CausalMaskOp>(op)) {
      // Element (r, c) of the trailing [T, S] matrix is masked when
      // c > r + (S - T).
      ArrayRef<int64_t> shape = shapeOf(result);
      if (shape.size() < 2)
        return op->emitError() << "causal_mask needs rank >= 2";
      int64_t t = shape[shape.size() - 2], s = shape.back();
      double fill = op->getAttrOfType<FloatAttr>("fill").getValueAsDouble();
      std::string col = coordinate("i", 1, s, false);
      std::string row = coordinate("i", s, t, shape.size() == 2);
      expr = "((" + col + " > " + row + " + " + std::to_string(s - t) +
             ") ? " + ScalarExprEmitter::floatLiteral(fill) + " : " +
             load(op->getOperand(0)) + ")";
    } else {
      SmallVector<std::string> operands;
      for (Value v : op->getOperands())
        operands.push_back(load(v));
      FailureOr<std::string> e = ScalarExprEmitter::emit(op, operands);
      if (failed(e))
        return op->emitError() << "no scalar expression for this op";
      expr = *e;
    }
    std::string var = "v" + std::to_string(vars.size());
    w.line("const " + w.cType(result) + " " + var + " = " + expr + "; // " +
           op->getName().getStringRef());
    vars[result] = var;
  }
  for (Value out : group.outputs) {
    auto it = vars.find(out);
    if (it == vars.end())
      return group.ops.front()->emitError()
             << "a kernel output is not computed by the kernel's ops";
    w.line(w.ptr(out) + "[i] = " + it->second + ";");
  }
  w.close();
  CpuKernel kernel = w.finish();
  // Broadcasts, iota and causal masks compute other indices than i; without
  // them every load and store of the loop above is element i.
  auto sameSize = [&](Value v) { return numElements(shapeOf(v)) == n; };
  kernel.elementwise =
      llvm::none_of(group.ops,
                    [](Operation *op) {
                      return isa<k::BroadcastOp, k::IotaOp, k::CausalMaskOp>(op);
                    }) &&
      llvm::all_of(group.inputs, sameSize) &&
      llvm::all_of(group.outputs, sameSize);
  return kernel;
}

} // namespace

bool CpuKernelEmitter::isPointwise(Operation *op) {
  return ScalarExprEmitter::isElementwise(op) || isSplatConstant(op) ||
         isa<k::BroadcastOp, k::IotaOp, k::CausalMaskOp>(op);
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
