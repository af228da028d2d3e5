//===- SemaAttention.cpp - attention(q, k, v, score = ..., mask = ...) ----===//
//
// Checks an attention call and lowers its score and mask, written as
// ordinary expressions, into typed scalar expression trees (ScalarExpr) that
// MLIRGen turns into the regions of kiln.attention:
//   - `s` (the scaled q.k, score only) and the indices `b, h, i, j` are
//     scalars; `inf` is +infinity; config constants are numbers;
//   - any tensor in scope indexed with scalars (`slope[h]`, `xy[b, i, 0]`,
//     `len[b]`) is read elementwise; the tensor becomes a capture of the op
//     (once, however often it is read); a rank-0 tensor may be used bare;
//   - + - * / ** on numbers, comparisons < <= > >= == !=, and/or/not on
//     booleans, and exp, log, sqrt, tanh, abs, min, max, where(c, x, y).
// Integers stay integers under + - * (indices, lengths); / and ** give
// floats; a mixed operation converts the integer operand to float. The score
// must be a number and the mask a boolean.
//
//===----------------------------------------------------------------------===//

#include "frontend/Sema.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

namespace kiln {

struct Sema::AttentionLowering {
  bool inScore = false;
  std::vector<int> captures; // graph nodes, in first-use order
  // The extents of b, h, i, j (ScalarExpr::var 1..4): batch, query heads,
  // query and key positions.
  int64_t extent[5] = {0, 0, 0, 0, 0};
};

namespace {

using SE = ScalarExpr;
using SEPtr = std::shared_ptr<ScalarExpr>;

// The values an integer scalar expression takes as b, h, i, j range over
// their extents, when +, -, *, min, max and constants of them bound it
// (interval arithmetic: the bounds may be loose, never too tight); nullopt
// for anything else (a captured tensor's element, a division).
std::optional<std::pair<double, double>> rangeOf(const SE &x, const int64_t *extent) {
  switch (x.kind) {
  case SE::Kind::Const:
    return std::make_pair(x.value, x.value);
  case SE::Kind::Var:
    if (x.var < 1 || x.var > 4 || extent[x.var] <= 0)
      return std::nullopt;
    return std::make_pair(0.0, double(extent[x.var] - 1));
  case SE::Kind::Unary:
    if (x.op != '-')
      return std::nullopt;
    if (auto r = rangeOf(*x.operands[0], extent))
      return std::make_pair(-r->second, -r->first);
    return std::nullopt;
  case SE::Kind::Binary:
  case SE::Kind::Call: {
    bool binary = x.kind == SE::Kind::Binary;
    if (x.operands.size() != 2 ||
        (binary ? (x.op != '+' && x.op != '-' && x.op != '*')
                : (x.fn != "min" && x.fn != "max")))
      return std::nullopt;
    auto a = rangeOf(*x.operands[0], extent), b = rangeOf(*x.operands[1], extent);
    if (!a || !b)
      return std::nullopt;
    if (!binary)
      return x.fn == "min" ? std::make_pair(std::min(a->first, b->first),
                                            std::min(a->second, b->second))
                           : std::make_pair(std::max(a->first, b->first),
                                            std::max(a->second, b->second));
    if (x.op == '+')
      return std::make_pair(a->first + b->first, a->second + b->second);
    if (x.op == '-')
      return std::make_pair(a->first - b->second, a->second - b->first);
    double p[] = {a->first * b->first, a->first * b->second, a->second * b->first,
                  a->second * b->second};
    return std::make_pair(*std::min_element(p, p + 4), *std::max_element(p, p + 4));
  }
  default:
    return std::nullopt;
  }
}

SEPtr makeExpr(SE::Kind kind, SE::Type type) {
  auto e = std::make_shared<ScalarExpr>();
  e->kind = kind;
  e->type = type;
  return e;
}

/// An Int expression as a Float one (constants are converted in place).
SEPtr toFloat(SEPtr x) {
  if (x->type != SE::Type::Int)
    return x;
  if (x->kind == SE::Kind::Const) {
    auto c = std::make_shared<ScalarExpr>(*x);
    c->type = SE::Type::Float;
    return c;
  }
  SEPtr e = makeExpr(SE::Kind::Call, SE::Type::Float);
  e->fn = "float";
  e->operands.push_back(std::move(x));
  return e;
}

const char *typeName(SE::Type t) {
  return t == SE::Type::Float ? "a float"
         : t == SE::Type::Int ? "an integer"
                              : "a boolean";
}

const char *kUsage = "attention(q, k, v, score = <expr>, mask = <expr>, "
                     "scale = <number>, dropout = <number in [0, 1)>)";

} // namespace

std::shared_ptr<ScalarExpr>
Sema::lowerScalarCall(const Expr &e, Scope &scope, AttentionLowering &state) {
  struct Fn {
    const char *name;
    size_t args;
  };
  static const Fn fns[] = {{"exp", 1}, {"log", 1}, {"sqrt", 1},
                           {"tanh", 1}, {"abs", 1}, {"min", 2},
                           {"max", 2},  {"where", 3}, {"float", 1}};
  const Fn *fn = nullptr;
  for (const Fn &f : fns)
    if (e.name == f.name)
      fn = &f;
  if (!fn) {
    error(e.loc, "'" + e.name +
                     "' cannot be used in a score or mask expression "
                     "(allowed: exp, log, sqrt, tanh, abs, min, max, where, "
                     "float)");
    return nullptr;
  }
  if (e.operands.size() != fn->args || !e.keywords.empty()) {
    error(e.loc, "'" + e.name + "' expects " + std::to_string(fn->args) +
                     " positional argument" + (fn->args == 1 ? "" : "s") +
                     ", got " + std::to_string(e.operands.size()));
    return nullptr;
  }
  std::vector<SEPtr> args;
  for (const ExprPtr &arg : e.operands) {
    SEPtr a = lowerScalar(*arg, scope, state);
    if (!a)
      return nullptr;
    args.push_back(std::move(a));
  }
  std::string name = e.name;
  size_t firstNumber = name == "where" ? 1 : 0;
  if (name == "where" && args[0]->type != SE::Type::Bool) {
    error(e.operands[0]->loc, "the condition of 'where' must be a boolean "
                              "(a comparison), got " +
                                  std::string(typeName(args[0]->type)));
    return nullptr;
  }
  for (size_t i = firstNumber; i < args.size(); ++i)
    if (args[i]->type == SE::Type::Bool) {
      error(e.operands[i]->loc, "'" + name +
                                    "' needs a number here, got a boolean");
      return nullptr;
    }
  // float(x): the tensor language's spelling; integers already widen here.
  if (name == "float")
    return toFloat(args[0]);
  SE::Type type = SE::Type::Float;
  if (name == "abs")
    type = args[0]->type;
  if (name == "min" || name == "max" || name == "where") {
    bool ints = true;
    for (size_t i = firstNumber; i < args.size(); ++i)
      ints = ints && args[i]->type == SE::Type::Int;
    type = ints ? SE::Type::Int : SE::Type::Float;
  }
  SEPtr call = makeExpr(SE::Kind::Call, type);
  call->fn = name;
  for (size_t i = 0; i < args.size(); ++i)
    call->operands.push_back(
        i >= firstNumber && type == SE::Type::Float ? toFloat(args[i])
                                                    : args[i]);
  if (type == SE::Type::Float && name != "abs" && name != "min" &&
      name != "max" && name != "where")
    call->operands[0] = toFloat(call->operands[0]);
  return call;
}

std::shared_ptr<ScalarExpr> Sema::lowerScalar(const Expr &e, Scope &scope,
                                              AttentionLowering &state) {
  switch (e.kind) {
  case Expr::Kind::Number: {
    SEPtr c = makeExpr(SE::Kind::Const,
                       e.isInteger ? SE::Type::Int : SE::Type::Float);
    c->value = e.isInteger ? (double)e.intNumber : e.number;
    return c;
  }
  case Expr::Kind::Name: {
    static const char *vars[] = {"s", "b", "h", "i", "j"};
    for (int v = 0; v < 5; ++v)
      if (e.name == vars[v]) {
        if (v == 0 && !state.inScore) {
          error(e.loc, "'s' (the raw score) is only available in the score "
                       "expression, not in the mask");
          return nullptr;
        }
        SEPtr x = makeExpr(SE::Kind::Var,
                           v == 0 ? SE::Type::Float : SE::Type::Int);
        x->var = v;
        return x;
      }
    if (e.name == "inf") {
      SEPtr c = makeExpr(SE::Kind::Const, SE::Type::Float);
      c->value = std::numeric_limits<double>::infinity();
      return c;
    }
    std::optional<Value> v = evaluateName(e, scope);
    if (!v)
      return nullptr;
    if (!v->isTensor()) {
      SEPtr c = makeExpr(SE::Kind::Const, v->number.isInteger
                                              ? SE::Type::Int
                                              : SE::Type::Float);
      c->value = v->number.value;
      return c;
    }
    if (typeOf(v->node).rank() != 0) {
      error(e.loc, "'" + e.name + "' is a " +
                       formatShape(typeOf(v->node).shape) +
                       " tensor, not a scalar: index it with scalars, e.g. " +
                       e.name + "[b, ...]");
      return nullptr;
    }
    // A rank-0 tensor: read its one element.
    Expr index(Expr::Kind::Index, e.loc);
    auto name = std::make_unique<Expr>(Expr::Kind::Name, e.loc);
    name->name = e.name;
    index.operands.push_back(std::move(name));
    return lowerScalar(index, scope, state);
  }
  case Expr::Kind::Index: {
    std::optional<Value> t = evaluate(*e.operands[0], scope);
    if (!t)
      return nullptr;
    if (!t->isTensor()) {
      error(e.operands[0]->loc, "only a tensor can be indexed, got the "
                                "number " + t->number.str());
      return nullptr;
    }
    const TensorType type = typeOf(t->node);
    size_t count = e.operands.size() - 1;
    if ((int64_t)count != type.rank() && !(count == 0 && type.rank() == 0)) {
      error(e.loc, "wrong number of indices: a " + formatType(type) +
                       " tensor needs " + std::to_string(type.rank()) +
                       ", got " + std::to_string(count));
      return nullptr;
    }
    SEPtr read = makeExpr(SE::Kind::Capture, type.isFloat() ? SE::Type::Float
                                                            : SE::Type::Int);
    for (size_t d = 0; d < count; ++d) {
      const Expr &ie = *e.operands[d + 1];
      SEPtr index = lowerScalar(ie, scope, state);
      if (!index)
        return nullptr;
      if (index->type != SE::Type::Int) {
        error(ie.loc, "an index must be an integer expression, got " +
                          std::string(typeName(index->type)));
        return nullptr;
      }
      if (index->kind == SE::Kind::Const &&
          (index->value < 0 || index->value >= type.shape[d])) {
        error(ie.loc, "index " + std::to_string((long long)index->value) +
                          " is out of range for dimension " +
                          std::to_string(d) + " of size " +
                          std::to_string(type.shape[d]));
        return nullptr;
      }
      // An index the kernel clamps to [0, size - 1]: out of range for every
      // (b, h, i, j) is a mistake; for some, likely one (or a read where
      // the mask discards the score), said as a warning.
      if (auto r = rangeOf(*index, state.extent)) {
        double size = double(type.shape[d]);
        std::string span = "index ranges from " + std::to_string((long long)r->first) +
                           " to " + std::to_string((long long)r->second) +
                           " over b, h, i, j, outside dimension " + std::to_string(d) +
                           "'s 0.." + std::to_string(type.shape[d] - 1);
        if (r->second < 0 || r->first >= size) {
          error(ie.loc, span + " for all of them");
          return nullptr;
        }
        // Once per place in the file, however many block instances run it.
        if ((r->first < 0 || r->second >= size) && warnedAt_.insert(ie.loc.offset).second)
          diag_.warning(ie.loc, span + " for some; an out-of-range index reads the "
                                       "nearest element");
      }
      read->operands.push_back(std::move(index));
    }
    auto it = std::find(state.captures.begin(), state.captures.end(),
                        t->node);
    read->capture = (int)(it - state.captures.begin());
    if (it == state.captures.end())
      state.captures.push_back(t->node);
    return read;
  }
  case Expr::Kind::Unary: {
    SEPtr x = lowerScalar(*e.operands[0], scope, state);
    if (!x)
      return nullptr;
    bool wantBool = e.op == '!';
    if ((x->type == SE::Type::Bool) != wantBool) {
      error(e.loc, wantBool ? "'not' needs a boolean (a comparison), got " +
                                  std::string(typeName(x->type))
                            : std::string("unary '-' needs a number, got a "
                                          "boolean"));
      return nullptr;
    }
    SEPtr u = makeExpr(SE::Kind::Unary, x->type);
    u->op = e.op;
    u->operands.push_back(std::move(x));
    return u;
  }
  case Expr::Kind::Binary: {
    if (e.op == '@') {
      error(e.loc, "'@' is not allowed in a score or mask expression (they "
                   "are scalar)");
      return nullptr;
    }
    SEPtr a = lowerScalar(*e.operands[0], scope, state);
    if (!a)
      return nullptr;
    SEPtr b = lowerScalar(*e.operands[1], scope, state);
    if (!b)
      return nullptr;
    std::string spelled = operatorSpelling(e.op);
    bool logical = e.op == '&' || e.op == '|';
    for (const SEPtr &x : {a, b})
      if ((x->type == SE::Type::Bool) != logical) {
        error(e.loc, logical ? "'" + spelled +
                                   "' needs booleans (comparisons) on both "
                                   "sides, got " +
                                   typeName(x->type)
                             : "'" + spelled +
                                   "' needs numbers on both sides, got a "
                                   "boolean");
        return nullptr;
      }
    SEPtr r = makeExpr(SE::Kind::Binary, SE::Type::Bool);
    r->op = e.op;
    if (!logical) {
      bool ints = a->type == SE::Type::Int && b->type == SE::Type::Int &&
                  e.op != '/' && e.op != '^';
      if (!ints) {
        a = toFloat(a);
        b = toFloat(b);
      }
      if (!isBooleanOperator(e.op))
        r->type = ints ? SE::Type::Int : SE::Type::Float;
    }
    r->operands = {a, b};
    return r;
  }
  case Expr::Kind::Call:
    return lowerScalarCall(e, scope, state);
  case Expr::Kind::List:
  case Expr::Kind::Repeat:
    error(e.loc, "a score or mask expression must be a scalar expression");
    return nullptr;
  }
  return nullptr;
}

std::optional<Value> Sema::evaluateAttention(const Expr &e, Scope &scope) {
  std::vector<const Expr *> positional;
  const Expr *score = nullptr, *mask = nullptr, *scale = nullptr,
             *dropout = nullptr;
  for (size_t a = 0; a < e.operands.size(); ++a) {
    const Expr &arg = *e.operands[a];
    std::string key = e.keywords.empty() ? "" : e.keywords[a];
    if (key.empty()) {
      if (score || mask || scale || dropout || positional.size() == 3) {
        error(arg.loc, std::string("attention takes q, k and v as its only "
                                   "positional arguments; usage: ") +
                           kUsage);
        return std::nullopt;
      }
      positional.push_back(&arg);
      continue;
    }
    const Expr **slot = key == "score"   ? &score
                        : key == "mask"  ? &mask
                        : key == "scale"   ? &scale
                        : key == "dropout" ? &dropout
                                           : nullptr;
    if (!slot) {
      error(arg.loc, "unknown argument '" + key +
                         "' of attention (expected score, mask, scale or "
                         "dropout)");
      return std::nullopt;
    }
    if (*slot) {
      error(arg.loc, "'" + key + "' is given twice");
      return std::nullopt;
    }
    *slot = &arg;
  }
  if (positional.size() != 3) {
    error(e.loc, std::string("attention needs q, k and v; usage: ") + kUsage);
    return std::nullopt;
  }

  // q [B, H, T, D], k [B, KVH, S, D], v [B, KVH, S, Dv].
  static const char *names[] = {"q", "k", "v"};
  int qkv[3];
  for (int a = 0; a < 3; ++a) {
    std::optional<Value> x = evaluate(*positional[a], scope);
    if (!x)
      return std::nullopt;
    std::optional<int> t = requireFloatTensor(
        *x, positional[a]->loc, std::string("attention's ") + names[a]);
    if (!t)
      return std::nullopt;
    if (typeOf(*t).rank() != 4) {
      error(positional[a]->loc,
            std::string("attention's ") + names[a] +
                " must be [batch, heads, length, head_dim], got " +
                formatShape(typeOf(*t).shape));
      return std::nullopt;
    }
    qkv[a] = *t;
  }
  // Copies: lowering the score and mask adds nodes (captures).
  const std::vector<int64_t> q = typeOf(qkv[0]).shape,
                             k = typeOf(qkv[1]).shape,
                             v = typeOf(qkv[2]).shape;
  std::string shapes = formatShape(q) + ", " + formatShape(k) + ", " +
                       formatShape(v);
  if (k[0] != q[0] || v[0] != q[0] || k[1] != v[1] || k[2] != v[2] ||
      k[3] != q[3]) {
    error(e.loc, "attention's q, k, v shapes do not match: " + shapes +
                     " (expected [B, H, T, D], [B, KVH, S, D], "
                     "[B, KVH, S, Dv])");
    return std::nullopt;
  }
  if (q[1] % k[1] != 0) {
    error(e.loc, "attention's query heads (" + std::to_string(q[1]) +
                     ") must be a multiple of its key/value heads (" +
                     std::to_string(k[1]) + ")");
    return std::nullopt;
  }

  double scaleValue = 1.0 / std::sqrt((double)q[3]);
  if (scale) {
    std::optional<Value> x = evaluate(*scale, scope);
    if (!x)
      return std::nullopt;
    if (x->isTensor()) {
      error(scale->loc, "attention's scale must be a compile-time number");
      return std::nullopt;
    }
    scaleValue = x->number.value;
  }

  // Dropout of the attention weights: a compile-time probability in [0, 1)
  // (the kernels bake it in; 1 would drop everything and divide by 0).
  double dropoutValue = 0.0;
  if (dropout) {
    std::optional<Value> x = evaluate(*dropout, scope);
    if (!x)
      return std::nullopt;
    if (x->isTensor()) {
      error(dropout->loc, "attention's dropout must be a compile-time number");
      return std::nullopt;
    }
    dropoutValue = x->number.value;
    if (!(dropoutValue >= 0.0 && dropoutValue < 1.0)) {
      std::ostringstream got;
      got << dropoutValue;
      error(dropout->loc, "attention's dropout must be in [0, 1), got " +
                              got.str());
      return std::nullopt;
    }
  }

  AttentionLowering state;
  state.extent[1] = q[0]; // b
  state.extent[2] = q[1]; // h (query heads)
  state.extent[3] = q[2]; // i
  state.extent[4] = k[2]; // j
  auto info = std::make_shared<AttentionInfo>();
  info->dropout = dropoutValue;
  if (score) {
    state.inScore = true;
    info->score = lowerScalar(*score, scope, state);
    if (!info->score)
      return std::nullopt;
    if (info->score->type == SE::Type::Bool) {
      error(score->loc, "the score must be a number, got a boolean (write "
                        "conditions in the mask, or use where(c, x, y))");
      return std::nullopt;
    }
    info->score = toFloat(info->score);
  }
  if (mask) {
    state.inScore = false;
    info->mask = lowerScalar(*mask, scope, state);
    if (!info->mask)
      return std::nullopt;
    if (info->mask->type != SE::Type::Bool) {
      error(mask->loc, "the mask must be a boolean expression (a comparison, "
                       "and, or, not), got " +
                           std::string(typeName(info->mask->type)));
      return std::nullopt;
    }
  }
  info->numCaptures = (int)state.captures.size();
  std::vector<int> operands{qkv[0], qkv[1], qkv[2]};
  operands.insert(operands.end(), state.captures.begin(),
                  state.captures.end());
  TensorType out{{q[0], q[1], q[2], v[3]}, ElementType::F32};
  int node = addNode(NodeKind::Attention, std::move(operands), out, e.loc, {},
                     scaleValue);
  graph_.nodes[node].attention = std::move(info);
  return Value::ofTensor(node);
}

} // namespace kiln
