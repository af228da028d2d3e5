//===- AttentionRegionEmitter.cpp - C statements of attention regions ----===//
//
// Forward: one `const T vN = <expr>;` per op, in block order (the verifier
// guarantees one block of scalar arith/math ops and tensor.extract of a
// capture). Integer values of any width and `index` are int64_t, i1 is int,
// f32 is float.
//
// Backward, reverse mode over the same block:
//  1. Activity: s and every tensor.extract of a floating capture are
//     active; a float result of an op with an active operand is active.
//     Only active values get an adjoint `float aN = 0.0f`.
//  2. The yielded value's adjoint is the seed.
//  3. Ops are visited backwards; each adds its operands' adjoints from its
//     result's adjoint (the rules are next to each op below). A read of a
//     floating capture hands its adjoint to the caller's hook.
//  4. dL/ds is the adjoint of s.
// Integer-valued ops, comparisons and int<->float casts carry no derivative.
//
//===----------------------------------------------------------------------===//

#include "codegen/AttentionRegionEmitter.h"

#include "codegen/KernelSourceWriter.h"
#include "codegen/Philox.h"
#include "codegen/ScalarExprEmitter.h"

#include "ir/KilnOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace kiln {

namespace {

std::string paren(const std::string &e) { return "(" + e + ")"; }

// The C type of a scalar in a region, or "" if unsupported.
std::string scalarCType(Type t) {
  if (t.isF32())
    return "float";
  if (t.isInteger(1))
    return "int";
  if (t.isIndex() || t.isInteger(32) || t.isInteger(64) || t.isInteger(16) ||
      t.isInteger(8))
    return "int64_t";
  return "";
}

std::string cmpiExpr(arith::CmpIPredicate p, const std::string &a,
                     const std::string &b) {
  std::string ua = "(uint64_t)" + a, ub = "(uint64_t)" + b;
  switch (p) {
  case arith::CmpIPredicate::eq: return a + " == " + b;
  case arith::CmpIPredicate::ne: return a + " != " + b;
  case arith::CmpIPredicate::slt: return a + " < " + b;
  case arith::CmpIPredicate::sle: return a + " <= " + b;
  case arith::CmpIPredicate::sgt: return a + " > " + b;
  case arith::CmpIPredicate::sge: return a + " >= " + b;
  case arith::CmpIPredicate::ult: return ua + " < " + ub;
  case arith::CmpIPredicate::ule: return ua + " <= " + ub;
  case arith::CmpIPredicate::ugt: return ua + " > " + ub;
  case arith::CmpIPredicate::uge: return ua + " >= " + ub;
  }
  return "0";
}

// Ordered predicates are false on NaN, as C's comparisons (except !=);
// unordered ones are the negation of the opposite ordered comparison.
std::string cmpfExpr(arith::CmpFPredicate p, const std::string &a,
                     const std::string &b) {
  using P = arith::CmpFPredicate;
  switch (p) {
  case P::AlwaysFalse: return "0";
  case P::AlwaysTrue: return "1";
  case P::OEQ: return a + " == " + b;
  case P::OGT: return a + " > " + b;
  case P::OGE: return a + " >= " + b;
  case P::OLT: return a + " < " + b;
  case P::OLE: return a + " <= " + b;
  case P::ONE: return "(" + a + " < " + b + " || " + a + " > " + b + ")";
  case P::ORD: return "(" + a + " == " + a + " && " + b + " == " + b + ")";
  case P::UEQ: return "!(" + a + " < " + b + " || " + a + " > " + b + ")";
  case P::UGT: return "!(" + a + " <= " + b + ")";
  case P::UGE: return "!(" + a + " < " + b + ")";
  case P::ULT: return "!(" + a + " >= " + b + ")";
  case P::ULE: return "!(" + a + " > " + b + ")";
  case P::UNE: return a + " != " + b;
  case P::UNO: return "(" + a + " != " + a + " || " + b + " != " + b + ")";
  }
  return "0";
}

} // namespace

AttentionRegionEmitter::AttentionRegionEmitter(Region &region,
                                               std::string prefix)
    : block(region.front()), prefix(std::move(prefix)) {}

std::string AttentionRegionEmitter::name(Value v) { return names.lookup(v); }

LogicalResult
AttentionRegionEmitter::emitOp(Operation &op,
                               const AttentionRegionInputs &inputs,
                               SmallVector<std::string> &out) {
  auto operand = [&](unsigned i) { return paren(name(op.getOperand(i))); };
  std::string expr;
  if (auto extract = dyn_cast<tensor::ExtractOp>(op)) {
    auto arg = cast<BlockArgument>(extract.getTensor());
    auto type = cast<RankedTensorType>(arg.getType());
    unsigned numLeading = block.getArgument(0).getType().isF32() ? 5 : 4;
    unsigned capture = arg.getArgNumber() - numLeading;
    // Each index is clamped into its dimension: an out-of-range index in a
    // model's score expression reads the edge element instead of memory
    // outside the capture.
    std::string index;
    int64_t stride = 1;
    SmallVector<std::string> terms;
    for (int64_t d = type.getRank() - 1; d >= 0; --d) {
      std::string i = name(extract.getIndices()[d]);
      int64_t n = type.getDimSize(d);
      std::string clamped = "(" + i + " < 0 ? 0 : " + i + " > " +
                            std::to_string(n - 1) + " ? " +
                            std::to_string(n - 1) + " : " + i + ")";
      terms.push_back(stride == 1 ? clamped
                                  : clamped + " * " + std::to_string(stride));
      stride *= n;
    }
    for (auto it = terms.rbegin(); it != terms.rend(); ++it)
      index += (index.empty() ? "" : " + ") + *it;
    if (index.empty())
      index = "0";
    std::string indexVar = prefix + "x" + std::to_string(counter);
    out.push_back("const int64_t " + indexVar + " = " + index + ";");
    extractIndex[&op] = indexVar;
    expr = inputs.readCapture(capture, indexVar);
  } else if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
    Attribute value = constant.getValue();
    if (auto f = dyn_cast<FloatAttr>(value))
      expr = ScalarExprEmitter::floatLiteral(f.getValueAsDouble());
    else if (auto i = dyn_cast<IntegerAttr>(value))
      expr = i.getType().isInteger(1)
                 ? std::string(i.getValue().getBoolValue() ? "1" : "0")
                 : "(int64_t)" + std::to_string(i.getValue().getSExtValue()) +
                       "LL";
    else
      return op.emitOpError() << "has a constant codegen cannot translate";
  } else if (auto cmpi = dyn_cast<arith::CmpIOp>(op)) {
    expr = cmpiExpr(cmpi.getPredicate(), operand(0), operand(1));
  } else if (auto cmpf = dyn_cast<arith::CmpFOp>(op)) {
    expr = cmpfExpr(cmpf.getPredicate(), operand(0), operand(1));
  } else {
    StringRef n = op.getName().getStringRef();
    static const llvm::StringMap<StringRef> binary = {
        {"arith.addf", "+"},  {"arith.subf", "-"},  {"arith.mulf", "*"},
        {"arith.divf", "/"},  {"arith.addi", "+"},  {"arith.subi", "-"},
        {"arith.muli", "*"},  {"arith.divsi", "/"}, {"arith.remsi", "%"},
        {"arith.andi", "&"},  {"arith.ori", "|"},   {"arith.xori", "^"},
        {"arith.shli", "<<"}, {"arith.shrsi", ">>"}};
    static const llvm::StringMap<StringRef> unary = {
        {"math.exp", "expf"},     {"math.exp2", "exp2f"},
        {"math.log", "logf"},     {"math.log2", "log2f"},
        {"math.log1p", "log1pf"}, {"math.expm1", "expm1f"},
        {"math.sqrt", "sqrtf"},   {"math.tanh", "tanhf"},
        {"math.absf", "fabsf"},   {"math.sin", "sinf"},
        {"math.cos", "cosf"},     {"math.erf", "erff"},
        {"math.floor", "floorf"}, {"math.ceil", "ceilf"},
        {"math.round", "roundf"}};
    static const llvm::StringMap<StringRef> binaryCalls = {
        {"arith.maximumf", "fmaxf"}, {"arith.minimumf", "fminf"},
        {"arith.maxnumf", "fmaxf"},  {"arith.minnumf", "fminf"},
        {"arith.remf", "fmodf"},     {"math.powf", "powf"},
        {"math.copysign", "copysignf"}};
    if (auto it = binary.find(n); it != binary.end())
      expr = operand(0) + " " + it->second.str() + " " + operand(1);
    else if (auto it = unary.find(n); it != unary.end())
      expr = it->second.str() + operand(0);
    else if (auto it = binaryCalls.find(n); it != binaryCalls.end())
      expr = it->second.str() + "(" + name(op.getOperand(0)) + ", " +
             name(op.getOperand(1)) + ")";
    else if (n == "arith.negf")
      expr = "-" + operand(0);
    else if (n == "math.rsqrt")
      expr = "1.0f / sqrtf" + operand(0);
    else if (n == "math.absi")
      expr = operand(0) + " < 0 ? -" + operand(0) + " : " + operand(0);
    else if (n == "arith.maxsi" || n == "arith.minsi")
      expr = operand(0) + (n == "arith.maxsi" ? " > " : " < ") + operand(1) +
             " ? " + operand(0) + " : " + operand(1);
    else if (n == "arith.divui" || n == "arith.remui")
      expr = "(int64_t)((uint64_t)" + operand(0) +
             (n == "arith.divui" ? " / " : " % ") + "(uint64_t)" +
             operand(1) + ")";
    else if (n == "arith.select")
      expr = operand(0) + " ? " + operand(1) + " : " + operand(2);
    else if (n == "arith.sitofp")
      expr = "(float)" + operand(0);
    else if (n == "arith.uitofp")
      expr = "(float)(uint64_t)" + operand(0);
    else if (n == "arith.fptosi" || n == "arith.fptoui")
      expr = "(int64_t)" + operand(0);
    else if (n == "arith.trunci" && op.getResult(0).getType().isInteger(1))
      expr = "(int)(" + operand(0) + " & 1)";
    else if (n == "arith.extsi" &&
             op.getOperand(0).getType().isInteger(1))
      expr = "(int64_t)-" + operand(0);
    else if (n == "arith.index_cast" || n == "arith.index_castui" ||
             n == "arith.extsi" || n == "arith.extui" || n == "arith.trunci")
      expr = "(int64_t)" + operand(0);
    else
      return op.emitOpError()
             << "cannot be translated into the attention kernel";
  }
  for (Value result : op.getResults()) {
    std::string type = scalarCType(result.getType());
    if (type.empty())
      return op.emitOpError() << "has a result of type " << result.getType()
                              << " that the attention kernel cannot hold";
    std::string var = prefix + "v" + std::to_string(counter++);
    names[result] = var;
    out.push_back("const " + type + " " + var + " = " + expr + ";");
  }
  return success();
}

FailureOr<SmallVector<std::string>>
AttentionRegionEmitter::emitForward(const AttentionRegionInputs &inputs,
                                    StringRef result) {
  return emitValue(inputs, block.getTerminator()->getOperand(0), result);
}

FailureOr<SmallVector<std::string>>
AttentionRegionEmitter::emitValue(const AttentionRegionInputs &inputs,
                                  Value value, StringRef result) {
  return emitValueSplit(inputs, value, result, nullptr);
}

FailureOr<SmallVector<std::string>> AttentionRegionEmitter::emitForwardHoisted(
    const AttentionRegionInputs &inputs, StringRef result,
    SmallVector<std::string> &invariant) {
  return emitValueSplit(inputs, block.getTerminator()->getOperand(0), result,
                        &invariant);
}

FailureOr<SmallVector<std::string>>
AttentionRegionEmitter::emitValueSplit(const AttentionRegionInputs &inputs,
                                       Value value, StringRef result,
                                       SmallVector<std::string> *invariant) {
  names.clear();
  extractIndex.clear();
  counter = 0;
  bool isScore = block.getArgument(0).getType().isF32();
  SmallVector<std::string> indices{inputs.b, inputs.h, inputs.i, inputs.j};
  unsigned first = 0;
  if (isScore)
    names[block.getArgument(first++)] = inputs.s;
  for (const std::string &index : indices)
    names[block.getArgument(first++)] = index;
  // The ops `value` depends on (all of them for the yielded value: the
  // backward names every op's result).
  bool yielded = value == block.getTerminator()->getOperand(0);
  llvm::SmallPtrSet<Operation *, 16> needed;
  for (SmallVector<Value> work{value}; !work.empty();)
    if (Operation *def = work.pop_back_val().getDefiningOp();
        def && needed.insert(def).second)
      llvm::append_range(work, def->getOperands());
  SmallVector<std::string> out;
  // Ops are met in block order, so an operand's op is decided first.
  llvm::SmallPtrSet<Operation *, 16> hoistedOps;
  auto hoisted = [&](Operation &op) {
    if (!invariant || isa<arith::DivSIOp, arith::DivUIOp, arith::RemSIOp,
                          arith::RemUIOp>(op))
      return false;
    for (Value operand : op.getOperands())
      if (Operation *def = operand.getDefiningOp();
          def && def->getBlock() == &block && !hoistedOps.contains(def))
        return false;
    if (!llvm::all_of(op.getResults(),
                      [&](Value r) { return indexUses(r) == 0; }))
      return false;
    hoistedOps.insert(&op);
    return true;
  };
  for (Operation &op : block.without_terminator())
    if ((yielded || needed.contains(&op)) &&
        failed(emitOp(op, inputs, hoisted(op) ? *invariant : out)))
      return failure();
  out.push_back("const " + scalarCType(value.getType()) + " " + result.str() +
                " = " + name(value) + ";");
  return out;
}

namespace {

// How a mask value depends on i and j (block arguments 2 and 3).
enum class IndexForm { Free, Linear, Other };

IndexForm combine(IndexForm a, IndexForm b) {
  if (a == IndexForm::Other || b == IndexForm::Other)
    return IndexForm::Other;
  return a == IndexForm::Linear || b == IndexForm::Linear ? IndexForm::Linear
                                                          : IndexForm::Free;
}

IndexForm indexForm(Value v) {
  if (auto arg = dyn_cast<BlockArgument>(v))
    return arg.getArgNumber() == 2 || arg.getArgNumber() == 3
               ? IndexForm::Linear
               : IndexForm::Free;
  Operation *op = v.getDefiningOp();
  SmallVector<IndexForm, 2> forms;
  IndexForm all = IndexForm::Free;
  for (Value operand : op->getOperands()) {
    forms.push_back(indexForm(operand));
    all = combine(all, forms.back());
  }
  if (all != IndexForm::Linear)
    return all;
  // A linear operand stays linear through sums, differences, products with
  // a value free of i and j, and casts (C computes them in int64_t, where
  // they neither wrap nor truncate); anything else makes another form.
  if (isa<arith::AddIOp, arith::SubIOp>(op))
    return IndexForm::Linear;
  if (isa<arith::MulIOp>(op))
    return forms[0] == IndexForm::Free || forms[1] == IndexForm::Free
               ? IndexForm::Linear
               : IndexForm::Other;
  bool fromBool = op->getOperand(0).getType().isInteger(1);
  if (!fromBool &&
      (isa<arith::IndexCastOp, arith::IndexCastUIOp, arith::ExtSIOp,
           arith::ExtUIOp>(op) ||
       (isa<arith::TruncIOp>(op) && !v.getType().isInteger(1))))
    return IndexForm::Linear;
  return IndexForm::Other;
}

// Whether `v` is never negative: indices, non-negative constants, and their
// casts, sums and products.
bool nonNegative(Value v) {
  if (isa<BlockArgument>(v))
    return v.getType().isIndex();
  Operation *op = v.getDefiningOp();
  if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
    auto i = dyn_cast<IntegerAttr>(constant.getValue());
    return i && !i.getType().isInteger(1) && !i.getValue().isNegative();
  }
  if (isa<arith::IndexCastOp, arith::IndexCastUIOp, arith::ExtSIOp,
          arith::AddIOp, arith::MulIOp>(op))
    return !op->getOperand(0).getType().isInteger(1) &&
           llvm::all_of(op->getOperands(), nonNegative);
  return false;
}

bool collectTests(Value v, SmallVector<LinearMaskTest> &tests) {
  Operation *op = v.getDefiningOp();
  if (op && isa<arith::AndIOp>(op))
    return collectTests(op->getOperand(0), tests) &&
           collectTests(op->getOperand(1), tests);
  if (indexForm(v) == IndexForm::Free) {
    tests.push_back({v, true, true}); // the same on every pair
    return true;
  }
  auto cmp = dyn_cast_or_null<arith::CmpIOp>(op);
  if (!cmp || indexForm(cmp.getLhs()) == IndexForm::Other ||
      indexForm(cmp.getRhs()) == IndexForm::Other)
    return false;
  using P = arith::CmpIPredicate;
  P p = cmp.getPredicate();
  bool isUnsigned = p == P::ult || p == P::ule || p == P::ugt || p == P::uge;
  if (isUnsigned && !(nonNegative(cmp.getLhs()) && nonNegative(cmp.getRhs())))
    return false;
  tests.push_back({v, p != P::ne, p != P::eq});
  return true;
}

} // namespace

std::optional<SmallVector<LinearMaskTest>> linearMaskTests(Region &mask) {
  if (mask.empty())
    return std::nullopt;
  Block &block = mask.front();
  if (block.getNumArguments() < 4 || block.getArgument(0).getType().isF32())
    return std::nullopt; // not a mask region
  SmallVector<LinearMaskTest> tests;
  if (!collectTests(block.getTerminator()->getOperand(0), tests))
    return std::nullopt;
  return tests;
}

void AttentionRegionEmitter::markActive() {
  active.clear();
  unsigned numLeading = block.getArgument(0).getType().isF32() ? 5 : 4;
  if (numLeading == 5)
    active.insert(block.getArgument(0));
  for (Operation &op : block.without_terminator()) {
    bool isActive = false;
    if (auto extract = dyn_cast<tensor::ExtractOp>(op))
      isActive = extract.getType().isF32();
    else
      isActive = llvm::any_of(op.getOperands(),
                              [&](Value v) { return active.contains(v); });
    for (Value r : op.getResults())
      if (isActive && r.getType().isF32())
        active.insert(r);
  }
}

unsigned AttentionRegionEmitter::indexUses(Value v) {
  if (auto found = uses.find(v); found != uses.end())
    return found->second;
  unsigned result = 0;
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    // (s,) b, h, i, j, captures...
    bool hasScore = block.getArgument(0).getType().isF32();
    unsigned number = arg.getArgNumber(), i = hasScore ? 3 : 2;
    if (hasScore && number == 0)
      result = kIndexUsesI | kIndexUsesJ;
    else if (number == i)
      result = kIndexUsesI;
    else if (number == i + 1)
      result = kIndexUsesJ;
  } else {
    // A read of a capture depends on its indices; any other op on its
    // operands (the region is one block: no loops, no cycles).
    for (Value operand : v.getDefiningOp()->getOperands())
      if (operand.getParentBlock() == &block)
        result |= indexUses(operand);
  }
  uses[v] = result;
  return result;
}

FailureOr<AttentionRegionEmitter::Backward> AttentionRegionEmitter::emitBackward(
    const AttentionRegionInputs &inputs, StringRef result, StringRef seed,
    StringRef ds, const CaptureGradHook &captureGrad,
    SmallVector<std::string> *invariant) {
  FailureOr<SmallVector<std::string>> forward = emitValueSplit(
      inputs, block.getTerminator()->getOperand(0), result, invariant);
  if (failed(forward))
    return failure();
  Backward backward{std::move(*forward), {}};
  SmallVector<std::string> &out = backward.reverse;
  markActive();
  // (1) One adjoint per active value.
  llvm::DenseMap<Value, std::string> adjoint;
  unsigned next = 0;
  auto declare = [&](Value v) {
    std::string a = prefix + "a" + std::to_string(next++);
    adjoint[v] = a;
    out.push_back("float " + a + " = 0.0f;");
  };
  for (BlockArgument arg : block.getArguments())
    if (active.contains(arg))
      declare(arg);
  for (Operation &op : block.without_terminator())
    for (Value r : op.getResults())
      if (active.contains(r))
        declare(r);

  // (2) Seed.
  Value yielded = block.getTerminator()->getOperand(0);
  if (active.contains(yielded))
    out.push_back(adjoint[yielded] + " += " + seed.str() + ";");

  // (3) Backwards.
  auto add = [&](Value v, const std::string &contribution) {
    if (active.contains(v))
      out.push_back(adjoint[v] + " += " + contribution + ";");
  };
  for (Operation &op : llvm::reverse(block.without_terminator())) {
    if (op.getNumResults() != 1 || !active.contains(op.getResult(0)))
      continue;
    std::string a = adjoint[op.getResult(0)], y = name(op.getResult(0));
    auto x = [&](unsigned i) { return paren(name(op.getOperand(i))); };
    auto in = [&](unsigned i) { return op.getOperand(i); };
    StringRef n = op.getName().getStringRef();
    if (auto extract = dyn_cast<tensor::ExtractOp>(op)) {
      // capture[index] += a
      auto arg = cast<BlockArgument>(extract.getTensor());
      unsigned numLeading = block.getArgument(0).getType().isF32() ? 5 : 4;
      unsigned indexUse = 0;
      for (Value index : extract.getIndices())
        indexUse |= indexUses(index);
      out.push_back(captureGrad(arg.getArgNumber() - numLeading,
                                extractIndex[&op], a, indexUse));
    } else if (n == "arith.addf") { // d(l + r) = (a, a)
      add(in(0), a);
      add(in(1), a);
    } else if (n == "arith.subf") { // d(l - r) = (a, -a)
      add(in(0), a);
      add(in(1), "-" + a);
    } else if (n == "arith.mulf") { // d(l * r) = (a r, a l)
      add(in(0), a + " * " + x(1));
      add(in(1), a + " * " + x(0));
    } else if (n == "arith.divf") { // d(l / r) = (a / r, -a y / r)
      add(in(0), a + " / " + x(1));
      add(in(1), "-" + a + " * " + y + " / " + x(1));
    } else if (n == "arith.negf") {
      add(in(0), "-" + a);
    } else if (n == "arith.maximumf" || n == "arith.maxnumf" ||
               n == "arith.minimumf" || n == "arith.minnumf") {
      // The chosen operand gets a; a tie goes to the left one.
      std::string cmp = (n == "arith.maximumf" || n == "arith.maxnumf")
                            ? " >= "
                            : " <= ";
      std::string left = x(0) + cmp + x(1);
      add(in(0), "(" + left + ") ? " + a + " : 0.0f");
      add(in(1), "(" + left + ") ? 0.0f : " + a);
    } else if (n == "arith.select") { // c ? t : f
      add(in(1), x(0) + " ? " + a + " : 0.0f");
      add(in(2), x(0) + " ? 0.0f : " + a);
    } else if (n == "math.exp") { // d e^x = a e^x
      add(in(0), a + " * " + y);
    } else if (n == "math.exp2") {
      add(in(0), a + " * " + y + " * 0.693147181f");
    } else if (n == "math.expm1") {
      add(in(0), a + " * (" + y + " + 1.0f)");
    } else if (n == "math.log") { // d log x = a / x
      add(in(0), a + " / " + x(0));
    } else if (n == "math.log2") {
      add(in(0), a + " / (" + x(0) + " * 0.693147181f)");
    } else if (n == "math.log1p") {
      add(in(0), a + " / (1.0f + " + x(0) + ")");
    } else if (n == "math.sqrt") { // d sqrt x = a / (2 y)
      add(in(0), a + " / (2.0f * " + y + ")");
    } else if (n == "math.rsqrt") { // d x^-1/2 = -a y / (2 x)
      add(in(0), "-0.5f * " + a + " * " + y + " / " + x(0));
    } else if (n == "math.tanh") { // d tanh x = a (1 - y^2)
      add(in(0), a + " * (1.0f - " + y + " * " + y + ")");
    } else if (n == "math.absf") { // sign(x), 0 at 0 (as PyTorch)
      add(in(0), "(" + x(0) + " > 0.0f ? " + a + " : " + x(0) + " < 0.0f ? -" +
                     a + " : 0.0f)");
    } else if (n == "math.sin") {
      add(in(0), a + " * cosf" + x(0));
    } else if (n == "math.cos") {
      add(in(0), "-" + a + " * sinf" + x(0));
    } else if (n == "math.powf") { // d x^c = a c x^(c-1), c not active
      if (active.contains(in(1)))
        return op.emitOpError()
               << "cannot be differentiated with an exponent that depends "
                  "on the score or a floating capture";
      add(in(0), a + " * " + x(1) + " * powf(" + name(in(0)) + ", " +
                     x(1) + " - 1.0f)");
    } else {
      return op.emitOpError()
             << "cannot be differentiated in the score of an attention "
                "backward kernel";
    }
  }
  // (4) dL/ds.
  Value s = block.getArgument(0);
  out.push_back("const float " + ds.str() + " = " +
                (active.contains(s) ? adjoint[s] : std::string("0.0f")) +
                ";");
  return backward;
}

std::string AttentionDropout::factor(StringRef bh, StringRef i,
                                     StringRef j) const {
  return ("(kiln_dropout_keep(dropSeed, dropOffset, " + bh + ", " + i + ", " +
          j + ", " + threshold + ") ? " + invKeep + " : 0.0f)")
      .str();
}

AttentionDropout emitAttentionDropout(KernelSourceWriter &w, double p,
                                      Value rngState,
                                      const std::string &target) {
  AttentionDropout drop;
  if (p <= 0.0)
    return drop;
  drop.enabled = true;
  drop.threshold = std::to_string(dropoutThreshold(p)) + "u";
  drop.invKeep = ScalarExprEmitter::floatLiteral(1.0 / (1.0 - p));
  w.global(philoxKernelSource(target));
  std::string state = "((const long long*)" + w.ptr(rngState) + ")";
  w.line("// dropout " + std::to_string(p) +
         ": Philox keep mask of (seed, micro-step offset, b*H+h, i, j)");
  w.line("const unsigned long long dropSeed = (unsigned long long)" + state +
         "[0], dropOffset = (unsigned long long)" + state + "[1];");
  return drop;
}

AttentionRegionInputs attentionLoopInputs(KernelSourceWriter &w,
                                          OperandRange captures) {
  AttentionRegionInputs in;
  in.s = "s";
  in.b = "b";
  in.h = "h";
  in.i = "i";
  in.j = "j";
  SmallVector<Value> values(captures.begin(), captures.end());
  in.readCapture = [&w, values](unsigned c, const std::string &index) {
    Value v = values[c];
    Type elem = cast<RankedTensorType>(v.getType()).getElementType();
    if (isa<FloatType>(elem))
      return "(float)" + w.load(v, index);
    return "(int64_t)" + w.ptr(v) + "[" + index + "]";
  };
  return in;
}

} // namespace kiln
