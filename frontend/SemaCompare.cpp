//===- SemaCompare.cpp - Comparisons, where() and float() on tensors ------===//
//
// Booleans on tensors: `a < b` (also <=, >, >=, ==, !=) broadcasts like `+`
// and gives a bool tensor; `and` / `or` / `not` combine bool tensors;
// `where(c, a, b)` picks elementwise (numbers such as `-inf` or `0` become
// splats of the other value's type); `float(x)` turns an i32 tensor (an
// iota, a length) into f32 so that it can enter arithmetic. Attention's
// score and mask expressions use the same spellings on scalars
// (SemaAttention.cpp), so a mask written as a tensor and one written inside
// attention(mask = ...) read alike:
//
//   keep = iota(seq)[None, :] <= iota(seq)[:, None]       # [S, S] bool
//   att = where(keep, q @ transpose(k) * scale, -inf)
//
// and/or/not lower to kiln.select (`a and b` = where(a, b, false)), so the
// dialect needs no boolean arithmetic.
//
//===----------------------------------------------------------------------===//

#include "frontend/Sema.h"

namespace kiln {

std::optional<std::vector<int64_t>>
Sema::broadcastShapes(const std::vector<const std::vector<int64_t> *> &shapes,
                      SourceLoc loc, const std::string &what) {
  size_t rank = 0;
  for (const std::vector<int64_t> *s : shapes)
    rank = std::max(rank, s->size());
  std::vector<int64_t> out(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    for (const std::vector<int64_t> *s : shapes) {
      int64_t d = i < rank - s->size() ? 1 : (*s)[i - (rank - s->size())];
      if (d != out[i] && d != 1 && out[i] != 1) {
        std::string list;
        for (const std::vector<int64_t> *t : shapes)
          list += (list.empty() ? "" : " and ") + formatShape(*t);
        error(loc, "cannot broadcast shapes " + list + " in " + what);
        return std::nullopt;
      }
      if (d != 1)
        out[i] = d;
    }
  }
  if (!checkTensorSize(out, loc))
    return std::nullopt;
  return out;
}

/// `a < b`, `a and b`, `not a` on tensors.
std::optional<Value> Sema::evaluateBooleanOperator(const Expr &e,
                                                   Scope &scope) {
  std::string what = "'" + operatorSpelling(e.op) + "'";
  std::vector<Value> args;
  for (const ExprPtr &operand : e.operands) {
    std::optional<Value> v = evaluate(*operand, scope);
    if (!v)
      return std::nullopt;
    args.push_back(*v);
  }
  bool logical = e.op == '&' || e.op == '|' || e.op == '!';
  if (logical) {
    // Both sides must already be booleans: `x and 1` has no meaning.
    for (size_t i = 0; i < args.size(); ++i)
      if (!args[i].isTensor() || !typeOf(args[i].node).isBool()) {
        error(e.operands[i]->loc,
              what + " needs boolean tensors (comparisons), got " +
                  (args[i].isTensor() ? formatType(typeOf(args[i].node))
                                      : "the number " + args[i].number.str()));
        return std::nullopt;
      }
    if (e.op == '!') {
      // not a = where(a, false, true)
      const TensorType t = typeOf(args[0].node);
      int f = addSplat(0, t, e.loc), tr = addSplat(1, t, e.loc);
      return Value::ofTensor(
          addNode(NodeKind::Select, {args[0].node, f, tr}, t, e.loc));
    }
    std::optional<std::vector<int64_t>> shape = broadcastShapes(
        {&typeOf(args[0].node).shape, &typeOf(args[1].node).shape}, e.loc,
        what);
    if (!shape)
      return std::nullopt;
    std::optional<int> a = broadcastTo(args[0].node, *shape, e.loc);
    std::optional<int> b = broadcastTo(args[1].node, *shape, e.loc);
    if (!a || !b)
      return std::nullopt;
    TensorType t{*shape, ElementType::Bool};
    // a and b = where(a, b, false); a or b = where(a, true, b)
    int constant = addSplat(e.op == '&' ? 0 : 1, t, e.loc);
    std::vector<int> ops = e.op == '&' ? std::vector<int>{*a, *b, constant}
                                       : std::vector<int>{*a, constant, *b};
    return Value::ofTensor(addNode(NodeKind::Select, ops, t, e.loc));
  }

  // A comparison: at least one tensor; a number becomes a splat of the
  // tensor's type (an integer tensor compares with an integer number only).
  const Value &a = args[0], &b = args[1];
  if (!a.isTensor() && !b.isTensor()) {
    error(e.loc, what + " on two compile-time numbers (" + a.number.str() +
                     " and " + b.number.str() +
                     "): comparisons build boolean tensors");
    return std::nullopt;
  }
  for (size_t i = 0; i < 2; ++i)
    if (args[i].isTensor() && typeOf(args[i].node).isBool()) {
      error(e.operands[i]->loc,
            what + " compares numbers, got the boolean tensor " +
                formatType(typeOf(args[i].node)));
      return std::nullopt;
    }
  const TensorType like = typeOf(a.isTensor() ? a.node : b.node);
  auto splatFor = [&](const Value &v, SourceLoc loc) -> std::optional<int> {
    if (v.isTensor())
      return v.node;
    if (!like.isFloat() && !v.number.isInteger) {
      error(loc, what + " compares the integer tensor " + formatType(like) +
                     " with the non-integer " + v.number.str() +
                     "; write float(x) to compare as floats");
      return std::nullopt;
    }
    return addSplat(v.number.value, TensorType{{}, like.element}, e.loc);
  };
  std::optional<int> l = splatFor(a, e.operands[0]->loc);
  std::optional<int> r = splatFor(b, e.operands[1]->loc);
  if (!l || !r)
    return std::nullopt;
  if (typeOf(*l).element != typeOf(*r).element) {
    error(e.loc, what + " compares " + formatType(typeOf(*l)) + " with " +
                     formatType(typeOf(*r)) +
                     "; write float(x) to compare an integer tensor with a "
                     "float one");
    return std::nullopt;
  }
  std::optional<std::vector<int64_t>> shape = broadcastShapes(
      {&typeOf(*l).shape, &typeOf(*r).shape}, e.loc, what);
  if (!shape)
    return std::nullopt;
  std::optional<int> lb = broadcastTo(*l, *shape, e.loc);
  std::optional<int> rb = broadcastTo(*r, *shape, e.loc);
  if (!lb || !rb)
    return std::nullopt;
  int node = addNode(NodeKind::Compare, {*lb, *rb},
                     TensorType{*shape, ElementType::Bool}, e.loc);
  graph_.nodes[node].op = e.op;
  return Value::ofTensor(node);
}

/// where(condition, a, b): condition a bool tensor; a and b tensors of one
/// type or numbers (splats of the other's type, f32 when both are numbers).
std::optional<Value> Sema::evaluateWhere(const Expr &e, Scope &scope) {
  std::vector<Value> args;
  for (const ExprPtr &operand : e.operands) {
    std::optional<Value> v = evaluate(*operand, scope);
    if (!v)
      return std::nullopt;
    args.push_back(*v);
  }
  if (!args[0].isTensor() || !typeOf(args[0].node).isBool()) {
    error(e.operands[0]->loc,
          "the condition of where(c, a, b) must be a boolean tensor (a "
          "comparison), got " +
              (args[0].isTensor() ? formatType(typeOf(args[0].node))
                                  : "the number " + args[0].number.str()));
    return std::nullopt;
  }
  ElementType element = ElementType::F32;
  for (size_t i = 1; i < 3; ++i)
    if (args[i].isTensor())
      element = typeOf(args[i].node).element;
  std::vector<int> nodes = {args[0].node};
  for (size_t i = 1; i < 3; ++i) {
    if (args[i].isTensor()) {
      if (typeOf(args[i].node).element != element) {
        error(e.operands[i]->loc,
              "the values of where(c, a, b) must have one type, got " +
                  formatType(typeOf(args[1].node)) + " and " +
                  formatType(typeOf(args[2].node)));
        return std::nullopt;
      }
      nodes.push_back(args[i].node);
      continue;
    }
    if (element != ElementType::F32 && !args[i].number.isInteger) {
      error(e.operands[i]->loc, "where(c, a, b) picks between integer "
                                "tensors and the non-integer " +
                                    args[i].number.str());
      return std::nullopt;
    }
    nodes.push_back(
        addSplat(args[i].number.value, TensorType{{}, element}, e.loc));
  }
  std::optional<std::vector<int64_t>> shape =
      broadcastShapes({&typeOf(nodes[0]).shape, &typeOf(nodes[1]).shape,
                       &typeOf(nodes[2]).shape},
                      e.loc, "where(c, a, b)");
  if (!shape)
    return std::nullopt;
  for (int &n : nodes) {
    std::optional<int> b = broadcastTo(n, *shape, e.loc);
    if (!b)
      return std::nullopt;
    n = *b;
  }
  return Value::ofTensor(addNode(NodeKind::Select, nodes,
                                 TensorType{*shape, element}, e.loc));
}

/// float(x): an i32 tensor as f32 (a number stays a number, as a float).
std::optional<Value> Sema::evaluateToFloat(const Expr &e, Scope &scope) {
  std::optional<Value> x = evaluate(*e.operands[0], scope);
  if (!x)
    return std::nullopt;
  if (!x->isTensor())
    return Value::ofNumber(Number::ofFloat(x->number.value));
  const TensorType t = typeOf(x->node);
  if (t.isFloat())
    return x;
  if (t.isBool()) {
    error(e.operands[0]->loc,
          "float(x) converts integer tensors; for a boolean use "
          "where(c, 1.0, 0.0)");
    return std::nullopt;
  }
  return Value::ofTensor(addNode(NodeKind::ToFloat, {x->node},
                                 TensorType{t.shape, ElementType::F32},
                                 e.loc));
}

} // namespace kiln
