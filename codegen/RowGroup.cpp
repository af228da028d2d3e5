//===- RowGroup.cpp - A row op with its pointwise prologue and epilogue ---===//

#include "codegen/RowGroup.h"

#include "codegen/KernelSourceWriter.h"
#include "codegen/PointwiseBody.h"
#include "codegen/PointwiseStatements.h"

#include "ir/KilnOps.h"

using namespace mlir;

namespace kiln {

FailureOr<RowGroup> RowGroup::split(const KernelGroup &group) {
  RowGroup parts;
  for (Operation *op : group.ops) {
    if (PointwiseBody::isPointwise(op)) {
      (parts.rowOp ? parts.epilogue : parts.prologue).push_back(op);
      continue;
    }
    if (parts.rowOp)
      return op->emitError() << "a row kernel holds one row op and "
                                "pointwise ops only";
    parts.rowOp = op;
  }
  if (!parts.rowOp)
    return group.ops.front()->emitError() << "a row kernel needs a row op";
  Operation *rowOp = parts.rowOp;
  auto rowInterface = dyn_cast<mlir::kiln::RowOpInterface>(rowOp);
  parts.elementEpilogue = rowInterface && rowInterface.hasElementEpilogue();
  int64_t n = numElements(shapeOf(rowOp->getOperand(0)));
  auto isBuffer = [&](Value v) {
    return llvm::is_contained(group.inputs, v) ||
           llvm::is_contained(group.outputs, v);
  };
  for (ArrayRef<Operation *> part : {ArrayRef<Operation *>(parts.prologue),
                                     ArrayRef<Operation *>(parts.epilogue)})
    for (Operation *op : part) {
      if (numElements(shapeOf(op->getResult(0))) != n)
        return op->emitError() << "must produce " << n
                               << " elements, one per element of the row "
                                  "op's input";
      for (Value v : op->getOperands()) {
        Operation *def = v.getDefiningOp();
        bool inPart = def && llvm::is_contained(part, def);
        // Only an epilogue can read it (the prologue runs before the row op).
        bool inRegister = parts.elementEpilogue && v == rowOp->getResult(0);
        if (!inPart && !inRegister && !isBuffer(v))
          return op->emitError() << "reads a value the row kernel keeps in "
                                    "no buffer";
      }
    }
  for (Value v : rowOp->getOperands())
    if (!isBuffer(v))
      return rowOp->emitError() << "reads a prologue value that is not an "
                                   "output of the kernel";
  return parts;
}

LogicalResult emitRowPart(KernelSourceWriter &w, const KernelGroup &group,
                          ArrayRef<Operation *> ops, StringRef row,
                          int64_t length, StringRef first, StringRef step) {
  if (ops.empty())
    return success();
  PointwiseStatements code;
  if (failed(emitPointwiseStatements(ops, "i", [&](Value v) { return w.ptr(v); },
                                     code)))
    return failure();
  std::string len = std::to_string(length);
  w.open("for (int64_t e = " + first + "; e < " + len + "; " +
         (step == "1" ? std::string("++e") : ("e += " + step).str()) + ")");
  w.line("const int64_t i = " + row + " * " + len + " + e;");
  for (const std::string &line : code.lines)
    w.line(line);
  for (Operation *op : ops)
    if (llvm::is_contained(group.outputs, op->getResult(0)))
      w.line(w.store(op->getResult(0), "i", code.vars[op->getResult(0)]));
  w.close();
  return success();
}

LogicalResult emitRowElement(KernelSourceWriter &w, const KernelGroup *group,
                             ArrayRef<Operation *> epilogue, Value result,
                             StringRef value, const RowElementAccess &at) {
  auto store = [&](Value v, StringRef text) {
    return at.store ? at.store(v, text) : w.store(v, at.index, text);
  };
  bool bf16 = cast<RankedTensorType>(result.getType()).getElementType().isBF16();
  w.line("const float rv = kiln_no_contract(" +
         (bf16 ? roundToBf16(value) : value.str()) + ");");
  if (!group || llvm::is_contained(group->outputs, result))
    w.line(store(result, "rv"));
  if (epilogue.empty())
    return success();
  PointwiseStatements code;
  code.vars[result] = "rv";
  if (failed(emitPointwiseStatements(
          epilogue, at.index, [&](Value v) { return w.ptr(v); }, code,
          at.element ? function_ref<std::string(Value)>(at.element) : nullptr)))
    return failure();
  for (const std::string &line : code.lines)
    w.line(line);
  for (Operation *op : epilogue)
    if (llvm::is_contained(group->outputs, op->getResult(0)))
      w.line(store(op->getResult(0), code.vars[op->getResult(0)]));
  return success();
}

NormValues normValues(Operation *op) {
  NormValues n;
  n.x = op->getOperand(0);
  n.weight = op->getOperand(1);
  if (auto ln = dyn_cast<mlir::kiln::LayerNormOp>(op)) {
    n = {ln.getInput(), ln.getWeight(), ln.getBias(), ln.getMean(), ln.getRstd(),
         {}, ln.getOutput(), {}, {}, {}, true};
  } else if (auto rms = dyn_cast<mlir::kiln::RmsNormOp>(op)) {
    n.rstd = rms.getRstd();
    n.y = rms.getOutput();
  } else if (auto lg = dyn_cast<mlir::kiln::LayerNormGradOp>(op)) {
    n = {lg.getInput(), lg.getWeight(), {}, lg.getMean(), lg.getRstd(), lg.getGrad(),
         {}, lg.getInputGrad(), lg.getWeightGrad(), lg.getBiasGrad(), true};
  } else if (auto rg = dyn_cast<mlir::kiln::RmsNormGradOp>(op)) {
    n.rstd = rg.getRstd();
    n.grad = rg.getGrad();
    n.dx = rg.getInputGrad();
    n.dweight = rg.getWeightGrad();
  }
  return n;
}

} // namespace kiln
