//===- ConstantEvaluator.cpp - Compile-time numbers of a model ------------===//
//
// See ConstantEvaluator.h.
//
//===----------------------------------------------------------------------===//

#include "frontend/ConstantEvaluator.h"

#include "frontend/ByteSize.h"
#include "frontend/UnaryMath.h"

#include "llvm/ADT/StringRef.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace kiln {

std::string Number::str() const {
  if (isInteger)
    return std::to_string(intValue);
  if (std::isnan(value))
    return "nan"; // not "-nan": the sign of a NaN means nothing to a reader
  // The fewest digits that read back as the same double, so a message never
  // shows 0.999999999 as "1".
  char buf[32];
  for (int precision = 6; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, value);
    if (std::strtod(buf, nullptr) == value)
      break;
  }
  std::string text(buf);
  // A float that happens to be whole still reads as a float ("3.0"), so
  // "must be a positive integer, got 3.0" makes sense.
  if (std::isfinite(value) && text.find_first_of(".en") == std::string::npos)
    text += ".0";
  return text;
}

static bool fitsInt(double v) {
  return std::fabs(v) < 9.0e15; // exactly representable, far from overflow
}

static std::optional<Number> foldFinite(char op, Number a, Number b, std::string &err);

std::optional<Number> foldBinary(char op, Number a, Number b,
                                 std::string &err) {
  std::optional<Number> r = foldFinite(op, a, b, err);
  // Finite operands with an infinite result: 10 ** 400 would reach a kernel
  // as inf (a scale, an eps) with no word said.
  if (r && !std::isfinite(r->value) && std::isfinite(a.value) && std::isfinite(b.value)) {
    err = "the constant overflows: " + a.str() + " " + (op == '^' ? std::string("**") : std::string(1, op)) +
          " " + b.str() + " is beyond the largest double";
    return std::nullopt;
  }
  return r;
}

// The operation itself; foldBinary checks the result is finite.
static std::optional<Number> foldFinite(char op, Number a, Number b, std::string &err) {
  bool ints = a.isInteger && b.isInteger;
  switch (op) {
  case '+':
  case '-':
  case '*': {
    double r = op == '+'   ? a.value + b.value
               : op == '-' ? a.value - b.value
                           : a.value * b.value;
    if (ints && fitsInt(r))
      return Number::ofInt(op == '+'   ? a.intValue + b.intValue
                           : op == '-' ? a.intValue - b.intValue
                                       : a.intValue * b.intValue);
    return Number::ofFloat(r);
  }
  case '/':
    if (b.value == 0.0) {
      err = "division by zero in a constant expression";
      return std::nullopt;
    }
    if (ints && a.intValue != std::numeric_limits<long long>::min() &&
        a.intValue % b.intValue == 0)
      return Number::ofInt(a.intValue / b.intValue);
    return Number::ofFloat(a.value / b.value);
  case '^': {
    double r = std::pow(a.value, b.value);
    if (ints && b.intValue >= 0 && fitsInt(r))
      return Number::ofInt((long long)std::llround(r));
    if (std::isnan(r)) {
      err = "power of a negative number is not a real number";
      return std::nullopt;
    }
    return Number::ofFloat(r);
  }
  default:
    err = std::string("operator '") + op + "' is not allowed on numbers";
    return std::nullopt;
  }
}

std::optional<float> toNonNegativeF32(double value) {
  if (!(value >= 0)) // negative or NaN
    return std::nullopt;
  float f = static_cast<float>(value);
  if (!std::isfinite(f))
    return std::nullopt;
  return f == 0 ? 0.0f : f;
}

std::string describeAsF32(const Number &n) {
  bool overflows = std::isfinite(n.value) &&
                   std::isinf(static_cast<float>(n.value));
  return n.str() + (overflows ? " (too large for a 32-bit float)" : "");
}

std::optional<Number> foldUnaryFunction(const std::string &fn, Number x,
                                        std::string &err) {
  if (fn == "sqrt" && x.value < 0) {
    err = "sqrt of a negative number (" + x.str() + ")";
    return std::nullopt;
  }
  if (fn == "log" && x.value <= 0) {
    err = "log of a non-positive number (" + x.str() + ")";
    return std::nullopt;
  }
  if (const UnaryMath *math = findUnaryMath(fn))
    return Number::ofFloat(math->fold(x.value));
  err = "'" + fn + "' cannot be applied to a number";
  return std::nullopt;
}

bool ConstantEvaluator::declare(const std::string &name, SourceLoc loc,
                                const Expr *value, const char *what) {
  auto it = constants_.find(name);
  if (it != constants_.end()) {
    diag_.error(loc, std::string("duplicate ") + what + " '" + name + "'");
    diag_.note(it->second.loc, "previous definition is here");
    return false;
  }
  Constant c;
  c.loc = loc;
  c.expr = value;
  c.kind = what;
  constants_.emplace(name, std::move(c));
  return true;
}

/// Parses a -D value: an integer, else a float, with nothing left over but
/// an optional byte unit (`60GiB`, a whole number of bytes).
static std::optional<Number> parseOverride(const std::string &text) {
  if (text.empty())
    return std::nullopt;
  // A byte size (a number and a unit), as kilnc's --memory-budget reads it.
  size_t digitsEnd = text.find_last_of("0123456789.");
  if (digitsEnd != std::string::npos && digitsEnd + 1 < text.size() &&
      bytesPerUnit(text.substr(digitsEnd + 1))) {
    std::optional<int64_t> bytes = parseByteSize(text);
    return bytes ? std::optional<Number>(Number::ofInt(*bytes)) : std::nullopt;
  }
  errno = 0;
  char *end = nullptr;
  long long i = std::strtoll(text.c_str(), &end, 10);
  // LLONG_MIN has no negation (and LLONG_MIN / -1 traps): like any integer
  // beyond what a literal can spell, it is read as a float.
  if (errno == 0 && end && *end == '\0' &&
      i != std::numeric_limits<long long>::min())
    return Number::ofInt(i);
  errno = 0;
  double d = std::strtod(text.c_str(), &end);
  if (errno == 0 && end && *end == '\0' && std::isfinite(d))
    return Number::ofFloat(d);
  return std::nullopt;
}

bool ConstantEvaluator::applyOverrides(
    const std::map<std::string, std::string> &overrides, SourceLoc modelLoc) {
  bool ok = true;
  for (auto &[name, text] : overrides) {
    auto it = constants_.find(name);
    if (it == constants_.end()) {
      // The nearest config name, when a typo is likely (as clang suggests).
      std::string nearest;
      unsigned best = std::max<unsigned>(2, name.size() / 3) + 1;
      for (const auto &candidate : constants_)
        if (unsigned d = llvm::StringRef(name).edit_distance(candidate.first); d < best) {
          best = d;
          nearest = candidate.first;
        }
      diag_.error(modelLoc, "-D " + name + "=" + text +
                                ": the model has no config named '" + name +
                                "'" +
                                (nearest.empty() ? "" : "; did you mean '" + nearest + "'?"));
      ok = false;
      continue;
    }
    std::optional<Number> v = parseOverride(text);
    if (!v) {
      diag_.error(it->second.loc, "-D " + name + "=" + text + ": '" + text +
                                      "' is not a number");
      ok = false;
      continue;
    }
    it->second.value = v;
    it->second.overrideText = text;
  }
  return ok;
}

std::optional<Number> ConstantEvaluator::lookup(const std::string &name,
                                                SourceLoc useLoc) {
  auto it = constants_.find(name);
  if (it == constants_.end()) {
    diag_.error(useLoc, "unknown name '" + name + "'");
    return std::nullopt;
  }
  Constant &c = it->second;
  if (c.value)
    return c.value;
  if (c.inProgress) {
    diag_.error(c.loc, "'" + name + "' is defined in terms of itself");
    return std::nullopt;
  }
  c.inProgress = true;
  std::optional<Number> v = evaluate(*c.expr);
  c.inProgress = false;
  c.value = v;
  return v;
}

std::optional<Number> ConstantEvaluator::evaluate(const Expr &e) {
  // Constants defined through constants (c0 = c1 + 1, c1 = c2 + 1, ...)
  // nest the evaluation beyond any one expression's depth: bound it so the
  // recursion cannot overflow the stack.
  if (depth_.atLimit()) {
    diag_.error(e.loc, "constant expression is nested too deeply (more than " +
                           std::to_string(depth_.limit()) +
                           " levels, counting the constants it uses)");
    return std::nullopt;
  }
  RecursionDepth::Scope level(depth_);
  std::string err;
  switch (e.kind) {
  case Expr::Kind::Number:
    return e.isInteger ? Number::ofInt(e.intNumber) : Number::ofFloat(e.number);
  case Expr::Kind::Name:
    return lookup(e.name, e.loc);
  case Expr::Kind::Unary: {
    if (e.op != '-') {
      diag_.error(e.loc, "'" + operatorSpelling(e.op) +
                             "' is not allowed in a compile-time constant");
      return std::nullopt;
    }
    std::optional<Number> x = evaluate(*e.operands[0]);
    if (!x)
      return std::nullopt;
    return x->isInteger ? Number::ofInt(-x->intValue)
                        : Number::ofFloat(-x->value);
  }
  case Expr::Kind::Binary: {
    if (e.op == '@') {
      diag_.error(e.loc, "'@' needs tensors, not compile-time numbers");
      return std::nullopt;
    }
    if (isBooleanOperator(e.op)) {
      diag_.error(e.loc, "'" + operatorSpelling(e.op) +
                             "' is not allowed in a compile-time constant");
      return std::nullopt;
    }
    std::optional<Number> a = evaluate(*e.operands[0]);
    if (!a)
      return std::nullopt;
    std::optional<Number> b = evaluate(*e.operands[1]);
    if (!b)
      return std::nullopt;
    std::optional<Number> r = foldBinary(e.op, *a, *b, err);
    if (!r)
      diag_.error(e.loc, err);
    return r;
  }
  case Expr::Kind::Call: {
    if (!findUnaryMath(e.name)) {
      diag_.error(e.loc,
                  "'" + e.name + "(...)' is not a compile-time constant");
      return std::nullopt;
    }
    if (e.operands.size() != 1) {
      diag_.error(e.loc, "'" + e.name + "' expects 1 argument, got " +
                             std::to_string(e.operands.size()));
      return std::nullopt;
    }
    std::optional<Number> x = evaluate(*e.operands[0]);
    if (!x)
      return std::nullopt;
    std::optional<Number> r = foldUnaryFunction(e.name, *x, err);
    if (!r)
      diag_.error(e.loc, err);
    return r;
  }
  default:
    diag_.error(e.loc, "expected a compile-time number here");
    return std::nullopt;
  }
}

std::optional<long long>
ConstantEvaluator::evaluatePositiveInt(const Expr &e, const std::string &what) {
  std::optional<Number> v = evaluate(e);
  if (!v)
    return std::nullopt;
  if (!v->isInteger || v->intValue <= 0) {
    std::string fromOverride =
        e.kind == Expr::Kind::Name ? overrideOf(e.name) : "";
    // A product of integers past fitsInt's bound is folded as a float: say
    // that its "1.8e+19" is a too-large integer, not a fraction.
    const bool wholeButHuge = !v->isInteger && v->value > 0 && std::isfinite(v->value) &&
                              v->value == std::floor(v->value) && !fitsInt(v->value);
    diag_.error(e.loc, what + " must be a positive integer, got " + v->str() +
                           (wholeButHuge ? " (too large: constants compute integers "
                                           "exactly only below 9e15)"
                                         : "") +
                           (fromOverride.empty()
                                ? ""
                                : " (from " + fromOverride + ")"));
    return std::nullopt;
  }
  return v->intValue;
}

} // namespace kiln
