//===- AST.h - Syntax tree of a Kiln model file -----------------*- C++ -*-===//
//
// The parser's output: a faithful, unchecked tree of the model file. Names
// are not resolved and shapes are not known here; Sema does both while it
// elaborates the tree into a TensorGraph (blocks inlined, shapes checked).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_FRONTEND_AST_H
#define KILN_FRONTEND_AST_H

#include "frontend/Diagnostics.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

/// One expression node. A single struct with a kind tag keeps the tree easy
/// to walk; which fields are meaningful depends on `kind`.
struct Expr {
  enum class Kind {
    Number, // 128, 0.02            number, isInteger
    Name,   // dim, x               name
    Unary,  // -x, not c            op ('-', '!' for not), operands[0]
    Binary, // a + b, a @ b, a ** b op ('+','-','*','/','@', '^' for **,
            //                      comparisons and and/or: see
            //                      operatorSpelling), operands[0..1]
    Call,   // f(a, k = b)          name, operands = arguments, keywords
    Index,  // table[idx], x[b, i]  operands[0] = table, operands[1..] =
            //                      indices
    List,   // [a, b, c]            operands = elements
    Repeat, // repeat N Block(x)    operands[0] = N, operands[1] = the Call
  };

  Kind kind;
  SourceLoc loc; // the operator / name / first token: where errors point
  std::string name;
  char op = 0;
  double number = 0.0;
  long long intNumber = 0;
  bool isInteger = false;
  std::vector<ExprPtr> operands;
  /// Call: the keyword of each argument (`score` in `score = ...`), "" for
  /// positional ones; empty when no argument has a keyword.
  std::vector<std::string> keywords;
  unsigned depth = 1; // height of this subtree (bounded by the parser)

  Expr(Kind kind, SourceLoc loc) : kind(kind), loc(loc) {}
};

/// How a Binary/Unary `op` is written in the model file. Comparisons and
/// boolean operators (only allowed in attention's score and mask) are
/// stored as '<', '>', 'l' (<=), 'g' (>=), 'e' (==), 'n' (!=), '&' (and),
/// '|' (or) and unary '!' (not).
inline std::string operatorSpelling(char op) {
  switch (op) {
  case '^': return "**";
  case 'l': return "<=";
  case 'g': return ">=";
  case 'e': return "==";
  case 'n': return "!=";
  case '&': return "and";
  case '|': return "or";
  case '!': return "not";
  default: return std::string(1, op);
  }
}

/// True for the comparison and boolean operators above.
inline bool isBooleanOperator(char op) {
  return op == '<' || op == '>' || op == 'l' || op == 'g' || op == 'e' ||
         op == 'n' || op == '&' || op == '|' || op == '!';
}

/// A shape written in brackets: `[batch, seq, dim]`.
struct ShapeSpec {
  SourceLoc loc; // the '['
  std::vector<ExprPtr> dims;
};

struct ConfigDecl {
  std::string name;
  SourceLoc loc;
  ExprPtr value;
};

/// `shard [_, model]`: per dimension, the mesh axis that splits it (`_`:
/// not split). On a param or an input declaration; `shard(x, [...])`
/// annotates an intermediate value with the same list.
struct ShardingSpec {
  SourceLoc loc; // the '['
  std::vector<std::string> dims; // axis names, "_" for an unsplit dim
  std::vector<SourceLoc> dimLocs;
};

struct ParamDecl {
  std::string name;
  SourceLoc loc;
  ShapeSpec shape;
  std::string init; // "zeros" | "ones" | "normal"
  SourceLoc initLoc;
  ExprPtr stddev; // only for normal(STD)
  std::optional<ShardingSpec> sharding;
};

struct InputDecl {
  std::string name;
  SourceLoc loc;
  ShapeSpec shape;
  std::string dtype; // "i32" (default) or "f32"
  SourceLoc dtypeLoc;
  std::optional<ShardingSpec> sharding;
};

/// `name = expr`, `a, b, c = split(...)`, `metric name = expr` or
/// `return expr`.
struct Stmt {
  bool isReturn = false;
  bool isMetric = false; // a scalar the step reports (never differentiated)
  std::string name;
  /// `b`, `c` of `a, b, c = ...` (with their locations); `name` is `a`.
  std::vector<std::string> moreNames;
  std::vector<SourceLoc> moreNameLocs;
  SourceLoc loc;
  ExprPtr value;
};

struct BlockArg {
  std::string name;
  SourceLoc loc;
  ShapeSpec shape;
  std::string dtype = "f32";
};

struct BlockDecl {
  std::string name;
  SourceLoc loc;
  std::vector<BlockArg> args;
  std::vector<ParamDecl> params;
  std::vector<Stmt> body;
};

/// `key = expr` inside `train { ... }` or inside `adamw(...)`.
struct Setting {
  std::string key;
  SourceLoc loc;
  ExprPtr value;
};

/// `adamw(beta1 = 0.9, ...)`, `sgd` (no parentheses: every default), in the
/// train section or as the text of `-D optimizer=...`.
struct OptimizerSpec {
  std::string name; // "" when the train section names no optimizer
  SourceLoc loc;
  std::vector<Setting> args;
};

/// `mesh = [data = 2]`: the ranks the step runs on, one size per named
/// axis, in the train section or as the text of `-D mesh=...`.
struct MeshSpec {
  SourceLoc loc;
  std::vector<Setting> axes;
};

struct TrainDecl {
  SourceLoc loc;
  std::vector<Setting> settings; // batch, seq, clip, grad_accum
  OptimizerSpec optimizer;
  std::optional<MeshSpec> mesh;
};

struct ModuleAST {
  std::string name;
  SourceLoc nameLoc;
  std::vector<ConfigDecl> configs;
  std::vector<ParamDecl> params;
  std::vector<InputDecl> inputs;
  std::vector<BlockDecl> blocks;
  std::vector<Stmt> stmts; // top-level statements, in order
  std::optional<TrainDecl> train;
};

} // namespace kiln

#endif // KILN_FRONTEND_AST_H
