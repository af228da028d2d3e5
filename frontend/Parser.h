//===- Parser.h - Recursive-descent parser for Kiln model files -*- C++ -*-===//
//
// Turns a SourceFile into a ModuleAST. The grammar is written down at the top
// of Parser.cpp. The parser stops at the first syntax error (one precise
// message beats a cascade), reports it through the DiagnosticPrinter and
// returns std::nullopt.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_FRONTEND_PARSER_H
#define KILN_FRONTEND_PARSER_H

#include "frontend/AST.h"
#include "frontend/Lexer.h"
#include "frontend/RecursionDepth.h"

#include <optional>

namespace kiln {

class Parser {
public:
  Parser(const SourceFile &file, DiagnosticPrinter &diag)
      : lexer_(file, diag), diag_(diag) {
    consume();
  }

  /// Parses the whole file; std::nullopt after a reported error.
  std::optional<ModuleAST> parseModule();

  /// Parses a whole file holding just `NAME [ '(' kwargs ')' ]`: the value of
  /// `-D optimizer=...`.
  std::optional<OptimizerSpec> parseOptimizerOverride();
  // The text of `-D mesh=TEXT`: `[data = 2]`.
  std::optional<MeshSpec> parseMeshOverride();

private:
  // Token stream.
  void consume() {
    beforePrev_ = std::move(prev_);
    prev_ = std::move(tok_);
    tok_ = lexer_.next();
  }
  /// After a statement's expression: an '=' next, with the expression's
  /// last token alone at the start of a later line than the operator before
  /// it, means that line ended unfinished (`x = a +` then `y = ...`): says
  /// so at that operator and returns false.
  bool checkUnfinishedLine();
  bool consumeIf(TokenKind k) {
    if (!tok_.is(k))
      return false;
    consume();
    return true;
  }
  /// Reports "expected <what>" at the current token unless it is `k`.
  bool expect(TokenKind k, const std::string &what);
  bool expectIdentifier(const std::string &what, std::string &name,
                        SourceLoc &loc);
  std::string describeCurrent() const;
  bool fail(SourceLoc loc, const std::string &msg);

  // Declarations.
  bool parseConfig(ModuleAST &m);
  bool parseParam(ParamDecl &p);
  bool parseInput(ModuleAST &m);
  bool parseBlock(ModuleAST &m);
  bool parseTrain(ModuleAST &m);
  bool parseStmt(std::vector<Stmt> &out);
  bool parseShape(ShapeSpec &shape);
  bool parseSetting(Setting &s);
  bool parseMeshSpec(MeshSpec &spec);
  /// A mesh axis name: an identifier, or `model` (a keyword only where
  /// the file starts).
  bool expectAxisName(std::string &name, SourceLoc &loc);
  /// `shard [AXIS | '_', ...]` after a param or input declaration.
  bool parseShardingSpec(std::optional<ShardingSpec> &spec);
  bool parseOptimizerSpec(OptimizerSpec &spec);

  // Expressions, lowest precedence first.
  ExprPtr parseExpr();
  ExprPtr parseOr();
  ExprPtr parseAnd();
  ExprPtr parseNot();
  ExprPtr parseComparison();
  ExprPtr parseAdditive();
  ExprPtr parseMultiplicative();
  ExprPtr parseUnary();
  ExprPtr parsePower();
  ExprPtr parsePostfix();
  ExprPtr parsePrimary();
  bool parseExprList(TokenKind close, std::vector<ExprPtr> &out);
  /// Call arguments up to ')': `expr` or `name = expr`.
  bool parseCallArguments(Expr &call);
  bool isKeyword(const char *word) const {
    return tok_.is(TokenKind::Identifier) && tok_.text == word;
  }

  /// Recursion guard: deeply nested input must be an error, not a stack
  /// overflow (Sema also recurses over the tree).
  bool canNest(SourceLoc loc);
  ExprPtr checkDepth(ExprPtr e);

  /// Expressions may nest this deep (parentheses, operator chains, calls).
  static constexpr unsigned kMaxNesting = 1000;

  Lexer lexer_;
  RecursionDepth nesting_{kMaxNesting};
  DiagnosticPrinter &diag_;
  Token tok_;
  Token prev_, beforePrev_; // the two tokens before tok_ (checkUnfinishedLine)
  bool failed_ = false;
};

/// Convenience: parse `file`; diagnostics go to `diag`.
std::optional<ModuleAST> parseModelFile(const SourceFile &file,
                                        DiagnosticPrinter &diag);

} // namespace kiln

#endif // KILN_FRONTEND_PARSER_H
