//===- Parser.cpp - Recursive-descent parser for Kiln model files ---------===//
//
// The grammar (newlines are insignificant; `;` may separate anything; `#`
// comments run to the end of the line):
//
//   file      ::= 'model' IDENT item*
//   item      ::= config | param | input | block | train | stmt | metric
//   config    ::= 'config' IDENT '=' expr
//   param     ::= 'param' IDENT shape '=' init [sharding]
//   init      ::= 'zeros' | 'ones' | 'normal' '(' expr ')'
//   input     ::= 'input' IDENT shape [':' DTYPE] [sharding]
//                                                      DTYPE ::= 'i32' | 'f32'
//   sharding  ::= 'shard' '[' AXIS (',' AXIS)* ']'    AXIS: a mesh axis or '_'
//   shape     ::= '[' expr (',' expr)* ']'
//   block     ::= 'block' IDENT '(' [arg (',' arg)*] ')'
//                 '{' (param | stmt | metric)* '}'
//   arg       ::= IDENT ':' shape [':' DTYPE]
//   stmt      ::= IDENT '=' expr | 'return' expr
//   metric    ::= 'metric' IDENT '=' expr      a reported scalar
//   train     ::= 'train' '{' setting* '}'
//   setting   ::= IDENT '=' expr          batch, seq, clip, grad_accum
//               | 'optimizer' '=' optimizer
//   optimizer ::= IDENT ['(' [kwarg (',' kwarg)*] ')']   adamw | adam | sgd
//   kwarg     ::= IDENT '=' expr          beta1, momentum, nesterov = true, ...
//
//               | 'mesh' '=' mesh
//   mesh      ::= '[' IDENT '=' expr (',' IDENT '=' expr)* ']'
//                                               [data = 8], [data = 4, model = 2]
// `-D optimizer=TEXT` parses TEXT with the `optimizer` rule (see
// parseOptimizerOverride), `-D mesh=TEXT` with the `mesh` rule.
//
//   expr      ::= mul (('+' | '-') mul)*
//   mul       ::= unary (('*' | '/' | '@') unary)*       left-assoc (Python)
//   unary     ::= '-' unary | power
//   power     ::= postfix ['**' unary]                  -a**b = -(a**b)
//   postfix   ::= primary ('[' expr ']')*               gather: table[indices]
//   primary   ::= NUMBER | IDENT | IDENT '(' [expr (',' expr)*] ')'
//               | '(' expr ')' | '[' [expr (',' expr)*] ']'
//               | 'repeat' unary IDENT '(' [expr (',' expr)*] ')'
//
// A block call takes one keyword argument, `remat = none | pointwise |
// selective | full` (`repeat 8 Block(x, remat = full)`): the recompute of
// that instance, which the remat phase then keeps.
//
// Builtin functions (layer_norm, rms_norm, rope, gelu, softmax, causal_mask, transpose,
// reshape, iota, sum, mean, rms, cross_entropy, ..., and the unary math of
// frontend/UnaryMath.h: exp, log, tanh, sqrt, sigmoid, silu, relu, sin, cos,
// square, and shard(x, [AXIS, ...]), the sharding annotation of a value) and
// block calls share the call syntax; Sema tells them apart. `shard` is
// reserved: no statement may name a value so.
//
//===----------------------------------------------------------------------===//

#include "frontend/Parser.h"

#include <algorithm>
#include <functional>

namespace kiln {

std::optional<ModuleAST> parseModelFile(const SourceFile &file,
                                        DiagnosticPrinter &diag) {
  Parser parser(file, diag);
  return parser.parseModule();
}

bool Parser::checkUnfinishedLine() {
  if (!tok_.is(TokenKind::Equal) || !prev_.is(TokenKind::Identifier) ||
      prev_.loc.line <= beforePrev_.loc.line)
    return true;
  return fail(beforePrev_.loc,
              "expected an operand after '" + beforePrev_.text + "' at the end of line " +
                  std::to_string(beforePrev_.loc.line) + "; '" + prev_.text +
                  "' on the next line was read as it, and the '=' after it cannot continue "
                  "the expression (is this line unfinished?)");
}

bool Parser::canNest(SourceLoc loc) {
  if (!nesting_.atLimit())
    return true;
  fail(loc, "expression is nested too deeply (more than " +
                std::to_string(kMaxNesting) + " levels)");
  return false;
}

ExprPtr Parser::checkDepth(ExprPtr e) {
  if (!e)
    return e;
  for (const ExprPtr &op : e->operands)
    e->depth = std::max(e->depth, op->depth + 1);
  if (e->depth > kMaxNesting) {
    fail(e->loc, "expression is nested too deeply (more than " +
                     std::to_string(kMaxNesting) + " levels)");
    return nullptr;
  }
  return e;
}

std::string Parser::describeCurrent() const {
  switch (tok_.kind) {
  case TokenKind::Identifier:
  case TokenKind::Number:
    return "'" + tok_.text + "'";
  default:
    return describeTokenKind(tok_.kind);
  }
}

bool Parser::fail(SourceLoc loc, const std::string &msg) {
  // A lexer error has already been reported at this token; do not stack a
  // second, less precise parser message on top of it.
  if (!failed_ && !tok_.is(TokenKind::Error))
    diag_.error(loc, msg);
  failed_ = true;
  return false;
}

bool Parser::expect(TokenKind k, const std::string &what) {
  if (consumeIf(k))
    return true;
  return fail(tok_.loc, "expected " + what + ", found " + describeCurrent());
}

bool Parser::expectIdentifier(const std::string &what, std::string &name,
                              SourceLoc &loc) {
  if (!tok_.is(TokenKind::Identifier))
    return fail(tok_.loc, "expected " + what + ", found " + describeCurrent());
  name = tok_.text;
  loc = tok_.loc;
  consume();
  return true;
}

std::optional<ModuleAST> Parser::parseModule() {
  ModuleAST m;
  if (!expect(TokenKind::KwModel, "'model NAME' at the start of the file") ||
      !expectIdentifier("a model name after 'model'", m.name, m.nameLoc))
    return std::nullopt;
  while (!failed_) {
    while (consumeIf(TokenKind::Semicolon)) {
    }
    bool ok = true;
    switch (tok_.kind) {
    case TokenKind::Eof:
      return m;
    case TokenKind::KwConfig:
      ok = parseConfig(m);
      break;
    case TokenKind::KwParam:
      m.params.emplace_back();
      ok = parseParam(m.params.back());
      break;
    case TokenKind::KwInput:
      ok = parseInput(m);
      break;
    case TokenKind::KwBlock:
      ok = parseBlock(m);
      break;
    case TokenKind::KwTrain:
      ok = parseTrain(m);
      break;
    case TokenKind::Identifier:
    case TokenKind::KwMetric:
      ok = parseStmt(m.stmts);
      break;
    case TokenKind::KwReturn:
      ok = fail(tok_.loc, "'return' is only allowed inside a block");
      break;
    default:
      ok = fail(tok_.loc, "unexpected " + describeCurrent() +
                              "; expected 'config', 'param', 'input', "
                              "'block', 'train', 'metric' or "
                              "'name = expression'");
    }
    if (!ok)
      return std::nullopt;
  }
  return std::nullopt;
}

bool Parser::parseConfig(ModuleAST &m) {
  consume(); // 'config'
  ConfigDecl c;
  if (!expectIdentifier("a config name", c.name, c.loc) ||
      !expect(TokenKind::Equal, "'=' after the config name"))
    return false;
  c.value = parseExpr();
  if (!c.value || !checkUnfinishedLine())
    return false;
  m.configs.push_back(std::move(c));
  return true;
}

bool Parser::parseShape(ShapeSpec &shape) {
  shape.loc = tok_.loc;
  if (!expect(TokenKind::LBracket, "'[' to start a shape"))
    return false;
  if (tok_.is(TokenKind::RBracket))
    return consume(), true; // [] is a scalar
  return parseExprList(TokenKind::RBracket, shape.dims);
}

bool Parser::parseParam(ParamDecl &p) {
  consume(); // 'param'
  if (!expectIdentifier("a parameter name", p.name, p.loc) ||
      !parseShape(p.shape) ||
      !expect(TokenKind::Equal, "'=' and an initializer after the shape") ||
      !expectIdentifier("an initializer (zeros, ones or normal(std))", p.init,
                        p.initLoc))
    return false;
  if (p.init == "normal") {
    if (!expect(TokenKind::LParen, "'(' after 'normal'"))
      return false;
    p.stddev = parseExpr();
    if (!p.stddev || !expect(TokenKind::RParen, "')' after the standard "
                                                "deviation"))
      return false;
  } else if (p.init != "zeros" && p.init != "ones") {
    return fail(p.initLoc, "unknown initializer '" + p.init +
                               "'; expected zeros, ones or normal(std)");
  }
  return parseShardingSpec(p.sharding);
}

bool Parser::expectAxisName(std::string &name, SourceLoc &loc) {
  if (tok_.is(TokenKind::KwModel)) { // `model` opens the file only
    name = "model";
    loc = tok_.loc;
    consume();
    return true;
  }
  return expectIdentifier("a mesh axis name (or '_' for an unsplit "
                          "dimension)",
                          name, loc);
}

bool Parser::parseShardingSpec(std::optional<ShardingSpec> &spec) {
  if (!isKeyword("shard"))
    return true;
  consume();
  spec.emplace();
  spec->loc = tok_.loc;
  if (!expect(TokenKind::LBracket,
              "'[' after 'shard' (e.g. shard [_, model]; 'shard' is reserved "
              "for sharding annotations, so no value may be named so)"))
    return false;
  do {
    spec->dims.emplace_back();
    spec->dimLocs.emplace_back();
    if (!expectAxisName(spec->dims.back(), spec->dimLocs.back()))
      return false;
  } while (consumeIf(TokenKind::Comma));
  return expect(TokenKind::RBracket, "']' to end the sharding");
}

bool Parser::parseInput(ModuleAST &m) {
  consume(); // 'input'
  InputDecl in;
  if (!expectIdentifier("an input name", in.name, in.loc) ||
      !parseShape(in.shape))
    return false;
  in.dtype = "i32";
  in.dtypeLoc = tok_.loc;
  if (consumeIf(TokenKind::Colon) &&
      !expectIdentifier("an element type", in.dtype, in.dtypeLoc))
    return false;
  if (in.dtype != "i32" && in.dtype != "f32")
    return fail(in.dtypeLoc, "unsupported element type '" + in.dtype +
                                 "'; expected i32 or f32");
  if (!parseShardingSpec(in.sharding))
    return false;
  m.inputs.push_back(std::move(in));
  return true;
}

bool Parser::parseBlock(ModuleAST &m) {
  consume(); // 'block'
  BlockDecl b;
  if (!expectIdentifier("a block name", b.name, b.loc) ||
      !expect(TokenKind::LParen, "'(' after the block name"))
    return false;
  if (!tok_.is(TokenKind::RParen)) {
    do {
      BlockArg a;
      if (!expectIdentifier("an argument name", a.name, a.loc) ||
          !expect(TokenKind::Colon,
                  "':' and a shape after the argument name") ||
          !parseShape(a.shape))
        return false;
      if (consumeIf(TokenKind::Colon)) {
        SourceLoc dtLoc;
        if (!expectIdentifier("an element type", a.dtype, dtLoc))
          return false;
        if (a.dtype != "i32" && a.dtype != "f32")
          return fail(dtLoc, "unsupported element type '" + a.dtype + "'");
      }
      b.args.push_back(std::move(a));
    } while (consumeIf(TokenKind::Comma));
  }
  if (!expect(TokenKind::RParen, "')' after the block arguments"))
    return false;
  SourceLoc lbrace = tok_.loc;
  if (!expect(TokenKind::LBrace, "'{' to start the block body"))
    return false;
  while (!consumeIf(TokenKind::RBrace)) {
    while (consumeIf(TokenKind::Semicolon)) {
    }
    if (tok_.is(TokenKind::RBrace))
      continue;
    bool ok;
    if (tok_.is(TokenKind::Eof))
      ok = fail(lbrace, "unterminated block '" + b.name +
                            "': this '{' is never closed (reached end of "
                            "file)");
    else if (tok_.is(TokenKind::KwParam)) {
      b.params.emplace_back();
      ok = parseParam(b.params.back());
    } else if (tok_.is(TokenKind::Identifier) || tok_.is(TokenKind::KwReturn) ||
               tok_.is(TokenKind::KwMetric)) {
      ok = parseStmt(b.body);
    } else {
      ok = fail(tok_.loc, "unexpected " + describeCurrent() + " in block '" +
                              b.name +
                              "'; expected 'param', 'name = expression', "
                              "'metric', 'return' or '}'");
    }
    if (!ok)
      return false;
  }
  m.blocks.push_back(std::move(b));
  return true;
}

bool Parser::parseStmt(std::vector<Stmt> &out) {
  Stmt s;
  s.loc = tok_.loc;
  if (consumeIf(TokenKind::KwReturn)) {
    s.isReturn = true;
  } else if (consumeIf(TokenKind::KwMetric)) {
    s.isMetric = true;
    if (!expectIdentifier("a metric name after 'metric'", s.name, s.loc) ||
        !expect(TokenKind::Equal, "'=' after the metric name"))
      return false;
  } else {
    if (isKeyword("shard"))
      return fail(tok_.loc, "'shard' is reserved for sharding annotations "
                            "(shard [_, model] after a param, shard(x, [...]) "
                            "in an expression); name the value otherwise");
    s.name = tok_.text;
    consume();
    while (consumeIf(TokenKind::Comma)) {
      s.moreNames.emplace_back();
      s.moreNameLocs.push_back(tok_.loc);
      if (!expectIdentifier("a name after ','", s.moreNames.back(),
                            s.moreNameLocs.back()))
        return false;
    }
    if (!expect(TokenKind::Equal, "'=' after '" + s.name + "'"))
      return false;
  }
  s.value = parseExpr();
  if (!s.value || !checkUnfinishedLine())
    return false;
  out.push_back(std::move(s));
  return true;
}

bool Parser::parseSetting(Setting &s) {
  if (!expectIdentifier("a setting name", s.key, s.loc) ||
      !expect(TokenKind::Equal, "'=' after '" + s.key + "'"))
    return false;
  s.value = parseExpr();
  return s.value != nullptr;
}

bool Parser::parseOptimizerSpec(OptimizerSpec &spec) {
  if (!expectIdentifier("an optimizer name (adamw, adam or sgd)", spec.name,
                        spec.loc))
    return false;
  if (!consumeIf(TokenKind::LParen))
    return true; // `optimizer = sgd`: every argument at its default
  if (!tok_.is(TokenKind::RParen)) {
    do {
      Setting s;
      if (!parseSetting(s))
        return false;
      spec.args.push_back(std::move(s));
    } while (consumeIf(TokenKind::Comma));
  }
  return expect(TokenKind::RParen, "')' or ',' after an optimizer argument");
}

std::optional<OptimizerSpec> Parser::parseOptimizerOverride() {
  OptimizerSpec spec;
  if (!parseOptimizerSpec(spec) ||
      !expect(TokenKind::Eof, "the end of the optimizer (e.g. "
                              "'sgd(momentum = 0.9)')"))
    return std::nullopt;
  return spec;
}

bool Parser::parseMeshSpec(MeshSpec &spec) {
  spec.loc = tok_.loc;
  if (!expect(TokenKind::LBracket, "'[' to open the mesh (e.g. '[data = 8]')"))
    return false;
  do {
    Setting axis;
    if (!expectAxisName(axis.key, axis.loc) ||
        !expect(TokenKind::Equal, "'=' after '" + axis.key + "'"))
      return false;
    axis.value = parseExpr();
    if (!axis.value)
      return false;
    spec.axes.push_back(std::move(axis));
  } while (consumeIf(TokenKind::Comma));
  return expect(TokenKind::RBracket, "']' or ',' after a mesh axis");
}

std::optional<MeshSpec> Parser::parseMeshOverride() {
  MeshSpec spec;
  if (!parseMeshSpec(spec) ||
      !expect(TokenKind::Eof, "the end of the mesh (e.g. '[data = 8]')"))
    return std::nullopt;
  return spec;
}

bool Parser::parseTrain(ModuleAST &m) {
  TrainDecl t;
  t.loc = tok_.loc;
  if (m.train)
    return fail(t.loc, "duplicate 'train' section");
  consume(); // 'train'
  SourceLoc lbrace = tok_.loc;
  if (!expect(TokenKind::LBrace, "'{' after 'train'"))
    return false;
  while (!consumeIf(TokenKind::RBrace)) {
    while (consumeIf(TokenKind::Semicolon)) {
    }
    if (tok_.is(TokenKind::RBrace))
      continue;
    if (tok_.is(TokenKind::Eof))
      return fail(lbrace, "unterminated 'train' section: this '{' is never "
                          "closed (reached end of file)");
    if (tok_.is(TokenKind::Identifier) && tok_.text == "optimizer") {
      if (!t.optimizer.name.empty())
        return fail(tok_.loc, "duplicate 'optimizer' setting");
      consume();
      if (!expect(TokenKind::Equal, "'=' after 'optimizer'") ||
          !parseOptimizerSpec(t.optimizer))
        return false;
      continue;
    }
    if (tok_.is(TokenKind::Identifier) && tok_.text == "mesh") {
      if (t.mesh)
        return fail(tok_.loc, "duplicate 'mesh' setting");
      consume();
      t.mesh.emplace();
      if (!expect(TokenKind::Equal, "'=' after 'mesh'") ||
          !parseMeshSpec(*t.mesh))
        return false;
      continue;
    }
    Setting s;
    if (!parseSetting(s))
      return false;
    t.settings.push_back(std::move(s));
  }
  m.train = std::move(t);
  return true;
}

bool Parser::parseExprList(TokenKind close, std::vector<ExprPtr> &out) {
  do {
    ExprPtr e = parseExpr();
    if (!e)
      return false;
    out.push_back(std::move(e));
  } while (consumeIf(TokenKind::Comma));
  return expect(close, describeTokenKind(close) + " or ','");
}

bool Parser::parseCallArguments(Expr &call) {
  // `name = value`: parsed as an expression first; a bare name followed by
  // '=' is a keyword (no expression is followed by '=' otherwise).
  do {
    ExprPtr arg = parseExpr();
    if (!arg)
      return false;
    std::string keyword;
    if (tok_.is(TokenKind::Equal)) {
      if (arg->kind != Expr::Kind::Name)
        return fail(tok_.loc, "expected ',' or ')' after a call argument "
                              "(only 'name = value' takes '=')");
      keyword = arg->name;
      consume();
      arg = parseExpr();
      if (!arg)
        return false;
    }
    // keywords stays empty until the first keyword, then has one entry per
    // argument.
    if (!keyword.empty() && call.keywords.size() < call.operands.size())
      call.keywords.resize(call.operands.size());
    if (!keyword.empty() || !call.keywords.empty())
      call.keywords.push_back(keyword);
    call.operands.push_back(std::move(arg));
  } while (consumeIf(TokenKind::Comma));
  return expect(TokenKind::RParen, "')' or ','");
}

ExprPtr Parser::parseExpr() {
  if (!canNest(tok_.loc))
    return nullptr;
  RecursionDepth::Scope level(nesting_);
  return parseOr();
}

/// A left-associative chain `next (op next)*` where `match` says whether
/// the current token is one of the chain's operators (and which).
template <typename Next, typename Match>
static ExprPtr parseChain(ExprPtr lhs, Next next, Match match,
                          std::function<void()> consume,
                          std::function<SourceLoc()> loc,
                          std::function<ExprPtr(ExprPtr)> checkDepth) {
  char op;
  while (lhs && (op = match()) != 0) {
    auto e = std::make_unique<Expr>(Expr::Kind::Binary, loc());
    e->op = op;
    consume();
    ExprPtr rhs = next();
    if (!rhs)
      return nullptr;
    e->operands.push_back(std::move(lhs));
    e->operands.push_back(std::move(rhs));
    lhs = checkDepth(std::move(e));
  }
  return lhs;
}

ExprPtr Parser::parseOr() {
  return parseChain(
      parseAnd(), [&] { return parseAnd(); },
      [&]() -> char { return isKeyword("or") ? '|' : 0; },
      [&] { consume(); }, [&] { return tok_.loc; },
      [&](ExprPtr e) { return checkDepth(std::move(e)); });
}

ExprPtr Parser::parseAnd() {
  return parseChain(
      parseNot(), [&] { return parseNot(); },
      [&]() -> char { return isKeyword("and") ? '&' : 0; },
      [&] { consume(); }, [&] { return tok_.loc; },
      [&](ExprPtr e) { return checkDepth(std::move(e)); });
}

ExprPtr Parser::parseNot() {
  if (!isKeyword("not"))
    return parseComparison();
  if (!canNest(tok_.loc))
    return nullptr;
  RecursionDepth::Scope level(nesting_);
  auto e = std::make_unique<Expr>(Expr::Kind::Unary, tok_.loc);
  e->op = '!';
  consume();
  ExprPtr operand = parseNot();
  if (!operand)
    return nullptr;
  e->operands.push_back(std::move(operand));
  return checkDepth(std::move(e));
}

// Comparisons do not chain: `a < b < c` is an error at the second '<'.
ExprPtr Parser::parseComparison() {
  ExprPtr lhs = parseAdditive();
  auto match = [&]() -> char {
    switch (tok_.kind) {
    case TokenKind::Less: return '<';
    case TokenKind::Greater: return '>';
    case TokenKind::LessEqual: return 'l';
    case TokenKind::GreaterEqual: return 'g';
    case TokenKind::EqualEqual: return 'e';
    case TokenKind::BangEqual: return 'n';
    default: return 0;
    }
  };
  char op = match();
  if (!lhs || !op)
    return lhs;
  auto e = std::make_unique<Expr>(Expr::Kind::Binary, tok_.loc);
  e->op = op;
  consume();
  ExprPtr rhs = parseAdditive();
  if (!rhs)
    return nullptr;
  if (match()) {
    fail(tok_.loc, "comparisons cannot be chained; write 'a < b and b < c'");
    return nullptr;
  }
  e->operands.push_back(std::move(lhs));
  e->operands.push_back(std::move(rhs));
  return checkDepth(std::move(e));
}

ExprPtr Parser::parseAdditive() {
  ExprPtr lhs = parseMultiplicative();
  while (lhs && (tok_.is(TokenKind::Plus) || tok_.is(TokenKind::Minus))) {
    auto e = std::make_unique<Expr>(Expr::Kind::Binary, tok_.loc);
    e->op = tok_.text[0];
    consume();
    ExprPtr rhs = parseMultiplicative();
    if (!rhs)
      return nullptr;
    e->operands.push_back(std::move(lhs));
    e->operands.push_back(std::move(rhs));
    lhs = checkDepth(std::move(e));
  }
  return lhs;
}

ExprPtr Parser::parseMultiplicative() {
  ExprPtr lhs = parseUnary();
  while (lhs && (tok_.is(TokenKind::Star) || tok_.is(TokenKind::Slash) ||
                 tok_.is(TokenKind::At))) {
    auto e = std::make_unique<Expr>(Expr::Kind::Binary, tok_.loc);
    e->op = tok_.text[0];
    consume();
    ExprPtr rhs = parseUnary();
    if (!rhs)
      return nullptr;
    e->operands.push_back(std::move(lhs));
    e->operands.push_back(std::move(rhs));
    lhs = checkDepth(std::move(e));
  }
  return lhs;
}

ExprPtr Parser::parseUnary() {
  if (tok_.is(TokenKind::Minus)) {
    if (!canNest(tok_.loc))
      return nullptr;
    RecursionDepth::Scope level(nesting_);
    auto e = std::make_unique<Expr>(Expr::Kind::Unary, tok_.loc);
    e->op = '-';
    consume();
    ExprPtr operand = parseUnary();
    if (!operand)
      return nullptr;
    e->operands.push_back(std::move(operand));
    return checkDepth(std::move(e));
  }
  return parsePower();
}

ExprPtr Parser::parsePower() {
  ExprPtr base = parsePostfix();
  if (!base || !tok_.is(TokenKind::StarStar))
    return base;
  // a ** b ** c is a ** (b ** c): each link nests one level deeper.
  if (!canNest(tok_.loc))
    return nullptr;
  RecursionDepth::Scope level(nesting_);
  auto e = std::make_unique<Expr>(Expr::Kind::Binary, tok_.loc);
  e->op = '^';
  consume();
  ExprPtr exponent = parseUnary();
  if (!exponent)
    return nullptr;
  e->operands.push_back(std::move(base));
  e->operands.push_back(std::move(exponent));
  return checkDepth(std::move(e));
}

ExprPtr Parser::parsePostfix() {
  ExprPtr e = parsePrimary();
  while (e && tok_.is(TokenKind::LBracket)) {
    auto idx = std::make_unique<Expr>(Expr::Kind::Index, tok_.loc);
    consume();
    idx->operands.push_back(std::move(e));
    do {
      ExprPtr index = parseExpr();
      if (!index)
        return nullptr;
      idx->operands.push_back(std::move(index));
    } while (consumeIf(TokenKind::Comma));
    if (!expect(TokenKind::RBracket, "']' after the index"))
      return nullptr;
    e = checkDepth(std::move(idx));
  }
  return e;
}

ExprPtr Parser::parsePrimary() {
  SourceLoc loc = tok_.loc;
  switch (tok_.kind) {
  case TokenKind::Number: {
    auto e = std::make_unique<Expr>(Expr::Kind::Number, loc);
    e->isInteger = tok_.isInteger;
    e->number = tok_.floatValue;
    e->intNumber = tok_.intValue;
    consume();
    return e;
  }
  case TokenKind::Identifier: {
    std::string name = tok_.text;
    consume();
    if (!tok_.is(TokenKind::LParen)) {
      auto e = std::make_unique<Expr>(Expr::Kind::Name, loc);
      e->name = name;
      return e;
    }
    auto e = std::make_unique<Expr>(Expr::Kind::Call, loc);
    e->name = name;
    consume(); // '('
    if (consumeIf(TokenKind::RParen))
      return e;
    if (!parseCallArguments(*e))
      return nullptr;
    return checkDepth(std::move(e));
  }
  case TokenKind::KwModel: {
    // `model` opens the file; elsewhere it is a name like any other (the
    // usual tensor-parallel mesh axis: shard(x, [_, model])).
    consume();
    auto e = std::make_unique<Expr>(Expr::Kind::Name, loc);
    e->name = "model";
    return e;
  }
  case TokenKind::LParen: {
    consume();
    ExprPtr inner = parseExpr();
    if (!inner || !expect(TokenKind::RParen, "')'"))
      return nullptr;
    return inner;
  }
  case TokenKind::LBracket: {
    auto e = std::make_unique<Expr>(Expr::Kind::List, loc);
    consume();
    if (consumeIf(TokenKind::RBracket))
      return e;
    if (!parseExprList(TokenKind::RBracket, e->operands))
      return nullptr;
    return checkDepth(std::move(e));
  }
  case TokenKind::KwRepeat: {
    // The count is an expression and may itself be a `repeat`.
    if (!canNest(loc))
      return nullptr;
    RecursionDepth::Scope level(nesting_);
    auto e = std::make_unique<Expr>(Expr::Kind::Repeat, loc);
    consume();
    ExprPtr count = parseUnary();
    if (!count)
      return nullptr;
    SourceLoc callLoc = tok_.loc;
    if (!tok_.is(TokenKind::Identifier)) {
      fail(callLoc, "expected a block call after 'repeat N', found " +
                        describeCurrent());
      return nullptr;
    }
    ExprPtr call = parsePrimary();
    if (!call)
      return nullptr;
    if (call->kind != Expr::Kind::Call) {
      fail(callLoc, "expected a block call 'Name(x)' after 'repeat N'");
      return nullptr;
    }
    e->operands.push_back(std::move(count));
    e->operands.push_back(std::move(call));
    return checkDepth(std::move(e));
  }
  default:
    // A line that ends where an operand is due: say so there, not at the
    // next line's first token.
    if (prev_.loc.isValid() && loc.line > prev_.loc.line)
      fail(prev_.loc, "expected an expression after '" + prev_.text + "' at the end of line " +
                          std::to_string(prev_.loc.line) + ", found " + describeCurrent() +
                          (tok_.is(TokenKind::Eof) ? "" : " on line " + std::to_string(loc.line)));
    else
      fail(loc, "expected an expression, found " + describeCurrent());
    return nullptr;
  }
}

} // namespace kiln
