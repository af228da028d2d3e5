//===- ConstantEvaluator.h - Compile-time numbers of a model ----*- C++ -*-===//
//
// Evaluates `config` constants, the train section's `batch`/`seq`, shape
// dimensions and initializer arguments. Constants are evaluated lazily, on
// first use, so their order in the file does not matter (shapes in blocks
// use `batch` and `seq` although `train` comes last); a cycle is an error.
// `-D name=value` overrides replace a constant's value before anything is
// evaluated.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_FRONTEND_CONSTANTEVALUATOR_H
#define KILN_FRONTEND_CONSTANTEVALUATOR_H

#include "frontend/AST.h"
#include "frontend/RecursionDepth.h"

#include <map>
#include <optional>
#include <string>

namespace kiln {

/// A compile-time number. Integers stay exact (shapes need them); any float
/// operand makes the result a float. `a / b` of integers is an integer when
/// the division is exact (so `dim / n_head` is a usable dimension).
struct Number {
  double value = 0.0;
  long long intValue = 0;
  bool isInteger = false;

  static Number ofInt(long long v) { return {(double)v, v, true}; }
  static Number ofFloat(double v) { return {v, 0, false}; }
  std::string str() const;
};

/// Folds `lhs op rhs` for op in + - * / ^ (power). Returns an error message
/// in `err` (division by zero) and std::nullopt on failure.
std::optional<Number> foldBinary(char op, Number lhs, Number rhs,
                                 std::string &err);
/// `value` rounded to f32, the type of the kiln attributes that hold
/// epsilons and optimizer hyperparameters; -0 becomes 0. std::nullopt when it
/// is negative, NaN, or infinite as an f32 (beyond about 3.4e38).
std::optional<float> toNonNegativeF32(double value);
/// `n` as messages about such f32 values show it: "1e+300 (too large for a
/// 32-bit float)" when only the f32 rounding makes it infinite.
std::string describeAsF32(const Number &n);
/// Folds the unary math functions (UnaryMath.h) on a number.
std::optional<Number> foldUnaryFunction(const std::string &fn, Number x,
                                        std::string &err);

class ConstantEvaluator {
public:
  explicit ConstantEvaluator(DiagnosticPrinter &diag) : diag_(diag) {}

  /// Registers a named constant; reports a duplicate.
  bool declare(const std::string &name, SourceLoc loc, const Expr *value,
               const char *what);
  /// Applies `-D` overrides; reports unparsable values at the constant's
  /// declaration and unknown names at `modelLoc` (the `model NAME` line).
  bool applyOverrides(const std::map<std::string, std::string> &overrides,
                      SourceLoc modelLoc);

  bool isConstant(const std::string &name) const {
    return constants_.count(name) != 0;
  }
  /// "-D name=text" when a -D override set `name`, else "".
  std::string overrideOf(const std::string &name) const {
    auto it = constants_.find(name);
    return it == constants_.end() || it->second.overrideText.empty()
               ? ""
               : "-D " + name + "=" + it->second.overrideText;
  }
  /// The value of a named constant (evaluating it on first use).
  std::optional<Number> lookup(const std::string &name, SourceLoc useLoc);
  /// Evaluates a constant expression: numbers, constants, + - * / **, unary
  /// -, parentheses and sqrt/exp/log/tanh.
  std::optional<Number> evaluate(const Expr &e);
  /// Evaluates a positive integer (a dimension, a count); `what` names it
  /// in the message.
  std::optional<long long> evaluatePositiveInt(const Expr &e,
                                               const std::string &what);

private:
  struct Constant {
    SourceLoc loc;
    const Expr *expr = nullptr;
    std::string kind; // "config", "train setting"
    std::optional<Number> value;
    std::string overrideText; // the -D value that replaced `expr`, if any
    bool inProgress = false;
  };

  std::map<std::string, Constant> constants_;
  DiagnosticPrinter &diag_;
  // Nested evaluate() calls, through constants too: a chain of configs can
  // nest the evaluation beyond any one expression's depth.
  RecursionDepth depth_{2000};
};

} // namespace kiln

#endif // KILN_FRONTEND_CONSTANTEVALUATOR_H
