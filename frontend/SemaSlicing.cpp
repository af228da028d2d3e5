//===- SemaSlicing.cpp - slice, concat, split -----------------------------===//
//
// slice(x, dim, start, end) keeps [start, end) of one dimension (Python's
// rules: a negative dim, start or end counts from the end);
// concat([a, b, ...], dim) joins tensors that agree on every other
// dimension; `a, b, ... = split(x, [sizes], dim)` cuts one dimension into
// consecutive slices, the only call that gives several tensors, so the only
// right-hand side of a statement with several names. Each lowers to
// kiln.slice / kiln.concat (split to one slice per part).
//
//===----------------------------------------------------------------------===//

#include "frontend/Sema.h"

namespace kiln {

std::optional<int64_t> Sema::evaluateInteger(const Expr &e, Scope &scope,
                                             const std::string &what) {
  std::optional<Value> v = evaluate(e, scope);
  if (!v)
    return std::nullopt;
  if (v->isTensor() || !v->number.isInteger) {
    error(e.loc, what + " must be a compile-time integer, got " +
                     (v->isTensor() ? "a tensor" : v->number.str()));
    return std::nullopt;
  }
  return v->number.intValue;
}

std::optional<int64_t> Sema::evaluateDim(const Expr &e, Scope &scope,
                                         int64_t rank,
                                         const std::string &what) {
  std::optional<int64_t> value = evaluateInteger(e, scope, what);
  if (!value)
    return std::nullopt;
  int64_t dim = *value;
  if (dim < -rank || dim >= rank) {
    error(e.loc, what + " " + std::to_string(dim) +
                     " is out of range for a tensor of rank " +
                     std::to_string(rank) + " (expected " +
                     std::to_string(-rank) + " to " + std::to_string(rank - 1) +
                     ")");
    return std::nullopt;
  }
  return dim < 0 ? dim + rank : dim;
}

namespace {
std::string describe(const Value &v, const TensorType *type) {
  return v.isTensor() ? formatType(*type) : "the number " + v.number.str();
}
} // namespace

std::optional<Value> Sema::evaluateSlice(const Expr &e, Scope &scope) {
  std::optional<Value> x = evaluate(*e.operands[0], scope);
  if (!x)
    return std::nullopt;
  if (!x->isTensor()) {
    error(e.operands[0]->loc,
          "slice needs a tensor, got the number " + x->number.str());
    return std::nullopt;
  }
  const TensorType type = typeOf(x->node);
  if (type.rank() == 0) {
    error(e.operands[0]->loc, "slice needs a tensor of rank >= 1, got a "
                              "scalar");
    return std::nullopt;
  }
  std::optional<int64_t> dim =
      evaluateDim(*e.operands[1], scope, type.rank(), "the slice dim");
  if (!dim)
    return std::nullopt;
  int64_t size = type.shape[*dim];
  int64_t bounds[2];
  for (int i = 0; i < 2; ++i) {
    const Expr &arg = *e.operands[2 + i];
    std::string what = i ? "the slice end" : "the slice start";
    std::optional<int64_t> b = evaluateInteger(arg, scope, what);
    if (!b)
      return std::nullopt;
    bounds[i] = *b < 0 ? *b + size : *b;
    if (bounds[i] < 0 || bounds[i] > size) {
      error(arg.loc, what + " " + std::to_string(*b) +
                         " is out of range for dim " +
                         std::to_string(*dim) + " of size " +
                         std::to_string(size) + " in " +
                         formatShape(type.shape));
      return std::nullopt;
    }
  }
  if (bounds[0] >= bounds[1]) {
    error(e.loc, "slice [" + std::to_string(bounds[0]) + ", " +
                     std::to_string(bounds[1]) + ") of dim " +
                     std::to_string(*dim) + " is empty (start must be below "
                                            "end)");
    return std::nullopt;
  }
  TensorType out = type;
  out.shape[*dim] = bounds[1] - bounds[0];
  return Value::ofTensor(addNode(NodeKind::Slice, {x->node}, out, e.loc,
                                 {*dim, bounds[0], bounds[1]}));
}

std::optional<Value> Sema::evaluateConcat(const Expr &e, Scope &scope) {
  const Expr &list = *e.operands[0];
  if (list.kind != Expr::Kind::List || list.operands.empty()) {
    error(list.loc, "concat needs a non-empty list of tensors, as in "
                    "concat([a, b], dim)");
    return std::nullopt;
  }
  std::vector<int> parts;
  for (const ExprPtr &elt : list.operands) {
    std::optional<Value> v = evaluate(*elt, scope);
    if (!v)
      return std::nullopt;
    if (!v->isTensor() || typeOf(v->node).rank() == 0) {
      error(elt->loc, "concat joins tensors of rank >= 1, got " +
                          describe(*v, v->isTensor() ? &typeOf(v->node)
                                                     : nullptr));
      return std::nullopt;
    }
    parts.push_back(v->node);
  }
  const TensorType first = typeOf(parts[0]);
  std::optional<int64_t> dim =
      evaluateDim(*e.operands[1], scope, first.rank(), "the concat dim");
  if (!dim)
    return std::nullopt;
  TensorType out = first;
  out.shape[*dim] = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const TensorType t = typeOf(parts[i]);
    bool agrees = t.element == first.element && t.rank() == first.rank();
    for (int64_t d = 0; agrees && d < t.rank(); ++d)
      agrees = d == *dim || t.shape[d] == first.shape[d];
    if (!agrees) {
      error(list.operands[i]->loc,
            "concat along dim " + std::to_string(*dim) + ": " +
                formatType(t) + " does not match the first tensor " +
                formatType(first) + " (all but dim " + std::to_string(*dim) +
                " and the element type must agree)");
      return std::nullopt;
    }
    out.shape[*dim] += t.shape[*dim];
  }
  if (parts.size() == 1)
    return Value::ofTensor(parts[0]);
  if (!checkTensorSize(out.shape, e.loc))
    return std::nullopt;
  return Value::ofTensor(
      addNode(NodeKind::Concat, parts, out, e.loc, {*dim}));
}

std::optional<std::vector<Value>>
Sema::evaluateSplit(const Expr &e, Scope &scope, size_t names) {
  if (e.operands.size() != 3) {
    error(e.loc, "'split' expects 3 arguments, got " +
                     std::to_string(e.operands.size()) +
                     "; usage: a, b, ... = split(x, [sizes], dim)");
    return std::nullopt;
  }
  std::optional<Value> x = evaluate(*e.operands[0], scope);
  if (!x)
    return std::nullopt;
  if (!x->isTensor() || typeOf(x->node).rank() == 0) {
    error(e.operands[0]->loc,
          "split needs a tensor of rank >= 1, got " +
              describe(*x, x->isTensor() ? &typeOf(x->node) : nullptr));
    return std::nullopt;
  }
  const TensorType type = typeOf(x->node);
  std::optional<std::vector<int64_t>> sizes =
      evaluateIntList(*e.operands[1], scope, "the split sizes");
  if (!sizes)
    return std::nullopt;
  std::optional<int64_t> dim =
      evaluateDim(*e.operands[2], scope, type.rank(), "the split dim");
  if (!dim)
    return std::nullopt;
  int64_t total = 0;
  for (int64_t s : *sizes) {
    if (s <= 0) {
      error(e.operands[1]->loc, "split sizes must be positive, got " +
                                    formatShape(*sizes));
      return std::nullopt;
    }
    total += s;
  }
  if (total != type.shape[*dim]) {
    error(e.operands[1]->loc,
          "split sizes " + formatShape(*sizes) + " add up to " +
              std::to_string(total) + " but dim " + std::to_string(*dim) +
              " of " + formatShape(type.shape) + " has " +
              std::to_string(type.shape[*dim]));
    return std::nullopt;
  }
  if (sizes->size() != names) {
    error(e.loc, "split gives " + std::to_string(sizes->size()) +
                     " tensors but " + std::to_string(names) +
                     (names == 1 ? " name is" : " names are") + " assigned");
    return std::nullopt;
  }
  std::vector<Value> parts;
  int64_t start = 0;
  for (int64_t s : *sizes) {
    TensorType out = type;
    out.shape[*dim] = s;
    parts.push_back(Value::ofTensor(addNode(NodeKind::Slice, {x->node}, out,
                                            e.loc, {*dim, start, start + s})));
    start += s;
  }
  return parts;
}

std::optional<std::vector<Value>> Sema::evaluateStatement(const Stmt &s,
                                                          Scope &scope) {
  if (s.moreNames.empty()) {
    std::optional<Value> v = evaluate(*s.value, scope);
    if (!v)
      return std::nullopt;
    return std::vector<Value>{*v};
  }
  const Expr &e = *s.value;
  if (e.kind != Expr::Kind::Call || e.name != "split") {
    error(e.loc, "only split(...) gives several tensors; '" + s.name + ", " +
                     s.moreNames.front() +
                     (s.moreNames.size() > 1 ? ", ..." : "") +
                     " = ...' needs a call to split");
    return std::nullopt;
  }
  return evaluateSplit(e, scope, s.moreNames.size() + 1);
}

void Sema::bindNames(const Stmt &s, const std::vector<Value> &values,
                     Scope &scope) {
  scope.vars[s.name] = values[0];
  for (size_t i = 0; i < s.moreNames.size(); ++i)
    scope.vars[s.moreNames[i]] = values[i + 1];
}

} // namespace kiln
