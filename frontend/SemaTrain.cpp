//===- SemaTrain.cpp - The train section and reported metrics -------------===//
//
// The part of Sema that reads what changes the training step rather than the
// model: batch/seq/clip/grad_accum (constants, so `-D` overrides them like
// configs), the optimizer with its arguments (PyTorch's defaults and checks),
// and `metric NAME = EXPR` statements.
//
// `-D optimizer=TEXT` replaces the file's optimizer as a whole (arguments
// included: adamw's betas mean nothing to sgd); TEXT has its own diagnostics
// printer, so its errors point into TEXT.
//
//===----------------------------------------------------------------------===//

#include "frontend/Sema.h"

#include <algorithm>

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace kiln {

namespace {

/// One optimizer argument and where its value goes.
struct OptimizerArgument {
  const char *key;
  enum class Kind { Beta, Positive, NonNegative, Dampening, Bool } kind;
  double TrainInfo::*number = nullptr;
  bool TrainInfo::*flag = nullptr;
};

using Kind = OptimizerArgument::Kind;

const OptimizerArgument kAdamArguments[] = {
    {"beta1", Kind::Beta, &TrainInfo::beta1},
    {"beta2", Kind::Beta, &TrainInfo::beta2},
    {"eps", Kind::Positive, &TrainInfo::epsilon},
    {"weight_decay", Kind::NonNegative, &TrainInfo::weightDecay},
    {"decay_norms", Kind::Bool, nullptr, &TrainInfo::decayNorms},
    {"decay_biases", Kind::Bool, nullptr, &TrainInfo::decayBiases},
    {"decay_embeddings", Kind::Bool, nullptr, &TrainInfo::decayEmbeddings},
};

const OptimizerArgument kSgdArguments[] = {
    {"momentum", Kind::NonNegative, &TrainInfo::momentum},
    {"dampening", Kind::Dampening, &TrainInfo::dampening},
    {"nesterov", Kind::Bool, nullptr, &TrainInfo::nesterov},
    {"weight_decay", Kind::NonNegative, &TrainInfo::weightDecay},
    {"decay_norms", Kind::Bool, nullptr, &TrainInfo::decayNorms},
    {"decay_biases", Kind::Bool, nullptr, &TrainInfo::decayBiases},
    {"decay_embeddings", Kind::Bool, nullptr, &TrainInfo::decayEmbeddings},
};

/// The shortest decimal that reads back as the same f32 (0.9, not
/// 0.8999999761581421): how messages show the stored hyperparameters.
std::string shortestF32(double value) {
  char text[32];
  for (int digits = 1; digits <= 9; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, value);
    if ((float)std::strtod(text, nullptr) == (float)value)
      break;
  }
  return text;
}

template <size_t N>
std::string argumentList(const OptimizerArgument (&args)[N]) {
  std::string list;
  for (size_t i = 0; i < N; ++i)
    list += std::string(i == 0 ? "" : i + 1 == N ? " or " : ", ") +
            args[i].key;
  return list;
}

/// The train settings besides `optimizer`, with their defaults when absent
/// (batch and seq have none: the model must say).
struct TrainSetting {
  const char *key;
  const char *defaultValue; // nullptr: required
};
const TrainSetting kTrainSettings[] = {{"batch", nullptr},
                                       {"seq", nullptr},
                                       {"clip", "0"},
                                       {"grad_accum", "1"},
                                       {"memory_budget", "0"},
                                       {"zero", "0"}};

} // namespace

bool Sema::declareTrainSettings() {
  if (!module_.train)
    return true;
  // Every setting is a constant usable anywhere (shapes in blocks refer to
  // batch and seq although the train section comes last in the file).
  for (const Setting &s : module_.train->settings) {
    // `precision = bf16` and `remat = full` name a choice: not constants.
    if (isNameSetting(s.key)) {
      if (!declareName(s.key, s.loc, "train setting"))
        return false;
      nameSettings_[s.key] = &s;
      continue;
    }
    bool known = false;
    for (const TrainSetting &t : kTrainSettings)
      known |= s.key == t.key;
    if (!known)
      return error(s.loc, "unknown train setting '" + s.key +
                              "'; expected batch, seq, clip, grad_accum, "
                              "memory_budget, zero, precision, remat, mesh "
                              "or optimizer");
    if (!declareName(s.key, s.loc, "train setting") ||
        !consts_.declare(s.key, s.loc, s.value.get(), "train setting"))
      return false;
  }
  // Settings left out still exist, so `-D clip=1.0` works on any model.
  for (const TrainSetting &t : kTrainSettings) {
    if (!t.defaultValue || consts_.isConstant(t.key))
      continue;
    auto value =
        std::make_unique<Expr>(Expr::Kind::Number, module_.train->loc);
    value->isInteger = std::string(t.key) != "clip";
    value->number = std::stod(t.defaultValue);
    value->intNumber = (long long)value->number;
    if (!consts_.declare(t.key, module_.train->loc, value.get(),
                         "train setting"))
      return false;
    defaultSettings_.push_back(std::move(value));
  }
  return true;
}

/// The value of train setting `key`; errors point at its value (or the
/// train section) and name the -D override that set it.
bool Sema::evaluateTrainNumber(const char *key, Number &out) {
  const TrainDecl &t = *module_.train;
  std::optional<Number> v = consts_.lookup(key, t.loc);
  if (!v)
    return false;
  SourceLoc loc = t.loc;
  for (const Setting &s : t.settings)
    if (s.key == key)
      loc = s.value->loc;
  std::string fromOverride = consts_.overrideOf(key);
  std::string origin =
      fromOverride.empty() ? "" : " (from " + fromOverride + ")";
  std::string k = key;
  if (k == "memory_budget") {
    // 1e9 is a whole number too, written as a float.
    double bytes = v->isInteger ? double(v->intValue) : v->value;
    if (bytes < 0 || bytes != std::floor(bytes) || bytes >= 9.2e18)
      return error(loc, "'memory_budget' must be a whole number of bytes, "
                        "with a unit if you like (60GiB; 0: no budget), got " +
                            v->str() + origin);
    out = v->isInteger ? *v : Number::ofInt(static_cast<int64_t>(bytes));
    return true;
  }
  if (k == "zero") {
    if (!v->isInteger || v->intValue < 0 || v->intValue > 3)
      return error(loc, "'zero' must be the ZeRO stage: 0 (replicated), 1 "
                        "(sharded optimizer state), 2 (and gradients) or 3 "
                        "(and parameters), got " + v->str() + origin);
    out = *v;
    return true;
  }
  if (k == "clip") {
    std::optional<float> f = toNonNegativeF32(v->value);
    if (!f)
      return error(loc, "'clip' must be a finite, non-negative gradient-norm "
                        "threshold (0: no clipping), got " +
                            describeAsF32(*v) + origin);
    out = Number::ofFloat(*f);
    return true;
  }
  if (!v->isInteger || v->intValue <= 0)
    return error(loc, "'" + k + "' must be a positive integer, got " +
                          v->str() + origin);
  out = *v;
  return true;
}

bool Sema::evaluateNameSetting(const char *key,
                               std::initializer_list<const char *> names,
                               std::string &out) {
  std::string expected = "expected ";
  for (const char *const *n = names.begin(); n != names.end(); ++n)
    expected += std::string(n == names.begin()       ? ""
                            : n + 1 == names.end() ? " or "
                                                   : ", ") +
                *n;
  auto known = [&](const std::string &name) {
    for (const char *n : names)
      if (name == n)
        return true;
    return false;
  };
  auto override = nameOverrides_.find(key);
  if (override != nameOverrides_.end()) {
    if (!known(override->second))
      return error(module_.train->loc, std::string("-D ") + key + "=" +
                                           override->second + ": unknown " +
                                           key + "; " + expected);
    out = override->second;
    return true;
  }
  auto setting = nameSettings_.find(key);
  if (setting == nameSettings_.end())
    return true;
  const Expr &e = *setting->second->value;
  if (e.kind != Expr::Kind::Name || !known(e.name))
    return error(e.loc, std::string("'") + key + "' must be a name; " +
                            expected);
  out = e.name;
  return true;
}

bool Sema::evaluateTrain() {
  if (!module_.train)
    return error(module_.nameLoc,
                 "model '" + module_.name +
                     "' has no 'train { batch = ...; seq = ... }' section");
  const TrainDecl &t = *module_.train;
  for (const char *key : {"batch", "seq"})
    if (!consts_.isConstant(key))
      return error(t.loc, std::string("the train section has no '") + key +
                              " = ...' setting");
  Number batch, seq, clip, accum, budget, zero;
  if (!evaluateTrainNumber("batch", batch) ||
      !evaluateTrainNumber("seq", seq) ||
      !evaluateTrainNumber("grad_accum", accum) ||
      !evaluateTrainNumber("clip", clip) ||
      !evaluateTrainNumber("memory_budget", budget) ||
      !evaluateTrainNumber("zero", zero))
    return false;
  graph_.train.batch = batch.intValue;
  graph_.train.seq = seq.intValue;
  graph_.train.gradAccum = accum.intValue;
  graph_.train.clip = clip.value;
  graph_.train.memoryBudget = budget.intValue;
  graph_.train.zero = zero.intValue;
  if (!evaluateNameSetting("precision", {"fp32", "tf32", "bf16"},
                           graph_.train.precision) ||
      !evaluateNameSetting("remat", {"auto", "none", "pointwise", "selective", "full"},
                           graph_.train.remat))
    return false;

  // The file's mesh, then `-D mesh=[...]`: the axes it names take its
  // sizes, the others keep the file's (a file declaring [data = 1,
  // model = 1] runs as -D mesh=[model = 2] without restating data).
  if (t.mesh && !evaluateMesh(*t.mesh, diag_))
    return false;
  if (textOverrides_.mesh &&
      !evaluateMesh(*textOverrides_.mesh, *textOverrides_.meshDiag))
    return false;
  bool hasDataAxis = std::any_of(
      graph_.train.mesh.begin(), graph_.train.mesh.end(),
      [](const auto &axis) { return axis.first == "data"; });
  if (graph_.train.zero > 0 && !hasDataAxis) {
    SourceLoc loc = t.loc;
    for (const Setting &s : t.settings)
      if (s.key == "zero")
        loc = s.value->loc;
    std::string fromOverride = consts_.overrideOf("zero");
    return error(loc, "'zero = " + std::to_string(graph_.train.zero) +
                          "' shards over the data-parallel ranks, but the " +
                          (graph_.train.mesh.empty()
                               ? "train section has no mesh"
                               : "mesh has no data axis") +
                          "; add mesh = [data = N]" +
                          (fromOverride.empty()
                               ? std::string()
                               : " (zero from " + fromOverride + ")"));
  }
  if (graph_.train.zero > 0) {
    // ZeRO cuts each whole tensor into flat slices over `data`; a tensor
    // parallel slice of it would need a second level of slicing.
    SourceLoc loc = t.loc;
    for (const Setting &s : t.settings)
      if (s.key == "zero")
        loc = s.value->loc;
    for (const auto &[axis, size] : graph_.train.mesh)
      if (axis != "data" && size > 1)
        return error(loc, "'zero = " + std::to_string(graph_.train.zero) +
                                "' with mesh axis '" + axis + "' (" +
                                std::to_string(size) + " ranks) is not "
                                "supported: ZeRO shards over the data axis "
                                "of a mesh without tensor parallelism; use "
                                "zero = 0, or " + axis + " = 1");
  }
  if (textOverrides_.optimizer)
    return evaluateOptimizer(*textOverrides_.optimizer,
                             *textOverrides_.optimizerDiag);
  if (t.optimizer.name.empty())
    return true; // adamw with every default
  return evaluateOptimizer(t.optimizer, diag_);
}

bool Sema::evaluateMesh(const MeshSpec &spec, DiagnosticPrinter &diag) {
  auto fail = [&](SourceLoc loc, const std::string &msg) {
    return errorIn(diag, loc, msg);
  };
  std::vector<std::pair<std::string, int64_t>> &mesh = graph_.train.mesh;
  for (size_t i = 0; i < spec.axes.size(); ++i) {
    const Setting &axis = spec.axes[i];
    // `data` splits the batch; any other axis (model, ...) splits what
    // the sharding annotations name.
    for (size_t j = 0; j < i; ++j)
      if (spec.axes[j].key == axis.key)
        return fail(axis.loc, "duplicate mesh axis '" + axis.key + "'");
    std::optional<Number> v = consts_.evaluate(*axis.value);
    if (!v)
      return false;
    if (!v->isInteger || v->intValue < 1 || v->intValue > 65536)
      return fail(axis.value->loc,
                  "mesh axis '" + axis.key + "' must be a number of ranks "
                  "between 1 and 65536, got " + v->str());
    auto it = std::find_if(mesh.begin(), mesh.end(), [&](const auto &a) {
      return a.first == axis.key;
    });
    if (it != mesh.end())
      it->second = v->intValue;
    else
      mesh.emplace_back(axis.key, v->intValue);
  }
  return true;
}

bool Sema::evaluateOptimizer(const OptimizerSpec &spec,
                             DiagnosticPrinter &diag) {
  auto fail = [&](SourceLoc loc, const std::string &msg) {
    return errorIn(diag, loc, msg);
  };
  TrainInfo &train = graph_.train;
  train.optimizer = spec.name;
  const OptimizerArgument *begin, *end;
  std::string expected;
  if (spec.name == "adamw" || spec.name == "adam") {
    begin = std::begin(kAdamArguments);
    end = std::end(kAdamArguments);
    expected = argumentList(kAdamArguments);
    // torch.optim.AdamW decays by 0.01 by default, torch.optim.Adam not.
    train.weightDecay = spec.name == "adamw" ? 0.01 : 0.0;
  } else if (spec.name == "sgd") {
    begin = std::begin(kSgdArguments);
    end = std::end(kSgdArguments);
    expected = argumentList(kSgdArguments);
    train.weightDecay = 0.0;
  } else {
    return fail(spec.loc, "unknown optimizer '" + spec.name +
                              "'; expected adamw, adam or sgd");
  }

  std::map<std::string, SourceLoc> seen;
  for (const Setting &s : spec.args) {
    std::string key = s.key == "epsilon" ? "eps" : s.key;
    const OptimizerArgument *arg = nullptr;
    for (const OptimizerArgument *a = begin; a != end; ++a)
      if (key == a->key)
        arg = a;
    if (!arg)
      return fail(s.loc, "unknown " + spec.name + " argument '" + s.key +
                             "'; expected " + expected);
    if (!seen.emplace(key, s.loc).second)
      return fail(s.loc, "duplicate " + spec.name + " argument '" + s.key +
                             "'");
    std::string what = spec.name + " " + s.key;
    if (arg->kind == Kind::Bool) {
      const Expr &e = *s.value;
      if (e.kind != Expr::Kind::Name || (e.name != "true" && e.name != "false"))
        return fail(e.loc, what + " must be true or false");
      train.*(arg->flag) = e.name == "true";
      continue;
    }
    if (s.value->kind == Expr::Kind::Name &&
        (s.value->name == "true" || s.value->name == "false"))
      return fail(s.value->loc, what + " must be a number, got " +
                                    s.value->name);
    std::optional<Number> v = consts_.evaluate(*s.value);
    if (!v)
      return false;
    // The values become f32 attributes of the update ops: check them as
    // f32, so 0.99999999 (which rounds to 1) is refused like 1 is.
    std::optional<float> f = toNonNegativeF32(v->value);
    bool roundsToOne = f && *f >= 1.0f && v->value < 1.0;
    std::string got = ", got " + describeAsF32(*v) +
                      (roundsToOne ? " (1 as a 32-bit float)" : "");
    switch (arg->kind) {
    case Kind::Beta:
      if (!f || *f >= 1.0f)
        return fail(s.value->loc, what + " must be in [0, 1)" + got);
      break;
    case Kind::Positive:
      if (!f || *f == 0.0f)
        return fail(s.value->loc, what + " must be finite and positive" + got);
      break;
    case Kind::NonNegative:
      if (!f)
        return fail(s.value->loc,
                    what + " must be finite and non-negative" + got);
      break;
    case Kind::Dampening:
      if (!f || *f > 1.0f)
        return fail(s.value->loc, what + " must be in [0, 1]" + got);
      break;
    case Kind::Bool:
      break;
    }
    train.*(arg->number) = *f;
  }
  if (train.nesterov && (train.momentum <= 0.0 || train.dampening != 0.0))
    return fail(spec.loc, "sgd nesterov = true needs momentum > 0 and "
                          "dampening = 0, got momentum " +
                              shortestF32(train.momentum) + " and dampening " +
                              shortestF32(train.dampening));
  return true;
}

bool Sema::recordMetric(const Stmt &s, const Value &v,
                        const std::string &name) {
  if (!v.isTensor())
    return error(s.loc, "metric '" + s.name +
                            "' must be a scalar tensor, got the number " +
                            v.number.str());
  const TensorType t = typeOf(v.node);
  if (t.rank() != 0 || !t.isFloat())
    return error(s.value->loc,
                 "metric '" + s.name + "' must be a scalar (shape []) f32 "
                 "tensor, got " + formatType(t) +
                     "; reduce it, e.g. with rms(x) or mean(x)");
  auto [it, inserted] = metricNames_.emplace(name, s.loc);
  if (!inserted) {
    error(s.loc, "duplicate metric '" + name + "'");
    diag_.note(it->second, "previous definition is here");
    return false;
  }
  graph_.metrics.push_back({name, v.node, s.loc});
  return true;
}

} // namespace kiln
