//===- SemaBuiltins.cpp - Shape rules of the builtin functions ------------===//
//
// One entry per builtin: its arity (checked before anything is evaluated, so
// a wrong argument count is reported as such) and its shape rule. Math
// functions applied to compile-time numbers fold (`sqrt(head_dim)`).
//
//===----------------------------------------------------------------------===//

#include "frontend/Sema.h"

#include "frontend/UnaryMath.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace kiln {

namespace {
struct BuiltinSignature {
  const char *name;
  unsigned minArgs, maxArgs;
  const char *usage;
};
} // namespace

static const BuiltinSignature kBuiltins[] = {
    {"layer_norm", 4, 4, "layer_norm(x, weight, bias, eps)"},
    {"rms_norm", 3, 3, "rms_norm(x, weight, eps)"},
    {"gelu", 1, 1, "gelu(x)"},
    {"softmax", 1, 1, "softmax(x)"},
    {"causal_mask", 1, 1, "causal_mask(scores)"},
    {"transpose", 1, 2, "transpose(x) or transpose(x, [perm])"},
    {"reshape", 2, 2, "reshape(x, [dims])"},
    {"iota", 1, 1, "iota(n)"},
    {"sum", 1, 2, "sum(x) or sum(x, [dims])"},
    {"mean", 1, 2, "mean(x) or mean(x, [dims])"},
    {"rms", 1, 1, "rms(x)"},
    {"cross_entropy", 2, 2, "cross_entropy(logits, targets)"},
    {"length_mask", 2, 2, "length_mask(lengths, n)"},
    {"where", 3, 3, "where(condition, a, b)"},
    {"float", 1, 1, "float(x)"},
    {"expand", 2, 2, "expand(x, [dims])"},
    {"slice", 4, 4, "slice(x, dim, start, end)"},
    {"pow", 2, 2, "pow(x, p)"},
    {"concat", 2, 2, "concat([a, b, ...], dim)"},
    {"split", 3, 3, "a, b, ... = split(x, [sizes], dim)"},
    {"shard", 2, 2, "shard(x, [axis or _, ...])"},
};

static const BuiltinSignature *findBuiltin(const std::string &name) {
  for (const BuiltinSignature &b : kBuiltins)
    if (name == b.name)
      return &b;
  // The unary math functions (UnaryMath.h), one signature each.
  static const std::vector<BuiltinSignature> unary = [] {
    std::vector<BuiltinSignature> v;
    for (const UnaryMath &math : unaryMathBuiltins())
      v.push_back({math.name, 1, 1, math.usage});
    return v;
  }();
  for (const BuiltinSignature &b : unary)
    if (name == b.name)
      return &b;
  return nullptr;
}

bool Sema::isBuiltin(const std::string &name) const {
  return findBuiltin(name) != nullptr;
}

std::optional<std::vector<int64_t>>
Sema::evaluateIntList(const Expr &e, Scope &scope, const std::string &what) {
  if (e.kind != Expr::Kind::List) {
    error(e.loc, what + " must be a list of integers like [0, 2, 1, 3]");
    return std::nullopt;
  }
  std::vector<int64_t> out;
  for (const ExprPtr &elt : e.operands) {
    std::optional<Value> v = evaluate(*elt, scope);
    if (!v)
      return std::nullopt;
    if (v->isTensor() || !v->number.isInteger) {
      error(elt->loc, what + " must contain compile-time integers, got " +
                          (v->isTensor() ? "a tensor" : v->number.str()));
      return std::nullopt;
    }
    out.push_back(v->number.intValue);
  }
  return out;
}

std::optional<Value> Sema::evaluateBuiltin(const Expr &e, Scope &scope) {
  const BuiltinSignature &sig = *findBuiltin(e.name);
  size_t argc = e.operands.size();
  if (argc < sig.minArgs || argc > sig.maxArgs) {
    std::string expected = sig.minArgs == sig.maxArgs
                               ? std::to_string(sig.minArgs)
                               : std::to_string(sig.minArgs) + " or " +
                                     std::to_string(sig.maxArgs);
    error(e.loc, "'" + e.name + "' expects " + expected + " argument" +
                     (sig.maxArgs == 1 ? "" : "s") + ", got " +
                     std::to_string(argc) + "; usage: " + sig.usage);
    return std::nullopt;
  }
  const std::string &fn = e.name;
  auto arg = [&](size_t i) { return evaluate(*e.operands[i], scope); };
  auto argLoc = [&](size_t i) { return e.operands[i]->loc; };
  auto tensor = [&](NodeKind kind, std::vector<int> ops, TensorType type,
                    std::vector<int64_t> dims = {}, double value = 0.0) {
    return Value::ofTensor(addNode(kind, std::move(ops), std::move(type), e.loc,
                                   std::move(dims), value));
  };

  if (fn == "where") // SemaCompare.cpp
    return evaluateWhere(e, scope);
  if (fn == "slice") // SemaSlicing.cpp
    return evaluateSlice(e, scope);
  if (fn == "pow") { // x ** p
    std::optional<Value> x = arg(0), p = arg(1);
    if (!x || !p)
      return std::nullopt;
    return arithmetic('^', *x, *p, e.loc);
  }
  if (fn == "concat")
    return evaluateConcat(e, scope);
  if (fn == "split") {
    error(e.loc, "split gives several tensors: assign them to as many names, "
                 "as in 'a, b = split(x, [n, m], dim)'");
    return std::nullopt;
  }
  if (fn == "float")
    return evaluateToFloat(e, scope);
  if (fn == "shard") // SemaSharding.cpp
    return evaluateShard(e, scope);

  // iota(n) -> [n] i32.
  if (fn == "iota") {
    std::optional<Value> n = arg(0);
    if (!n)
      return std::nullopt;
    if (n->isTensor() || !n->number.isInteger || n->number.intValue <= 0) {
      error(argLoc(0), "iota(n) needs a positive compile-time integer n");
      return std::nullopt;
    }
    if (!checkTensorSize({n->number.intValue}, argLoc(0)))
      return std::nullopt;
    return tensor(NodeKind::Iota, {},
                  TensorType{{n->number.intValue}, ElementType::I32});
  }

  // length_mask(lengths [...] integer, n) -> [..., n] f32: 0 where
  // j < lengths, -inf elsewhere (added to logits, padding gets probability
  // 0). Built from existing ops, so no new kernel or VJP: row r of
  // causal_mask(zeros [n + 1, n]) is -inf exactly where j >= r (its
  // diagonal is shifted by S - T = -1), and gathering that table by the
  // lengths picks one row per sample. A length outside [0, n] reads zeros
  // (the gather's out-of-range rule): every position kept, which is what a
  // length above n means.
  if (fn == "length_mask") {
    std::optional<Value> lengths = arg(0);
    if (!lengths)
      return std::nullopt;
    if (!lengths->isTensor() || typeOf(lengths->node).element != ElementType::I32) {
      error(argLoc(0), "length_mask needs an integer tensor of lengths, got " +
                           (lengths->isTensor()
                                ? formatType(typeOf(lengths->node))
                                : "the number " + lengths->number.str()));
      return std::nullopt;
    }
    std::optional<Value> n = arg(1);
    if (!n)
      return std::nullopt;
    if (n->isTensor() || !n->number.isInteger || n->number.intValue <= 0) {
      error(argLoc(1), "length_mask(lengths, n) needs a positive "
                       "compile-time integer n");
      return std::nullopt;
    }
    int64_t width = n->number.intValue;
    TensorType out = typeOf(lengths->node);
    out.element = ElementType::F32;
    out.shape.push_back(width);
    if (!checkTensorSize({width + 1, width}, argLoc(1)) ||
        !checkTensorSize(out.shape, e.loc))
      return std::nullopt;
    TensorType tableType{{width + 1, width}, ElementType::F32};
    int zeros = addSplat(0.0, tableType, e.loc);
    Value table = tensor(NodeKind::CausalMask, {zeros}, tableType, {},
                         -std::numeric_limits<double>::infinity());
    return tensor(NodeKind::Embedding, {table.node, lengths->node}, out);
  }

  std::optional<Value> x = arg(0);
  if (!x)
    return std::nullopt;

  // Unary math (UnaryMath.h); on a number it folds.
  if (const UnaryMath *math = findUnaryMath(fn)) {
    if (!x->isTensor()) {
      std::string err;
      std::optional<Number> r = foldUnaryFunction(fn, x->number, err);
      if (!r) {
        error(e.loc, err);
        return std::nullopt;
      }
      return Value::ofNumber(*r);
    }
    std::optional<int> t =
        requireFloatTensor(*x, argLoc(0), "the argument of '" + fn + "'");
    if (!t)
      return std::nullopt;
    return unaryMath(*math, *t, e.loc);
  }

  if (fn == "gelu" || fn == "softmax" || fn == "causal_mask") {
    std::optional<int> t =
        requireFloatTensor(*x, argLoc(0), "the argument of '" + fn + "'");
    if (!t)
      return std::nullopt;
    const TensorType type = typeOf(*t);
    if (fn == "gelu")
      return tensor(NodeKind::Gelu, {*t}, type);
    if (fn == "softmax") {
      if (type.rank() < 1) {
        error(argLoc(0), "softmax needs a tensor of rank >= 1, got a scalar");
        return std::nullopt;
      }
      return tensor(NodeKind::Softmax, {*t}, type);
    }
    // causal_mask(scores [..., T, S]): fill -inf above the diagonal.
    if (type.rank() < 2) {
      error(argLoc(0), "causal_mask needs scores of rank >= 2 [..., T, S], "
                       "got " +
                           formatShape(type.shape));
      return std::nullopt;
    }
    return tensor(NodeKind::CausalMask, {*t}, type, {},
                  -std::numeric_limits<double>::infinity());
  }

  // layer_norm(x [..., C], weight [C], bias [C], eps);
  // rms_norm(x [..., C], weight [C], eps).
  if (fn == "layer_norm" || fn == "rms_norm") {
    std::optional<int> t =
        requireFloatTensor(*x, argLoc(0), "the input of " + fn);
    if (!t)
      return std::nullopt;
    const TensorType type = typeOf(*t);
    if (type.rank() < 1) {
      error(argLoc(0), fn + " needs an input of rank >= 1");
      return std::nullopt;
    }
    int64_t c = type.shape.back();
    std::vector<int> ops = {*t};
    const size_t epsIndex = fn == "layer_norm" ? 3 : 2;
    for (size_t i = 1; i < epsIndex; ++i) {
      const char *role = i == 1 ? "weight" : "bias";
      std::optional<Value> v = arg(i);
      if (!v)
        return std::nullopt;
      std::optional<int> w = requireFloatTensor(*v, argLoc(i), "the " + fn + " " + role);
      if (!w)
        return std::nullopt;
      if (typeOf(*w).shape != std::vector<int64_t>{c}) {
        error(argLoc(i), fn + " " + role + " must be 1-D [" + std::to_string(c) +
                             "] (the last dim of the input " +
                             formatShape(type.shape) + "), got " +
                             formatShape(typeOf(*w).shape));
        return std::nullopt;
      }
      ops.push_back(*w);
    }
    std::optional<Value> eps = arg(epsIndex);
    if (!eps)
      return std::nullopt;
    if (eps->isTensor()) {
      error(argLoc(epsIndex), fn + " eps must be a compile-time number");
      return std::nullopt;
    }
    // The norm ops hold eps as an f32 attribute.
    std::optional<float> epsilon = toNonNegativeF32(eps->number.value);
    if (!epsilon) {
      error(argLoc(epsIndex), fn + " eps must be finite and non-negative, got " +
                                  describeAsF32(eps->number));
      return std::nullopt;
    }
    return tensor(fn == "layer_norm" ? NodeKind::LayerNorm : NodeKind::RmsNorm, ops,
                  type, {}, *epsilon);
  }

  // transpose(x): swap the last two dims; transpose(x, [perm]).
  if (fn == "transpose") {
    std::optional<int> t =
        requireFloatTensor(*x, argLoc(0), "the argument of transpose");
    if (!t)
      return std::nullopt;
    const TensorType type = typeOf(*t);
    std::vector<int64_t> perm;
    if (argc == 1) {
      if (type.rank() < 2) {
        error(argLoc(0), "transpose(x) swaps the last two dims and needs "
                         "rank >= 2, got " +
                             formatShape(type.shape));
        return std::nullopt;
      }
      for (int64_t i = 0; i < type.rank(); ++i)
        perm.push_back(i);
      std::swap(perm[type.rank() - 1], perm[type.rank() - 2]);
    } else {
      std::optional<std::vector<int64_t>> p =
          evaluateIntList(*e.operands[1], scope, "the transpose permutation");
      if (!p)
        return std::nullopt;
      perm = *p;
      if ((int64_t)perm.size() != type.rank()) {
        error(argLoc(1), "transpose permutation " + formatShape(perm) +
                             " has " + std::to_string(perm.size()) +
                             " entries but the tensor " +
                             formatShape(type.shape) + " has rank " +
                             std::to_string(type.rank()));
        return std::nullopt;
      }
      std::vector<int64_t> sorted = perm;
      std::sort(sorted.begin(), sorted.end());
      for (int64_t i = 0; i < type.rank(); ++i)
        if (sorted[i] != i) {
          error(argLoc(1), "transpose permutation " + formatShape(perm) +
                               " is not a permutation of 0.." +
                               std::to_string(type.rank() - 1));
          return std::nullopt;
        }
    }
    TensorType out = type;
    for (size_t i = 0; i < perm.size(); ++i)
      out.shape[i] = type.shape[perm[i]];
    return tensor(NodeKind::Transpose, {*t}, out, perm);
  }

  // reshape(x, [dims]): same element count.
  // expand(x, [dims]): x broadcast (numpy rules) to dims, e.g. kv heads
  // [B, KVH, 1, S, D] repeated to [B, KVH, G, S, D] for grouped queries.
  if (fn == "expand") {
    if (!x->isTensor()) {
      error(argLoc(0),
            "expand needs a tensor, got the number " + x->number.str());
      return std::nullopt;
    }
    std::optional<std::vector<int64_t>> dims =
        evaluateIntList(*e.operands[1], scope, "the expand shape");
    if (!dims)
      return std::nullopt;
    const std::vector<int64_t> &in = typeOf(x->node).shape;
    bool ok = dims->size() >= in.size();
    for (size_t i = 0; ok && i < in.size(); ++i) {
      int64_t d = (*dims)[dims->size() - in.size() + i];
      ok = d > 0 && (in[i] == d || in[i] == 1);
    }
    if (!ok) {
      error(argLoc(1), "expand cannot broadcast " + formatShape(in) + " to " +
                           formatShape(*dims) +
                           " (each dim must be equal or 1, aligned right)");
      return std::nullopt;
    }
    if (!checkTensorSize(*dims, argLoc(1)))
      return std::nullopt;
    std::optional<int> out = broadcastTo(x->node, *dims, e.loc);
    if (!out)
      return std::nullopt;
    return Value::ofTensor(*out);
  }

  if (fn == "reshape") {
    if (!x->isTensor()) {
      error(argLoc(0),
            "reshape needs a tensor, got the number " + x->number.str());
      return std::nullopt;
    }
    const TensorType type = typeOf(x->node);
    std::optional<std::vector<int64_t>> dims =
        evaluateIntList(*e.operands[1], scope, "the reshape shape");
    if (!dims)
      return std::nullopt;
    TensorType out{*dims, type.element};
    for (int64_t d : *dims)
      if (d <= 0) {
        error(argLoc(1),
              "reshape dims must be positive, got " + formatShape(*dims));
        return std::nullopt;
      }
    if (!checkTensorSize(*dims, argLoc(1)))
      return std::nullopt;
    if (out.numElements() != type.numElements()) {
      error(argLoc(1), "reshape cannot change the number of elements: " +
                           formatShape(type.shape) + " has " +
                           std::to_string(type.numElements()) + ", " +
                           formatShape(*dims) + " has " +
                           std::to_string(out.numElements()));
      return std::nullopt;
    }
    return tensor(NodeKind::Reshape, {x->node}, out);
  }

  // sum/mean(x [, dims]): reduce to a scalar, or over the listed dims.
  if (fn == "sum" || fn == "mean") {
    std::optional<int> t =
        requireFloatTensor(*x, argLoc(0), "the argument of '" + fn + "'");
    if (!t)
      return std::nullopt;
    const TensorType type = typeOf(*t);
    std::vector<int64_t> dims;
    if (argc == 1) {
      for (int64_t i = 0; i < type.rank(); ++i)
        dims.push_back(i);
    } else {
      std::optional<std::vector<int64_t>> d =
          evaluateIntList(*e.operands[1], scope, "the reduced dims");
      if (!d)
        return std::nullopt;
      std::set<int64_t> unique;
      for (int64_t dim : *d) {
        int64_t norm = dim < 0 ? dim + type.rank() : dim;
        if (norm < 0 || norm >= type.rank() || !unique.insert(norm).second) {
          error(argLoc(1), "reduced dims " + formatShape(*d) +
                               " must be distinct dims of a rank-" +
                               std::to_string(type.rank()) + " tensor " +
                               formatShape(type.shape));
          return std::nullopt;
        }
      }
      dims.assign(unique.begin(), unique.end());
    }
    TensorType out{{}, ElementType::F32};
    int64_t count = 1;
    for (int64_t i = 0; i < type.rank(); ++i) {
      if (std::binary_search(dims.begin(), dims.end(), i))
        count *= type.shape[i];
      else
        out.shape.push_back(type.shape[i]);
    }
    Value sum = tensor(NodeKind::ReduceSum, {*t}, out, dims);
    if (fn == "sum")
      return sum;
    int divisor = addSplat((double)count, out, e.loc);
    return tensor(NodeKind::Div, {sum.node, divisor}, out);
  }

  // rms(x) = sqrt(mean(x * x)) over every element -> scalar.
  if (fn == "rms") {
    std::optional<int> t =
        requireFloatTensor(*x, argLoc(0), "the argument of 'rms'");
    if (!t)
      return std::nullopt;
    const TensorType type = typeOf(*t);
    std::vector<int64_t> dims;
    for (int64_t i = 0; i < type.rank(); ++i)
      dims.push_back(i);
    TensorType scalar{{}, ElementType::F32};
    Value squares = tensor(NodeKind::Mul, {*t, *t}, type);
    Value sum = type.rank() == 0 ? squares
                                 : tensor(NodeKind::ReduceSum, {squares.node},
                                          scalar, dims);
    int count = addSplat((double)type.numElements(), scalar, e.loc);
    Value mean = tensor(NodeKind::Div, {sum.node, count}, scalar);
    return unaryMath(*findUnaryMath("sqrt"), mean.node, e.loc);
  }

  // cross_entropy(logits [..., V], targets [...] integer) -> scalar.
  if (fn == "cross_entropy") {
    std::optional<int> logits =
        requireFloatTensor(*x, argLoc(0), "cross_entropy logits");
    if (!logits)
      return std::nullopt;
    std::optional<Value> y = arg(1);
    if (!y)
      return std::nullopt;
    std::optional<int> targets =
        requireIntTensor(*y, argLoc(1), "cross_entropy targets");
    if (!targets)
      return std::nullopt;
    const TensorType lt = typeOf(*logits);
    if (lt.rank() < 1) {
      error(argLoc(0), "cross_entropy logits need rank >= 1 [..., vocab]");
      return std::nullopt;
    }
    std::vector<int64_t> expected(lt.shape.begin(), lt.shape.end() - 1);
    if (typeOf(*targets).shape != expected) {
      error(argLoc(1), "cross_entropy targets must have shape " +
                           formatShape(expected) + " (the logits " +
                           formatShape(lt.shape) +
                           " without the last dim), got " +
                           formatShape(typeOf(*targets).shape));
      return std::nullopt;
    }
    // Targets known at compile time (iota, possibly reshaped) must be
    // classes of the logits; the kernel would count the rest as loss 0.
    int source = *targets;
    while (graph_.nodes[source].kind == NodeKind::Reshape)
      source = graph_.nodes[source].operands[0];
    int64_t classes = lt.shape.back();
    if (graph_.nodes[source].kind == NodeKind::Iota &&
        typeOf(source).shape[0] > classes) {
      int64_t n = typeOf(source).shape[0];
      error(argLoc(1), "cross_entropy targets iota(" + std::to_string(n) +
                           ") go up to " + std::to_string(n - 1) +
                           ", but the logits " + formatShape(lt.shape) +
                           " have " + std::to_string(classes) + " classes");
      return std::nullopt;
    }
    return tensor(NodeKind::CrossEntropy, {*logits, *targets},
                  TensorType{{}, ElementType::F32});
  }

  error(e.loc, "unknown function '" + fn + "'");
  return std::nullopt;
}

} // namespace kiln
