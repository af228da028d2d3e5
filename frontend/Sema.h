//===- Sema.h - Name resolution, shape checks and inlining ------*- C++ -*-===//
//
// Sema elaborates a ModuleAST into a TensorGraph:
//   1. registers configs, the train section's batch/seq (as constants usable
//      anywhere), parameters, inputs and blocks, rejecting duplicates;
//   2. applies `-D` overrides and evaluates the train section;
//   3. runs the top-level statements in order, evaluating every expression
//      to a compile-time Number or a tensor node with a known shape; a block
//      call is inlined with fresh parameters `Block.<instance>.<param>`;
//      `repeat N Block(x)` is N nested calls;
//   4. checks the loss (a scalar named `loss`) and the metrics (`metric NAME
//      = scalar`, prefixed `Block.<instance>.` inside blocks like params),
//      and orders the parameters
//      (declaration order, block instances at the statement that created them).
// Every user mistake is reported with its source position; the first one
// stops elaboration.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_FRONTEND_SEMA_H
#define KILN_FRONTEND_SEMA_H

#include "frontend/AST.h"
#include "frontend/ConstantEvaluator.h"
#include "frontend/RecursionDepth.h"
#include "frontend/TensorGraph.h"

#include <initializer_list>
#include <map>
#include <set>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

struct UnaryMath;


/// `-D optimizer=TEXT` and `-D mesh=TEXT`: TEXT parsed by its own rule,
/// with the printer of TEXT itself (its errors point into TEXT, not into
/// the model file). Null members: not overridden.
struct TextOverrides {
  const OptimizerSpec *optimizer = nullptr;
  DiagnosticPrinter *optimizerDiag = nullptr;
  const MeshSpec *mesh = nullptr;
  DiagnosticPrinter *meshDiag = nullptr;
};

/// Checks `module` and flattens it; std::nullopt after a reported error.
/// `overrides` must not hold "optimizer" or "mesh" (those are in `text`).
std::optional<TensorGraph>
buildTensorGraph(const ModuleAST &module,
                 const std::map<std::string, std::string> &overrides,
                 DiagnosticPrinter &diag, const TextOverrides &text = {});

/// The value of an expression during elaboration.
struct Value {
  enum class Kind { Number, Tensor } kind = Kind::Number;
  Number number; // Kind::Number
  int node = -1; // Kind::Tensor: index into TensorGraph::nodes

  static Value ofNumber(Number n) { return {Kind::Number, n, -1}; }
  static Value ofTensor(int node) { return {Kind::Tensor, {}, node}; }
  bool isTensor() const { return kind == Kind::Tensor; }
};

/// Train settings whose value names a choice (`precision = bf16`,
/// `remat = full`) rather than a number.
inline bool isNameSetting(const std::string &key) {
  return key == "precision" || key == "remat";
}

class Sema {
public:
  Sema(const ModuleAST &module, DiagnosticPrinter &diag,
       const TextOverrides &text = {})
      : module_(module), diag_(diag), consts_(diag), textOverrides_(text) {}

  std::optional<TensorGraph>
  run(const std::map<std::string, std::string> &overrides);

private:
  /// Names visible inside one block instance (or the top level).
  struct Scope {
    std::map<std::string, Value> vars;
    std::map<std::string, int> params; // name -> index into graph_.params
  };

  // Declarations (Sema.cpp).
  bool declareName(const std::string &name, SourceLoc loc, const char *kind);
  bool declareAll();
  bool checkBlockDecl(const BlockDecl &block);
  // The names statement `s` assigns: each once, none 'inf', none a config,
  // input, block or model parameter, nor (in a block, `block` its scope)
  // one of the block's parameters.
  bool checkAssignedNames(const Stmt &s, const Scope *block);
  // The train section (SemaTrain.cpp).
  bool declareTrainSettings();
  bool evaluateTrain();
  bool evaluateTrainNumber(const char *key, Number &out);
  // A train setting whose value names a choice (`precision = bf16`,
  // `remat = full`): `-D key=NAME`, else the train section, else the default
  // already in `out`.
  bool evaluateNameSetting(const char *key,
                           std::initializer_list<const char *> names,
                           std::string &out);
  bool evaluateOptimizer(const OptimizerSpec &spec, DiagnosticPrinter &diag);
  // `mesh = [data = N]`: axis names and sizes into graph_.train.mesh.
  bool evaluateMesh(const MeshSpec &spec, DiagnosticPrinter &diag);
  // Metrics (SemaTrain.cpp): checks and records `metric NAME = ...`.
  bool recordMetric(const Stmt &s, const Value &v, const std::string &name);
  bool evaluateShape(const ShapeSpec &spec, const std::string &what,
                     std::vector<int64_t> &shape);
  bool checkTensorSize(const std::vector<int64_t> &shape, SourceLoc loc);
  std::optional<int> createParam(const ParamDecl &decl,
                                 const std::string &fullName);
  bool runTopLevel();
  void orderParams();

  // Expressions (SemaExpr.cpp).
  std::optional<Value> evaluate(const Expr &e, Scope &scope);
  std::optional<Value> evaluateName(const Expr &e, Scope &scope);
  std::optional<Value> evaluateUnary(const Expr &e, Scope &scope);
  std::optional<Value> evaluateBinary(const Expr &e, Scope &scope);
  std::optional<Value> evaluateMatmul(SourceLoc loc, int lhs, int rhs);
  /// a op b for + - * / ** @ on numbers (folded) or tensors (broadcast).
  std::optional<Value> arithmetic(char op, const Value &a, const Value &b,
                                  SourceLoc loc);
  std::optional<Value> evaluateIndex(const Expr &e, Scope &scope);
  std::optional<Value> evaluateRepeat(const Expr &e, Scope &scope);
  /// `remat` passes the call's `remat = TIER` ("" without one).
  std::optional<Value> callBlock(const BlockDecl &block, const Expr &call,
                                 std::vector<Value> args, const std::string &remat = "");
  /// A block call's positional arguments, evaluated, and its `remat = TIER`
  /// (the one keyword a block call takes; "" without it).
  std::optional<std::vector<Value>> blockCallArgs(const Expr &call, Scope &scope,
                                                  std::string &remat);
  std::optional<Value> evaluateCall(const Expr &e, Scope &scope);

  // attention(q, k, v, score = ..., mask = ..., scale = ...)
  // (SemaAttention.cpp).
  std::optional<Value> evaluateAttention(const Expr &e, Scope &scope);
  std::optional<Value> evaluateRope(const Expr &e, Scope &scope); // SemaRope.cpp
  struct AttentionLowering;
  std::shared_ptr<ScalarExpr> lowerScalar(const Expr &e, Scope &scope,
                                          AttentionLowering &state);
  std::shared_ptr<ScalarExpr> lowerScalarCall(const Expr &e, Scope &scope,
                                              AttentionLowering &state);

  // Comparisons, and/or/not, where(c, a, b) and float(x) on tensors
  // (SemaCompare.cpp).
  std::optional<Value> evaluateBooleanOperator(const Expr &e, Scope &scope);
  std::optional<Value> evaluateWhere(const Expr &e, Scope &scope);
  std::optional<Value> evaluateToFloat(const Expr &e, Scope &scope);
  // Sharding annotations (SemaSharding.cpp): `shard [...]` of a declaration
  // with `shape` into `out` (per dim: an axis or ""), and shard(x, [...]).
  bool evaluateSharding(const ShardingSpec &spec,
                        const std::vector<int64_t> &shape,
                        const std::string &what, std::vector<std::string> &out);
  std::optional<Value> evaluateShard(const Expr &e, Scope &scope);
  std::optional<std::vector<int64_t>>
  broadcastShapes(const std::vector<const std::vector<int64_t> *> &shapes,
                  SourceLoc loc, const std::string &what);

  // Slicing and joining (SemaSlicing.cpp): slice, concat, split, and the
  // values of a statement (several for `a, b = split(...)`).
  std::optional<Value> evaluateSlice(const Expr &e, Scope &scope);
  std::optional<Value> evaluateConcat(const Expr &e, Scope &scope);
  std::optional<std::vector<Value>> evaluateSplit(const Expr &e, Scope &scope,
                                                  size_t names);
  std::optional<std::vector<Value>> evaluateStatement(const Stmt &s,
                                                      Scope &scope);
  static void bindNames(const Stmt &s, const std::vector<Value> &values,
                        Scope &scope);
  /// A compile-time integer argument, or an error naming `what`.
  std::optional<int64_t> evaluateInteger(const Expr &e, Scope &scope,
                                         const std::string &what);
  /// A dimension argument of a tensor of `rank` (negative counts from the
  /// end), normalised to [0, rank).
  std::optional<int64_t> evaluateDim(const Expr &e, Scope &scope, int64_t rank,
                                     const std::string &what);

  // Builtin functions (SemaBuiltins.cpp).
  std::optional<Value> evaluateBuiltin(const Expr &e, Scope &scope);
  bool isBuiltin(const std::string &name) const;
  std::optional<std::vector<int64_t>>
  evaluateIntList(const Expr &e, Scope &scope, const std::string &what);

  // Graph building and shared checks (SemaExpr.cpp).
  int addNode(NodeKind kind, std::vector<int> operands, TensorType type,
              SourceLoc loc, std::vector<int64_t> dims = {},
              double value = 0.0);
  int addSplat(double value, const TensorType &type, SourceLoc loc);
  /// `math`'s kiln op applied to the float tensor `operand` (same type).
  Value unaryMath(const UnaryMath &math, int operand, SourceLoc loc);
  std::optional<int> broadcastTo(int node, const std::vector<int64_t> &shape,
                                 SourceLoc loc);
  const TensorType &typeOf(int node) const { return graph_.nodes[node].type; }
  /// The operand as a float tensor, or an error naming `what`.
  std::optional<int> requireFloatTensor(const Value &v, SourceLoc loc,
                                        const std::string &what);
  std::optional<int> requireIntTensor(const Value &v, SourceLoc loc,
                                      const std::string &what);
  bool error(SourceLoc loc, const std::string &msg);
  // An error in `diag`'s source: the model file (diag_) or the text of a
  // -D override (TextOverrides).
  bool errorIn(DiagnosticPrinter &diag, SourceLoc loc, const std::string &msg) {
    if (&diag == &diag_)
      return error(loc, msg);
    diag.error(loc, msg);
    return false;
  }

  const ModuleAST &module_;
  DiagnosticPrinter &diag_;
  ConstantEvaluator consts_;
  TensorGraph graph_;

  struct Symbol {
    const char *kind;
    SourceLoc loc;
  };
  std::map<std::string, Symbol> symbols_; // top-level names
  std::map<std::string, int> topParams_;  // -> graph_.params
  std::map<std::string, int> inputIndex_; // -> graph_.inputs
  std::map<std::string, const BlockDecl *> blocks_;
  std::map<std::string, int> instanceCount_; // per block name
  std::map<int, int> paramNode_, inputNode_; // arg -> its node
  std::vector<std::pair<uint32_t, uint32_t>> paramOrderKey_;
  std::vector<std::string> activeBlocks_; // for recursion checks
  std::vector<SourceLoc> callStack_;      // call sites, outermost first
  std::vector<std::string> callInstances_; // "Block.0" per call site
  uint32_t currentStmtOffset_ = 0;
  RecursionDepth evaluationDepth_{2000}; // nested evaluate() calls, across blocks
  size_t inlinedCalls_ = 0;      // block calls inlined so far
  TextOverrides textOverrides_;
  // Train settings naming a choice (precision, remat): `-D key=NAME` and
  // the `key = NAME` statement of the train section.
  std::map<std::string, std::string> nameOverrides_;
  std::set<uint32_t> warnedAt_; // offsets of the warnings given (one each)
  std::map<std::string, const Setting *> nameSettings_;
  std::vector<ExprPtr> defaultSettings_; // clip/grad_accum when not written
  std::map<std::string, SourceLoc> metricNames_; // full name -> statement
};

} // namespace kiln

#endif // KILN_FRONTEND_SEMA_H
