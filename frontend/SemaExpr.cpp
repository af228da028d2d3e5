//===- SemaExpr.cpp - Expressions: arithmetic, @, gather, block calls -----===//
//
// Each expression evaluates to a compile-time Number (folded here) or a
// tensor node with a checked shape. Arithmetic follows numpy broadcasting;
// the broadcasts are made explicit (kiln.broadcast) so that every
// elementwise node sees operands of one type, and a number mixed with a
// tensor becomes a splat constant of the tensor's type.
//
//===----------------------------------------------------------------------===//

#include "frontend/Sema.h"
#include "frontend/UnaryMath.h"

#include <algorithm>
#include <limits>

namespace kiln {

int Sema::addNode(NodeKind kind, std::vector<int> operands, TensorType type,
                  SourceLoc loc, std::vector<int64_t> dims, double value) {
  Node n;
  n.kind = kind;
  n.operands = std::move(operands);
  n.type = std::move(type);
  n.dims = std::move(dims);
  n.value = value;
  n.locs.push_back(loc);
  for (auto it = callStack_.rbegin(); it != callStack_.rend(); ++it)
    n.locs.push_back(*it);
  n.callInstances.assign(callInstances_.rbegin(), callInstances_.rend());
  graph_.nodes.push_back(std::move(n));
  return (int)graph_.nodes.size() - 1;
}

Value Sema::unaryMath(const UnaryMath &math, int operand, SourceLoc loc) {
  int node = addNode(NodeKind::UnaryMath, {operand}, typeOf(operand), loc);
  graph_.nodes[node].mathOp = math.op;
  return Value::ofTensor(node);
}

int Sema::addSplat(double value, const TensorType &type, SourceLoc loc) {
  return addNode(NodeKind::Constant, {}, type, loc, {}, value);
}

/// Right-aligned numpy broadcast of `node` to `shape` (which the caller has
/// checked is compatible). Returns the node itself when nothing changes.
std::optional<int>
Sema::broadcastTo(int node, const std::vector<int64_t> &shape, SourceLoc loc) {
  const TensorType &in = typeOf(node);
  if (in.shape == shape)
    return node;
  int64_t offset = (int64_t)shape.size() - in.rank();
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < in.rank(); ++i)
    dims.push_back(offset + i);
  TensorType out{shape, in.element};
  return addNode(NodeKind::Broadcast, {node}, out, loc, dims);
}

std::optional<int> Sema::requireFloatTensor(const Value &v, SourceLoc loc,
                                            const std::string &what) {
  if (!v.isTensor()) {
    error(loc, what + " must be a tensor, got the number " + v.number.str());
    return std::nullopt;
  }
  if (!typeOf(v.node).isFloat()) {
    error(loc, what + " must be a float tensor, got the " +
                   (typeOf(v.node).isBool() ? "boolean" : "integer") +
                   " tensor " + formatType(typeOf(v.node)));
    return std::nullopt;
  }
  return v.node;
}

std::optional<int> Sema::requireIntTensor(const Value &v, SourceLoc loc,
                                          const std::string &what) {
  if (!v.isTensor()) {
    error(loc, what + " must be an integer tensor, got the number " +
                   v.number.str());
    return std::nullopt;
  }
  if (typeOf(v.node).element != ElementType::I32) {
    error(loc, what + " must be an integer tensor, got " +
                   formatType(typeOf(v.node)));
    return std::nullopt;
  }
  return v.node;
}

std::optional<Value> Sema::evaluate(const Expr &e, Scope &scope) {
  // The parser bounds each expression's depth, but inlining nests a block's
  // body inside its call (and blocks call blocks): bound the total so the
  // recursion cannot overflow the stack.
  if (evaluationDepth_.atLimit()) {
    error(e.loc, "expression is nested too deeply after inlining blocks "
                 "(more than " +
                     std::to_string(evaluationDepth_.limit()) + " levels)");
    return std::nullopt;
  }
  RecursionDepth::Scope level(evaluationDepth_);
  switch (e.kind) {
  case Expr::Kind::Number:
    return Value::ofNumber(e.isInteger ? Number::ofInt(e.intNumber)
                                       : Number::ofFloat(e.number));
  case Expr::Kind::Name:
    return evaluateName(e, scope);
  case Expr::Kind::Unary:
    return evaluateUnary(e, scope);
  case Expr::Kind::Binary:
    return evaluateBinary(e, scope);
  case Expr::Kind::Call:
    return evaluateCall(e, scope);
  case Expr::Kind::Index:
    return evaluateIndex(e, scope);
  case Expr::Kind::Repeat:
    return evaluateRepeat(e, scope);
  case Expr::Kind::List:
    error(e.loc, "a list '[...]' is only allowed as the shape, permutation "
                 "or dims argument of reshape, transpose, sum or mean");
    return std::nullopt;
  }
  return std::nullopt;
}

std::optional<Value> Sema::evaluateName(const Expr &e, Scope &scope) {
  if (auto it = scope.vars.find(e.name); it != scope.vars.end())
    return it->second;
  int param = -1;
  if (auto it = scope.params.find(e.name); it != scope.params.end())
    param = it->second;
  else if (auto it = topParams_.find(e.name); it != topParams_.end())
    param = it->second;
  if (param >= 0) {
    auto [it, inserted] = paramNode_.emplace(param, -1);
    if (inserted)
      it->second = addNode(NodeKind::Param, {}, graph_.params[param].type,
                           graph_.params[param].loc);
    graph_.nodes[it->second].argIndex = param;
    return Value::ofTensor(it->second);
  }
  if (auto in = inputIndex_.find(e.name); in != inputIndex_.end()) {
    auto [it, inserted] = inputNode_.emplace(in->second, -1);
    if (inserted) {
      it->second = addNode(NodeKind::Input, {}, graph_.inputs[in->second].type,
                           graph_.inputs[in->second].loc);
      graph_.nodes[it->second].argIndex = in->second;
    }
    return Value::ofTensor(it->second);
  }
  if (consts_.isConstant(e.name)) {
    std::optional<Number> n = consts_.lookup(e.name, e.loc);
    if (!n)
      return std::nullopt;
    return Value::ofNumber(*n);
  }
  if (blocks_.count(e.name)) {
    error(e.loc, "'" + e.name + "' is a block; call it as " + e.name + "(x)");
    return std::nullopt;
  }
  // `-inf` fills masks: where(keep, scores, -inf), as in attention's mask.
  if (e.name == "inf")
    return Value::ofNumber(
        Number::ofFloat(std::numeric_limits<double>::infinity()));
  error(e.loc, "unknown name '" + e.name + "'");
  return std::nullopt;
}

std::optional<Value> Sema::evaluateUnary(const Expr &e, Scope &scope) {
  if (isBooleanOperator(e.op))
    return evaluateBooleanOperator(e, scope);
  std::optional<Value> x = evaluate(*e.operands[0], scope);
  if (!x)
    return std::nullopt;
  if (!x->isTensor()) {
    const Number &n = x->number;
    return Value::ofNumber(n.isInteger ? Number::ofInt(-n.intValue)
                                       : Number::ofFloat(-n.value));
  }
  if (!typeOf(x->node).isFloat()) {
    error(e.loc, "integer tensor used in arithmetic: unary '-' on " +
                     formatType(typeOf(x->node)));
    return std::nullopt;
  }
  return Value::ofTensor(
      addNode(NodeKind::Neg, {x->node}, typeOf(x->node), e.loc));
}

std::optional<Value> Sema::evaluateBinary(const Expr &e, Scope &scope) {
  if (isBooleanOperator(e.op))
    return evaluateBooleanOperator(e, scope);
  std::optional<Value> a = evaluate(*e.operands[0], scope);
  if (!a)
    return std::nullopt;
  std::optional<Value> b = evaluate(*e.operands[1], scope);
  if (!b)
    return std::nullopt;
  return arithmetic(e.op, *a, *b, e.loc);
}

std::optional<Value> Sema::arithmetic(char op, const Value &a, const Value &b,
                                      SourceLoc loc) {
  std::string opName = op == '^' ? "**" : std::string(1, op);

  if (!a.isTensor() && !b.isTensor()) {
    if (op == '@') {
      error(loc, "'@' needs tensor operands, got the numbers " +
                       a.number.str() + " and " + b.number.str());
      return std::nullopt;
    }
    std::string err;
    std::optional<Number> r = foldBinary(op, a.number, b.number, err);
    if (!r) {
      error(loc, err);
      return std::nullopt;
    }
    return Value::ofNumber(*r);
  }

  // Integer tensors only index gathers and carry cross_entropy targets.
  for (const Value *v : {&a, &b})
    if (v->isTensor() && typeOf(v->node).isBool()) {
      error(loc, "boolean tensor used in arithmetic: '" + opName + "' on " +
                       formatType(typeOf(v->node)) +
                       " (write where(c, 1.0, 0.0) for a 0/1 float)");
      return std::nullopt;
    }
  for (const Value *v : {&a, &b})
    if (v->isTensor() && !typeOf(v->node).isFloat()) {
      error(loc, "integer tensor used in arithmetic: '" + opName + "' on " +
                       formatType(typeOf(v->node)) +
                       " (integer tensors may only be gather indices or "
                       "cross_entropy targets)");
      return std::nullopt;
    }

  // x ** 2 is kiln.square (one multiply, no powf); any other power is
  // kiln.pow.
  if (op == '^' && a.isTensor() && !b.isTensor() &&
      b.number.value == 2.0)
    return unaryMath(*findUnaryMath("square"), a.node, loc);
  if (op == '@') {
    if (!a.isTensor() || !b.isTensor()) {
      error(loc, "'@' needs tensor operands, got a number");
      return std::nullopt;
    }
    return evaluateMatmul(loc, a.node, b.node);
  }

  // A number operand becomes a splat of the tensor operand's type.
  int lhs = a.isTensor() ? a.node
                          : addSplat(a.number.value, typeOf(b.node), loc);
  int rhs = b.isTensor() ? b.node
                          : addSplat(b.number.value, typeOf(a.node), loc);

  // numpy broadcasting: align right; each dim pair is equal or has a 1.
  const std::vector<int64_t> &sa = typeOf(lhs).shape, &sb = typeOf(rhs).shape;
  size_t rank = std::max(sa.size(), sb.size());
  std::vector<int64_t> shape(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - sa.size() ? 1 : sa[i - (rank - sa.size())];
    int64_t db = i < rank - sb.size() ? 1 : sb[i - (rank - sb.size())];
    if (da != db && da != 1 && db != 1) {
      error(loc, "cannot broadcast shapes " + formatShape(sa) + " and " +
                       formatShape(sb) + " in '" + opName + "'");
      return std::nullopt;
    }
    shape[i] = da == 1 ? db : da;
  }
  // Broadcasting multiplies sizes: [N, 1, 1] + [N, 1] + [N] is N^3.
  if (!checkTensorSize(shape, loc))
    return std::nullopt;
  std::optional<int> l = broadcastTo(lhs, shape, loc);
  std::optional<int> r = broadcastTo(rhs, shape, loc);
  if (!l || !r)
    return std::nullopt;
  NodeKind kind = op == '+'   ? NodeKind::Add
                  : op == '-' ? NodeKind::Sub
                  : op == '*' ? NodeKind::Mul
                  : op == '^' ? NodeKind::Pow
                                : NodeKind::Div;
  return Value::ofTensor(addNode(kind, {*l, *r}, typeOf(*l), loc));
}

/// lhs [..., M, K] @ rhs [K, N] (shared over the batch) or [..., K, N] with
/// the same batch dims -> [..., M, N].
std::optional<Value> Sema::evaluateMatmul(SourceLoc loc, int lhs, int rhs) {
  const TensorType &a = typeOf(lhs), &b = typeOf(rhs);
  std::string shapes = formatShape(a.shape) + " @ " + formatShape(b.shape);
  if (a.rank() < 2 || b.rank() < 2) {
    error(loc, "shape mismatch in '@': " + shapes +
                     " (both operands need rank >= 2)");
    return std::nullopt;
  }
  bool sharedRhs = b.rank() == 2;
  bool sameBatch =
      b.rank() == a.rank() &&
      std::equal(a.shape.begin(), a.shape.end() - 2, b.shape.begin());
  if (!sharedRhs && !sameBatch) {
    error(loc, "shape mismatch in '@': " + shapes +
                     " (the right operand must be 2-D or have the same "
                     "batch dimensions as the left)");
    return std::nullopt;
  }
  int64_t k1 = a.shape[a.rank() - 1], k2 = b.shape[b.rank() - 2];
  if (k1 != k2) {
    error(loc, "shape mismatch in '@': " + shapes +
                     " (contracted dimensions " + std::to_string(k1) + " and " +
                     std::to_string(k2) + " differ)");
    return std::nullopt;
  }
  TensorType out = a;
  out.shape.back() = b.shape.back();
  if (!checkTensorSize(out.shape, loc)) // [M, 1] @ [1, N] is M * N
    return std::nullopt;
  return Value::ofTensor(addNode(NodeKind::Matmul, {lhs, rhs}, out, loc));
}

/// table [V, D] [ indices [...] ] -> [..., D] (kiln.embedding).
std::optional<Value> Sema::evaluateIndex(const Expr &e, Scope &scope) {
  if (e.operands.size() != 2) {
    error(e.operands[2]->loc,
          "a gather takes one index tensor (several scalar indices like "
          "x[b, i] are only allowed in attention's score and mask)");
    return std::nullopt;
  }
  std::optional<Value> table = evaluate(*e.operands[0], scope);
  if (!table)
    return std::nullopt;
  std::optional<Value> index = evaluate(*e.operands[1], scope);
  if (!index)
    return std::nullopt;
  std::optional<int> t =
      requireFloatTensor(*table, e.operands[0]->loc, "the gathered table");
  if (!t)
    return std::nullopt;
  if (typeOf(*t).rank() != 2) {
    error(e.operands[0]->loc, "gather needs a 2-D table [rows, dim], got " +
                                  formatShape(typeOf(*t).shape));
    return std::nullopt;
  }
  if (!index->isTensor()) {
    // A number picks no rows: gathers take a tensor of row ids (a row is
    // table[iota(...)], or slice(table, 0, r, r + 1)).
    error(e.operands[1]->loc,
          "gather needs an integer tensor of row ids, got the number " +
              index->number.str() + " (for one row, slice(table, 0, r, r + 1))");
    return std::nullopt;
  }
  if (typeOf(index->node).element != ElementType::I32) {
    error(e.operands[1]->loc,
          "gather with a non-integer index: the index must be an integer "
          "tensor, got " + formatType(typeOf(index->node)));
    return std::nullopt;
  }
  // Indices known at compile time (iota(n), possibly reshaped) must name
  // rows of the table; the kernel would read zeros for the rest (e.g.
  // wpe[iota(seq)] after -D seq=... beyond the context length).
  int source = index->node;
  while (graph_.nodes[source].kind == NodeKind::Reshape)
    source = graph_.nodes[source].operands[0];
  int64_t rows = typeOf(*t).shape[0];
  if (graph_.nodes[source].kind == NodeKind::Iota &&
      typeOf(source).shape[0] > rows) {
    int64_t n = typeOf(source).shape[0];
    error(e.operands[1]->loc,
          "gather indices iota(" + std::to_string(n) + ") go up to " +
              std::to_string(n - 1) + ", but the table " +
              formatShape(typeOf(*t).shape) + " has " + std::to_string(rows) +
              " rows");
    return std::nullopt;
  }
  TensorType out = typeOf(index->node);
  out.element = ElementType::F32;
  out.shape.push_back(typeOf(*t).shape[1]);
  if (!checkTensorSize(out.shape, e.loc)) // indices [...] x row width
    return std::nullopt;
  return Value::ofTensor(
      addNode(NodeKind::Embedding, {*t, index->node}, out, e.loc));
}

std::optional<Value> Sema::evaluateCall(const Expr &e, Scope &scope) {
  if (e.name == "attention")
    return evaluateAttention(e, scope);
  if (e.name == "rope")
    return evaluateRope(e, scope);
  auto block = blocks_.find(e.name);
  if (block != blocks_.end()) {
    std::string remat;
    std::optional<std::vector<Value>> args = blockCallArgs(e, scope, remat);
    if (!args)
      return std::nullopt;
    return callBlock(*block->second, e, std::move(*args), remat);
  }
  for (size_t i = 0; i < e.keywords.size(); ++i)
    if (!e.keywords[i].empty()) {
      error(e.operands[i]->loc, "'" + e.name + "' takes no keyword "
                                "arguments ('" + e.keywords[i] + " = ...')");
      return std::nullopt;
    }
  if (isBuiltin(e.name))
    return evaluateBuiltin(e, scope);
  error(e.loc, "unknown function '" + e.name + "'");
  return std::nullopt;
}

std::optional<std::vector<Value>> Sema::blockCallArgs(const Expr &call, Scope &scope,
                                                      std::string &remat) {
  std::vector<Value> args;
  for (size_t i = 0; i < call.operands.size(); ++i) {
    const Expr &arg = *call.operands[i];
    const std::string keyword = i < call.keywords.size() ? call.keywords[i] : "";
    if (keyword.empty()) {
      std::optional<Value> v = evaluate(arg, scope);
      if (!v)
        return std::nullopt;
      args.push_back(*v);
      continue;
    }
    if (keyword != "remat") {
      error(arg.loc, "block '" + call.name + "' takes one keyword argument, remat = "
                     "none | pointwise | selective | full; got '" + keyword + " = ...'");
      return std::nullopt;
    }
    static const char *const kTiers[] = {"none", "pointwise", "selective", "full"};
    if (arg.kind != Expr::Kind::Name ||
        std::find(std::begin(kTiers), std::end(kTiers), arg.name) == std::end(kTiers)) {
      error(arg.loc, "remat = ... of a block call is none, pointwise, selective or full "
                     "(how much of the block the backward recomputes)");
      return std::nullopt;
    }
    if (!callInstances_.empty()) {
      error(arg.loc, "remat = ... applies to a block called outside any block: the "
                     "remat phase plans each top-level instance ('" +
                         callInstances_.front() + "' here)");
      return std::nullopt;
    }
    remat = arg.name;
  }
  return args;
}

/// `repeat N Block(x, rest...)` = Block(...Block(x, rest...)..., rest...):
/// the first argument threads through the repetitions.
std::optional<Value> Sema::evaluateRepeat(const Expr &e, Scope &scope) {
  std::optional<Value> count = evaluate(*e.operands[0], scope);
  if (!count)
    return std::nullopt;
  if (count->isTensor() || !count->number.isInteger ||
      count->number.intValue <= 0) {
    error(e.operands[0]->loc,
          "the repeat count must be a positive integer" +
              (count->isTensor() ? std::string()
                                 : ", got " + count->number.str()));
    return std::nullopt;
  }
  const Expr &call = *e.operands[1];
  auto block = blocks_.find(call.name);
  if (block == blocks_.end()) {
    error(call.loc, isBuiltin(call.name)
                        ? "'repeat' applies a block, and '" + call.name +
                              "' is a builtin function"
                        : "unknown block '" + call.name + "'");
    return std::nullopt;
  }
  if (call.operands.empty()) {
    error(call.loc, "'repeat' needs a block with at least one argument to "
                    "thread through the repetitions");
    return std::nullopt;
  }
  std::string remat;
  std::optional<std::vector<Value>> evaluated = blockCallArgs(call, scope, remat);
  if (!evaluated)
    return std::nullopt;
  std::vector<Value> args = std::move(*evaluated);
  if (args.empty()) {
    error(call.loc, "'repeat' needs a block with at least one argument to "
                    "thread through the repetitions");
    return std::nullopt;
  }
  for (long long i = 0; i < count->number.intValue; ++i) {
    std::optional<Value> out = callBlock(*block->second, call, args, remat);
    if (!out)
      return std::nullopt;
    args[0] = *out;
  }
  return args[0];
}

/// Inlines one call: binds the arguments, creates this instance's
/// parameters (`Block.<n>.<param>`) and runs the body.
std::optional<Value> Sema::callBlock(const BlockDecl &block, const Expr &call,
                                     std::vector<Value> args, const std::string &remat) {
  if (args.size() != block.args.size()) {
    error(call.loc, "block '" + block.name + "' expects " +
                        std::to_string(block.args.size()) + " argument" +
                        (block.args.size() == 1 ? "" : "s") + ", got " +
                        std::to_string(args.size()));
    return std::nullopt;
  }
  // Inlining multiplies ops and parameters; stop a runaway `repeat` while
  // the compile still takes seconds, and count the calls too: a block that
  // adds neither (`return x`) would otherwise spin through any repeat count.
  constexpr size_t kMaxSize = 250'000, kMaxCalls = 250'000;
  if (graph_.nodes.size() + graph_.params.size() > kMaxSize) {
    error(call.loc, "the model has more than " + std::to_string(kMaxSize) +
                        " ops and parameters after inlining block '" +
                        block.name + "'");
    return std::nullopt;
  }
  if (++inlinedCalls_ > kMaxCalls) {
    error(call.loc, "the model makes more than " + std::to_string(kMaxCalls) +
                        " block calls (inlining block '" + block.name + "')");
    return std::nullopt;
  }
  for (const std::string &active : activeBlocks_)
    if (active == block.name) {
      error(call.loc, "block '" + block.name + "' calls itself recursively");
      return std::nullopt;
    }

  Scope scope;
  for (size_t i = 0; i < args.size(); ++i) {
    const BlockArg &decl = block.args[i];
    SourceLoc argLoc =
        i < call.operands.size() ? call.operands[i]->loc : call.loc;
    TensorType expected;
    expected.element =
        decl.dtype == "i32" ? ElementType::I32 : ElementType::F32;
    if (!evaluateShape(decl.shape, "argument '" + decl.name + "'",
                       expected.shape))
      return std::nullopt;
    if (!args[i].isTensor()) {
      error(argLoc, "argument '" + decl.name + "' of block '" + block.name +
                        "' must be a tensor " + formatType(expected) +
                        ", got the number " + args[i].number.str());
      return std::nullopt;
    }
    if (!(typeOf(args[i].node) == expected)) {
      error(argLoc, "block '" + block.name + "' called with a wrong " +
                        "argument shape: '" + decl.name + "' is declared " +
                        formatType(expected) + ", got " +
                        formatType(typeOf(args[i].node)));
      return std::nullopt;
    }
    scope.vars[decl.name] = args[i];
  }

  int instance = instanceCount_[block.name]++;
  if (!remat.empty())
    graph_.rematOverrides[block.name + "." + std::to_string(instance)] = remat;
  callStack_.push_back(call.loc);
  callInstances_.push_back(block.name + "." + std::to_string(instance));
  activeBlocks_.push_back(block.name);
  auto leave = [&] {
    callStack_.pop_back();
    callInstances_.pop_back();
    activeBlocks_.pop_back();
  };

  for (const ParamDecl &p : block.params) {
    std::optional<int> idx = createParam(
        p, block.name + "." + std::to_string(instance) + "." + p.name);
    if (!idx)
      return leave(), std::nullopt;
    scope.params[p.name] = *idx;
  }

  std::optional<Value> result;
  for (const Stmt &s : block.body) {
    if (result) {
      error(s.loc, "statement after 'return' in block '" + block.name + "'");
      return leave(), std::nullopt;
    }
    if (!checkAssignedNames(s, &scope))
      return leave(), std::nullopt;
    std::optional<std::vector<Value>> v = evaluateStatement(s, scope);
    if (!v)
      return leave(), std::nullopt;
    if (s.isMetric &&
        !recordMetric(s, v->front(),
                      block.name + "." + std::to_string(instance) + "." +
                          s.name))
      return leave(), std::nullopt;
    if (s.isReturn)
      result = v->front();
    else
      bindNames(s, *v, scope);
  }
  if (!result) {
    error(block.loc, "block '" + block.name + "' has no 'return'");
    return leave(), std::nullopt;
  }
  leave();
  return result;
}

} // namespace kiln
