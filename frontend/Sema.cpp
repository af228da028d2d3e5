//===- Sema.cpp - Declarations, train section and top-level statements ----===//
//
// The declaration half of Sema (see Sema.h for the algorithm). Expressions
// live in SemaExpr.cpp, builtin functions in SemaBuiltins.cpp.
//
//===----------------------------------------------------------------------===//

#include "frontend/Sema.h"

#include <algorithm>
#include <numeric>
#include <sstream>

namespace kiln {

std::string formatShape(const std::vector<int64_t> &shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i)
    os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

std::string formatType(const TensorType &type) {
  return formatShape(type.shape) +
         (type.isFloat() ? " f32" : type.isBool() ? " bool" : " i32");
}

std::optional<TensorGraph>
buildTensorGraph(const ModuleAST &module,
                 const std::map<std::string, std::string> &overrides,
                 DiagnosticPrinter &diag,
                 const TextOverrides &text) {
  Sema sema(module, diag, text);
  return sema.run(overrides);
}

/// "an input", "a config".
static std::string withArticle(const std::string &noun) {
  bool vowel =
      !noun.empty() && std::string("aeiou").find(noun[0]) != std::string::npos;
  return (vowel ? "an " : "a ") + noun;
}

bool Sema::error(SourceLoc loc, const std::string &msg) {
  diag_.error(loc, msg);
  // Inside an inlined block, say which call got us here (innermost first);
  // deep nests show the innermost calls and the outermost one.
  constexpr size_t kMaxNotes = 8;
  size_t shown = 0;
  for (auto it = callStack_.rbegin(); it != callStack_.rend(); ++it) {
    if (++shown < kMaxNotes || std::next(it) == callStack_.rend()) {
      diag_.note(*it, "in the block called here");
    } else if (shown == kMaxNotes) {
      diag_.note(callStack_.front(),
                 "in the block called here, through " +
                     std::to_string(callStack_.size() - kMaxNotes) +
                     " more block calls");
      break;
    }
  }
  return false;
}

bool Sema::declareName(const std::string &name, SourceLoc loc,
                       const char *kind) {
  if (name == "inf") {
    diag_.error(loc, std::string("a ") + kind +
                         " cannot be named 'inf': that is the builtin infinity (as in "
                         "-inf), which the name would hide");
    return false;
  }
  auto [it, inserted] = symbols_.emplace(name, Symbol{kind, loc});
  if (inserted)
    return true;
  if (std::string(it->second.kind) == kind)
    diag_.error(loc, std::string("duplicate ") + kind + " '" + name + "'");
  else
    diag_.error(loc, "'" + name + "' is already declared as " +
                         withArticle(it->second.kind));
  diag_.note(it->second.loc, "previous definition is here");
  return false;
}

bool Sema::declareAll() {
  for (const ConfigDecl &c : module_.configs)
    if (!declareName(c.name, c.loc, "config") ||
        !consts_.declare(c.name, c.loc, c.value.get(), "config"))
      return false;
  if (!declareTrainSettings())
    return false;
  for (const BlockDecl &b : module_.blocks) {
    // attention and rope are dispatched before blocks, the others after.
    if (isBuiltin(b.name) || b.name == "attention" || b.name == "rope") {
      diag_.error(b.loc, "block '" + b.name + "' has the name of a builtin function, "
                         "which its calls would hide; rename the block");
      return false;
    }
    if (!declareName(b.name, b.loc, "block") || !checkBlockDecl(b))
      return false;
    blocks_[b.name] = &b;
  }
  for (const InputDecl &in : module_.inputs) {
    if (!declareName(in.name, in.loc, "input"))
      return false;
  }
  for (const ParamDecl &p : module_.params)
    if (!declareName(p.name, p.loc, "parameter"))
      return false;
  return true;
}

bool Sema::checkAssignedNames(const Stmt &s, const Scope *block) {
  if (s.isReturn)
    return true;
  for (size_t i = 0; i <= s.moreNames.size(); ++i) {
    const std::string &name = i ? s.moreNames[i - 1] : s.name;
    SourceLoc loc = i ? s.moreNameLocs[i - 1] : s.loc;
    for (size_t j = 0; j < i; ++j)
      if ((j ? s.moreNames[j - 1] : s.name) == name)
        return error(loc, "'" + name + "' is assigned twice in one statement");
    if (name == "inf")
      return error(loc, "cannot assign to 'inf', the builtin infinity (as in -inf)");
    if (block && block->params.count(name))
      return error(loc, "cannot assign to parameter '" + name + "'");
    // A block's own argument (or a value it assigned already) shadows any
    // top-level name: `x = x @ w` on an argument x is the usual pattern.
    if (block && block->vars.count(name))
      continue;
    auto sym = symbols_.find(name);
    if (sym != symbols_.end())
      return error(loc, "cannot assign to " + std::string(sym->second.kind) + " '" +
                            name + "'");
  }
  return true;
}

/// A block's arguments and parameters share one namespace.
bool Sema::checkBlockDecl(const BlockDecl &block) {
  std::map<std::string, std::pair<const char *, SourceLoc>> names;
  auto add = [&](const std::string &name, SourceLoc loc, const char *kind) {
    if (name == "inf") {
      diag_.error(loc, std::string("a block ") + kind +
                           " cannot be named 'inf': that is the builtin infinity (as in "
                           "-inf), which the name would hide");
      return false;
    }
    auto [it, inserted] = names.emplace(name, std::make_pair(kind, loc));
    if (inserted)
      return true;
    if (std::string(it->second.first) == kind)
      diag_.error(loc, std::string("duplicate ") + kind + " '" + name +
                           "' in block '" + block.name + "'");
    else
      diag_.error(loc, "'" + name + "' is already declared as " +
                           withArticle(it->second.first) + " of block '" +
                           block.name + "'");
    diag_.note(it->second.second, "previous definition is here");
    return false;
  };
  for (const BlockArg &a : block.args)
    if (!add(a.name, a.loc, "argument"))
      return false;
  for (const ParamDecl &p : block.params)
    if (!add(p.name, p.loc, "parameter"))
      return false;
  return true;
}

bool Sema::evaluateShape(const ShapeSpec &spec, const std::string &what,
                         std::vector<int64_t> &shape) {
  shape.clear();
  for (const ExprPtr &d : spec.dims) {
    std::optional<long long> v =
        consts_.evaluatePositiveInt(*d, "a dimension of " + what);
    if (!v)
      return false;
    shape.push_back(*v);
  }
  return checkTensorSize(shape, spec.loc);
}

bool Sema::checkTensorSize(const std::vector<int64_t> &shape, SourceLoc loc) {
  // Far beyond any real model, and small enough that element counts never
  // overflow int64 in later shape arithmetic.
  constexpr int64_t kMaxElements = int64_t(1) << 40;
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d > kMaxElements || n > kMaxElements / d)
      return error(loc, "tensor " + formatShape(shape) +
                            " is too large (more than 2^40 elements)");
    n *= d;
  }
  return true;
}

std::optional<int> Sema::createParam(const ParamDecl &decl,
                                     const std::string &fullName) {
  ParamInfo info;
  info.name = fullName;
  info.loc = decl.loc;
  info.init = decl.init;
  if (!evaluateShape(decl.shape, "parameter '" + decl.name + "'",
                     info.type.shape))
    return std::nullopt;
  if (decl.stddev) {
    std::optional<Number> std = consts_.evaluate(*decl.stddev);
    if (!std)
      return std::nullopt;
    if (std->value < 0) {
      error(decl.stddev->loc, "the standard deviation of normal() must not "
                              "be negative, got " +
                                  std->str());
      return std::nullopt;
    }
    // The artifact stores it as an f32.
    if (!toNonNegativeF32(std->value)) {
      error(decl.stddev->loc, "the standard deviation of normal() must be "
                              "finite, got " +
                                  describeAsF32(*std));
      return std::nullopt;
    }
    info.stddev = std->value == 0 ? 0.0 : std->value; // -0 prints as 0
  }
  if (decl.sharding &&
      !evaluateSharding(*decl.sharding, info.type.shape,
                        "parameter '" + decl.name + "'", info.sharding))
    return std::nullopt;
  graph_.params.push_back(std::move(info));
  // Top-level parameters sort by their declaration; block instances by the
  // top-level statement that created them, then creation order.
  uint32_t key = callStack_.empty() ? decl.loc.offset : currentStmtOffset_;
  paramOrderKey_.push_back({key, (uint32_t)paramOrderKey_.size()});
  return (int)graph_.params.size() - 1;
}

bool Sema::runTopLevel() {
  Scope top;
  for (const ParamDecl &p : module_.params) {
    std::optional<int> idx = createParam(p, p.name);
    if (!idx)
      return false;
    topParams_[p.name] = *idx;
  }
  for (const InputDecl &in : module_.inputs) {
    InputInfo info;
    info.name = in.name;
    info.loc = in.loc;
    info.type.element = in.dtype == "f32" ? ElementType::F32 : ElementType::I32;
    if (!evaluateShape(in.shape, "input '" + in.name + "'", info.type.shape))
      return false;
    if (in.sharding &&
        !evaluateSharding(*in.sharding, info.type.shape,
                          "input '" + in.name + "'", info.sharding))
      return false;
    inputIndex_[in.name] = graph_.inputs.size();
    graph_.inputs.push_back(std::move(info));
  }

  const Stmt *lossStmt = nullptr;
  for (const Stmt &s : module_.stmts) {
    if (!checkAssignedNames(s, nullptr))
      return false;
    currentStmtOffset_ = s.loc.offset;
    std::optional<std::vector<Value>> v = evaluateStatement(s, top);
    if (!v)
      return false;
    if (s.isMetric && !recordMetric(s, v->front(), s.name))
      return false;
    bindNames(s, *v, top);
    if (s.name == "loss" && !s.isMetric)
      lossStmt = &s;
  }

  if (!lossStmt)
    return error(module_.nameLoc, "model has no loss: assign the scalar "
                                  "training objective with 'loss = ...'");
  const Value &loss = top.vars["loss"];
  if (!loss.isTensor())
    return error(lossStmt->loc, "the loss must be a scalar tensor, got the "
                                "number " +
                                    loss.number.str());
  const TensorType t = typeOf(loss.node);
  if (t.rank() != 0 || !t.isFloat())
    return error(lossStmt->loc, "the loss must be a scalar (shape []) f32 "
                                "tensor, got " +
                                    formatType(t));
  // A reshape shares its input's buffer, and parameters are updated in
  // place: a loss that is a parameter (or a view of one) would be read back
  // after the update, i.e. report the next step's value.
  int root = loss.node;
  while (graph_.nodes[root].kind == NodeKind::Reshape)
    root = graph_.nodes[root].operands[0];
  if (graph_.nodes[root].kind == NodeKind::Param) {
    const std::string &name = graph_.params[graph_.nodes[root].argIndex].name;
    return error(lossStmt->value->loc,
                 "the loss cannot be the parameter '" + name +
                     "' itself: parameters are updated in place, so compute "
                     "the loss from it (e.g. 'loss = sum(" + name + ")')");
  }
  graph_.loss = loss.node;
  // The optimizer needs something to update (and autodiff a gradient).
  if (graph_.params.empty())
    return error(module_.nameLoc,
                 "model '" + module_.name +
                     "' has no parameters to train: declare one with "
                     "'param NAME [shape] = init'");
  return true;
}

void Sema::orderParams() {
  std::vector<int> order(graph_.params.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return paramOrderKey_[a] < paramOrderKey_[b];
  });
  std::vector<int> newIndex(order.size());
  std::vector<ParamInfo> sorted;
  for (size_t i = 0; i < order.size(); ++i) {
    newIndex[order[i]] = i;
    sorted.push_back(std::move(graph_.params[order[i]]));
  }
  graph_.params = std::move(sorted);
  for (Node &n : graph_.nodes)
    if (n.kind == NodeKind::Param)
      n.argIndex = newIndex[n.argIndex];
}

std::optional<TensorGraph>
Sema::run(const std::map<std::string, std::string> &overrides) {
  graph_.modelName = module_.name;
  graph_.modelLoc = module_.nameLoc;
  // `-D precision=bf16` names a choice, not a number (see evaluateTrain).
  std::map<std::string, std::string> numbers;
  for (const auto &[key, text] : overrides)
    (isNameSetting(key) ? nameOverrides_ : numbers)[key] = text;
  if (!declareAll() || !consts_.applyOverrides(numbers, module_.nameLoc) ||
      !evaluateTrain())
    return std::nullopt;
  // Evaluate every config once, so a bad config is reported even if unused.
  for (const ConfigDecl &c : module_.configs)
    if (!consts_.lookup(c.name, c.loc))
      return std::nullopt;
  if (!runTopLevel())
    return std::nullopt;
  orderParams();
  return std::move(graph_);
}

} // namespace kiln
