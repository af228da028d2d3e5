//===- RopeKernel.cpp - kiln.rope's kernel on both targets ----------------===//

#include "codegen/RopeKernel.h"

#include "codegen/CudaBespokeKernels.h"
#include "codegen/KernelSourceWriter.h"
#include "codegen/ScalarExprEmitter.h"

#include "ir/KilnOps.h"

namespace kiln {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

// `{f0, f1, ...}`: the frequency table as float literals.
std::string frequencyTable(mlir::kiln::RopeOp rope) {
  std::string list;
  for (float f : rope.getInvFreq())
    list += (list.empty() ? "" : ", ") + ScalarExprEmitter::floatLiteral(f);
  return "{" + list + "}";
}

// The statements for element `i` (a loop variable) of `rope`, reading the
// table `freq`.
void writeElement(mlir::kiln::RopeOp rope, KernelSourceWriter &w, llvm::StringRef freq) {
  llvm::ArrayRef<int64_t> shape = shapeOf(rope.getInput());
  const int64_t d = shape.back(), t = shape[shape.size() - 2], half = d / 2;
  mlir::Value x = rope.getInput(), y = rope.getResult();
  w.line("const int64_t f = i % " + str(d) + ";");
  w.line("const bool low = f < " + str(half) + ";");
  w.line("const float a = (float)((i / " + str(d) + ") % " + str(t) + ") * " + freq.str() +
         "[low ? f : f - " + str(half) + "];");
  w.line("const float c = cosf(a), s = " + std::string(rope.getInverse() ? "-" : "") +
         "sinf(a);");
  w.line("const float xi = " + w.load(x, "i") + ";");
  w.line("const float xp = low ? " + w.load(x, "i + " + str(half)) + " : " +
         w.load(x, "i - " + str(half)) + ";");
  w.line(w.store(y, "i", "low ? xi * c - xp * s : xi * c + xp * s"));
}

std::string describe(mlir::kiln::RopeOp rope) {
  return std::string("// rope") + (rope.getInverse() ? " (inverse)" : "") + " over " +
         shapeString(shapeOf(rope.getInput())) + ", pairs (i, i + D/2)";
}

} // namespace

mlir::LogicalResult emitRopeCpu(mlir::Operation *op, KernelSourceWriter &w) {
  auto rope = mlir::cast<mlir::kiln::RopeOp>(op);
  int64_t n = numElements(shapeOf(rope.getInput()));
  w.line(describe(rope));
  w.line("static const float freq[" + str(rope.getInvFreq().size()) + "] = " +
         frequencyTable(rope) + ";");
  w.parallelFor(n);
  w.open("for (int64_t i = 0; i < " + str(n) + "; ++i)");
  writeElement(rope, w, "freq");
  w.close();
  return mlir::success();
}

mlir::LogicalResult emitRopeCuda(mlir::Operation *op, KernelSourceWriter &w,
                                 CudaLaunch &launch) {
  auto rope = mlir::cast<mlir::kiln::RopeOp>(op);
  int64_t n = numElements(shapeOf(rope.getInput()));
  std::string freq = std::string(kEntryPlaceholder) + "_freq";
  // In constant memory: every thread of a warp reads the same few entries.
  w.global("__constant__ float " + freq + "[" + str(rope.getInvFreq().size()) + "] = " +
           frequencyTable(rope) + ";");
  launch = {cudaGridFor(n, kCudaBlock), kCudaBlock, 0};
  w.line(describe(rope));
  openGridStrideLoop(w, n);
  writeElement(rope, w, freq);
  w.close();
  return mlir::success();
}

} // namespace kiln
