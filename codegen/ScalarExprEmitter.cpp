//===- ScalarExprEmitter.cpp - Scalar C expressions of elementwise ops ----===//
//
// One C expression per elementwise kiln op: the formula the op declares
// (ScalarFormulaOpInterface, KilnOps.td) with its operands substituted, or,
// for the ops whose formula depends on attributes or types (convert, cmp,
// select) and gelu_grad, written here. Only expressions, no statements, and
// no calls beyond the C math functions and the kiln_* functions of the
// target's prelude, so CPU and CUDA share every line.
//
//===----------------------------------------------------------------------===//

#include "codegen/ScalarExprEmitter.h"

#include "codegen/KernelSourceWriter.h"

#include "ir/KilnOps.h"

#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <cstdio>

using namespace mlir;

namespace kiln {

namespace {
std::string paren(const std::string &s) { return "(" + s + ")"; }

std::string binary(const std::string &a, const char *op, const std::string &b) {
  return "(" + paren(a) + " " + op + " " + paren(b) + ")";
}

// GELU's derivative is a call of a function every target's prelude defines
// (kiln_gelu_grad, as kiln.gelu's formula calls kiln_gelu): it needs tanh
// once, not three times, and a target picks its fastest accurate tanh.
std::string geluGrad(const std::string &x, const std::string &g) {
  return "kiln_gelu_grad(" + x + ", " + g + ")";
}
// Kernels compute in float (bf16 buffers are widened on load and rounded on
// store, KernelSourceWriter's loadElement / storeElement), so a convert acts
// on a float register: to bf16 it rounds to nearest even through the
// prelude's kiln_f32_to_bf16 / kiln_bf16_to_f32, to f32 it is exact (the
// register already holds the value). Same-type converts fold away. Integer
// converts are C casts: int -> float rounds to nearest, float -> int
// truncates toward zero (kiln.convert's documented semantics).
std::string convert(mlir::kiln::ConvertOp op, const std::string &x) {
  Type from = op.getInput().getType().getElementType();
  Type to = op.getType().getElementType();
  bool fromInt = isa<IntegerType>(from), toInt = isa<IntegerType>(to);
  if (toInt)
    return "((" + cElementType(to) + ")" + paren(x) + ")";
  if (fromInt && to.isF32())
    return "((float)" + paren(x) + ")";
  if (fromInt && to.isBF16())
    return "kiln_bf16_to_f32(kiln_f32_to_bf16((float)" + paren(x) + "))";
  if (from.isF32() && to.isBF16())
    return "kiln_bf16_to_f32(kiln_f32_to_bf16(" + x + "))";
  if (from.isBF16() && to.isF32())
    return paren(x);
  return "";
}

// Comparisons give 0 or 1 (C's int), stored as the i1 type uint8_t. Both
// operands have one type, so a float compares as float, an int as signed.
std::string compare(mlir::kiln::CmpOp op, const std::string &a,
                    const std::string &b) {
  StringRef p = op.getPredicate();
  const char *sym = p == "lt"   ? "<"
                    : p == "le" ? "<="
                    : p == "gt" ? ">"
                    : p == "ge" ? ">="
                    : p == "eq" ? "=="
                                : "!=";
  return binary(a, sym, b);
}

std::string select(const std::string &c, const std::string &a,
                   const std::string &b) {
  return "(" + paren(c) + " ? " + paren(a) + " : " + paren(b) + ")";
}
} // namespace

// `formula` with $0 .. $9 replaced by the operands' expressions.
static std::string substitute(StringRef formula,
                              llvm::ArrayRef<std::string> operands) {
  std::string out;
  for (size_t i = 0; i < formula.size(); ++i) {
    if (formula[i] == '$' && i + 1 < formula.size() && isdigit(formula[i + 1])) {
      size_t index = formula[++i] - '0';
      out += index < operands.size() ? operands[index] : std::string("?");
      continue;
    }
    out += formula[i];
  }
  return out;
}

bool ScalarExprEmitter::isElementwise(Operation *op) {
  return isa<mlir::kiln::ScalarFormulaOpInterface, mlir::kiln::ElementwiseGradOp,
             mlir::kiln::GeluGradOp, mlir::kiln::ConvertOp, mlir::kiln::CmpOp,
             mlir::kiln::SelectOp>(op);
}

FailureOr<std::string>
ScalarExprEmitter::emit(Operation *op, llvm::ArrayRef<std::string> operands) {
  if (!isElementwise(op) || operands.size() != op->getNumOperands())
    return failure();
  // Declared with the op (KilnOps.td): its value, or for elementwise_grad
  // the derivative formula of the op it differentiates.
  if (auto formula = dyn_cast<mlir::kiln::ScalarFormulaOpInterface>(op))
    return substitute(formula.getScalarFormula(), operands);
  if (auto grad = dyn_cast<mlir::kiln::ElementwiseGradOp>(op))
    return substitute(grad.getDerivativeFormula(), operands);
  auto a = [&] { return operands[0]; };
  auto b = [&] { return operands[1]; };
  std::string expr = llvm::TypeSwitch<Operation *, std::string>(op)
      .Case([&](mlir::kiln::GeluGradOp) { return geluGrad(a(), b()); })
      .Case([&](mlir::kiln::ConvertOp c) { return convert(c, a()); })
      .Case([&](mlir::kiln::CmpOp c) { return compare(c, a(), b()); })
      .Case([&](mlir::kiln::SelectOp) {
        return select(operands[0], operands[1], operands[2]);
      })
      .Default([](Operation *) { return std::string(); });
  if (expr.empty())
    return failure();
  return expr;
}

std::string ScalarExprEmitter::floatLiteral(double value) {
  if (std::isnan(value))
    return "NAN";
  if (std::isinf(value))
    return value < 0 ? "(-INFINITY)" : "INFINITY";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", value);
  std::string s(buf);
  // "1" -> "1.0f", "1e-05" -> "1e-05f": a float literal needs '.' or an exponent.
  if (s.find_first_of(".eE") == std::string::npos)
    s += ".0";
  s += "f";
  return value < 0 ? "(" + s + ")" : s;
}

} // namespace kiln
