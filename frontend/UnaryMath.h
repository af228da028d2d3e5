//===- UnaryMath.h - The unary math builtins of the language --------------===//
//
// One table: `name(x)` on a float tensor becomes the kiln op `op` (whose
// value and derivative are declared once, in ir/KilnOps.td), and on a
// number folds with `fold`. A new formula-declared unary op is callable from
// a model file once it is listed in UnaryMath.cpp -- no parser, Sema or
// MLIRGen change.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_FRONTEND_UNARYMATH_H
#define KILN_FRONTEND_UNARYMATH_H

#include <string_view>
#include <vector>

namespace kiln {

struct UnaryMath {
  const char *name;         // "silu"
  const char *op;           // "kiln.silu"
  const char *usage;        // "silu(x)"
  double (*fold)(double x); // the value on a number (NaN outside the domain)
};

/// Every unary math builtin.
const std::vector<UnaryMath> &unaryMathBuiltins();
/// The builtin called `name`, or null.
const UnaryMath *findUnaryMath(std::string_view name);

} // namespace kiln

#endif // KILN_FRONTEND_UNARYMATH_H
