//===- TensorGraph.h - The checked, flattened model -------------*- C++ -*-===//
//
// Sema's output and MLIRGen's input: every block call inlined, every shape
// known and checked, every broadcast explicit. Nodes are in definition order
// (operands always precede users), so MLIRGen is a single forward walk that
// maps each node to one kiln op. Keeping this layer free of MLIR lets the
// semantic checks run (and be tested) without an MLIRContext.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_FRONTEND_TENSORGRAPH_H
#define KILN_FRONTEND_TENSORGRAPH_H

#include "frontend/Diagnostics.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln {

// Bool: the result of a comparison on tensors, the condition of where().
enum class ElementType { F32, I32, Bool };

struct TensorType {
  std::vector<int64_t> shape;
  ElementType element = ElementType::F32;

  int64_t rank() const { return (int64_t)shape.size(); }
  int64_t numElements() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  bool isFloat() const { return element == ElementType::F32; }
  bool isBool() const { return element == ElementType::Bool; }
  bool operator==(const TensorType &o) const {
    return shape == o.shape && element == o.element;
  }
};

/// `[8, 128, 64]` — how shapes appear in messages.
std::string formatShape(const std::vector<int64_t> &shape);
/// `[8, 128] i32` / `[8, 128, 64] f32`.
std::string formatType(const TensorType &type);

/// One node per kiln op (or function argument).
enum class NodeKind {
  Param,    // argIndex -> TensorGraph::params
  Input,    // argIndex -> TensorGraph::inputs
  Constant, // splat `value`
  Iota,     // [N] i32
  Add,
  Sub,
  Mul,
  Div,
  Pow,
  Neg,
  UnaryMath,  // `mathOp`: the kiln op of a builtin in frontend/UnaryMath.h
  Gelu,
  Softmax,    // over the last dim
  CausalMask, // fill -inf above the diagonal
  Broadcast,  // `dims`: result dim of each operand dim
  ReduceSum,  // `dims`: reduced dims (sorted)
  Reshape,
  Transpose,    // `dims`: permutation
  Slice,        // `dims` = {dim, start, end}
  Concat,       // operands along `dims[0]`
  Matmul,       // lhs [..., M, K] @ rhs [K, N] or [..., K, N]
  Embedding,    // table [V, D], indices [...] -> [..., D]
  LayerNorm,    // x, weight, bias; `value` = epsilon; result 0 of the op
  RmsNorm,      // x, weight; `value` = epsilon; result 0 of the op
  Rope,         // x [..., T, D]; `floats` = the D/2 frequencies
  CrossEntropy, // logits [..., V], targets [...] -> scalar
  Attention,    // q, k, v, captures...; `value` = scale; `attention` below
  Compare,      // lhs, rhs (same type) -> bool; `op`: '<' '>' 'l' 'g' 'e' 'n'
                // as in frontend/AST.h's operatorSpelling
  Select,       // where(condition, a, b); and/or/not on bools are selects
  ToFloat,      // float(x): i32 -> f32
  ShardingConstraint, // shard(x, [...]): x, split as `sharding` says
};

/// A scalar expression of attention's score or mask (SemaAttention.cpp),
/// typed: Float (f32), Int (i64; b, h, i, j and integer captures) or Bool.
struct ScalarExpr {
  enum class Type { Float, Int, Bool };
  enum class Kind {
    Var,     // `var`: 0 = s, 1 = b, 2 = h, 3 = i, 4 = j
    Const,   // `value`
    Capture, // element `operands` (Int indices) of capture `capture`
    Unary,   // `op`: '-', '!' (not)
    Binary,  // `op`: + - * / ^ (power) and the comparison / boolean ops of
             // frontend/AST.h's operatorSpelling
    Call,    // `fn`: exp, log, sqrt, tanh, abs, min, max, where, float
  };
  Kind kind;
  Type type;
  int var = 0;
  double value = 0.0;
  int capture = -1;
  char op = 0;
  std::string fn;
  std::vector<std::shared_ptr<ScalarExpr>> operands;
};

/// The score and mask of an Attention node; null = identity / keep all.
struct AttentionInfo {
  std::shared_ptr<ScalarExpr> score, mask;
  int numCaptures = 0; // the node's operands after q, k, v
  double dropout = 0.0; // probability of dropping an attention weight
};

struct Node {
  NodeKind kind;
  std::vector<int> operands; // indices into TensorGraph::nodes
  TensorType type;
  std::vector<int64_t> dims;
  double value = 0.0;
  char op = 0; // NodeKind::Compare's predicate
  int argIndex = -1;
  std::shared_ptr<const AttentionInfo> attention; // NodeKind::Attention
  const char *mathOp = nullptr; // NodeKind::UnaryMath: "kiln.exp", ...
  std::vector<float> floats;    // NodeKind::Rope: inv_freq
  // NodeKind::ShardingConstraint: per dim, the mesh axis splitting it ("":
  // not split).
  std::vector<std::string> sharding;
  /// locs[0] is the expression in the model file; locs[1..] are the block
  /// call sites it was inlined through, innermost first.
  std::vector<SourceLoc> locs;
  /// The block instance of each call site in locs[1..] ("Block.0"): the
  /// call-site locations carry it as a NameLoc, so passes can tell the
  /// repeated instances of one block apart (remat's per-block plan).
  std::vector<std::string> callInstances;
};

struct ParamInfo {
  std::string name; // `wte`, `Block.0.wq`
  TensorType type;
  std::string init; // "normal" | "zeros" | "ones"
  double stddev = 0.0;
  SourceLoc loc;
  // `shard [...]`: per dim, the mesh axis splitting it ("": not split);
  // empty when the declaration has no annotation.
  std::vector<std::string> sharding;
};

struct InputInfo {
  std::string name;
  TensorType type;
  SourceLoc loc;
  std::vector<std::string> sharding; // as ParamInfo's
};

/// `metric NAME = EXPR`: a scalar the step reports.
struct MetricInfo {
  std::string name; // `attn_rms`, or `Block.0.attn_rms` inside a block
  int node = -1;    // the rank-0 f32 value
  SourceLoc loc;
};

/// The train section, every optimizer argument resolved (PyTorch's defaults
/// for the ones not given).
struct TrainInfo {
  int64_t batch = 0;
  int64_t seq = 0;
  int64_t gradAccum = 1; // micro-batches per step
  double clip = 0.0;     // global gradient-norm threshold (0: none)
  std::string optimizer = "adamw"; // "adamw" | "adam" | "sgd"
  // "fp32", "tf32" (fp32 storage, TF32 GEMMs) or "bf16" (bf16 GEMM
  // operands, fp32 accumulation, fp32 master weights and state)
  std::string precision = "fp32";
  // The peak bytes the step may use (0: no budget), and how activations are
  // kept for the backward: "auto" (recompute as little as the budget
  // allows; nothing without a budget), "none", "selective" (pointwise ops,
  // norms and attention recomputed, GEMM outputs kept) or "full" (each
  // block recomputed from its input).
  int64_t memoryBudget = 0;
  std::string remat = "auto";
  // ZeRO stage over the mesh's data axis: 0 replicated, 1 optimizer state
  // sharded, 2 gradients too, 3 parameters too.
  int64_t zero = 0;
  // `mesh = [data = N, model = M]`: (axis, ranks along it), in order;
  // empty: one rank. `data` splits the batch (data parallelism, ZeRO);
  // every other axis splits what the sharding annotations name.
  std::vector<std::pair<std::string, int64_t>> mesh;
  // adamw / adam
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;
  // every optimizer (adamw's default 0.01; adam and sgd: 0)
  double weightDecay = 0.01;
  // sgd
  double momentum = 0.0, dampening = 0.0;
  bool nesterov = false;
  // Weight-decay exclusions: these kinds of parameters are decayed only
  // when asked.
  bool decayNorms = false, decayBiases = false, decayEmbeddings = false;
};

struct TensorGraph {
  std::string modelName;
  SourceLoc modelLoc;
  std::vector<ParamInfo> params; // function-argument order
  std::vector<InputInfo> inputs; // after the params
  std::vector<Node> nodes;
  int loss = -1; // node holding the scalar loss
  std::vector<MetricInfo> metrics; // in statement order
  TrainInfo train;
  /// `Block(x, remat = full)`, `repeat N Block(x, remat = selective)`: the
  /// recompute the model file sets for those instances ("Block.3" ->
  /// "full"); the remat phase plans the others.
  std::map<std::string, std::string> rematOverrides;
};

} // namespace kiln

#endif // KILN_FRONTEND_TENSORGRAPH_H
