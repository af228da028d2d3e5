//===- Optimizer.cpp - The optimizer step (AdamW) and gradient norm -------===//
//
// --kiln-optimizer: appends the parameter update to the joint function built
// by --kiln-autodiff, so that one artifact call is one whole training step.
// The optimizer is chosen in the model's `train` section and arrives as the
// module attribute kiln.train; only "adamw" exists today.
//
// Algorithm, for the function with a kiln.role = "loss" result:
//  1. Read kiln.train: optimizer = "adamw", beta1, beta2, epsilon,
//     weight_decay (missing attribute, key or unknown optimizer: error).
//  2. Pair every `param` argument with the `grad` result of the same
//     kiln.name (no grad results at all: autodiff has not run; error).
//  3. Append arguments: adam_m per param, adam_v per param (same type and
//     name as the param), then lr and step (rank-0 f32; step is 1-based).
//  4. grad_norm = sqrt(sum over grads of reduce_sum(g * g, all dims)),
//     appended as a result (kiln.role = "grad_norm"). It is reported, not
//     used for clipping (yet).
//  5. One kiln.adamw per param; append its new param, m and v as results.
//     Final result order: loss, grads..., grad_norm, params..., adam_m...,
//     adam_v... (consumers look results up by role and name).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "ir/KilnDialect.h"
#include "ir/KilnOps.h"
#include "ir/StepFunction.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"

#include <numeric>

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNOPTIMIZER
#include "passes/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;
using namespace mlir::kiln;

namespace {


/// Hyperparameters of AdamW baked into the kernels (kiln.train).
struct AdamWConfig {
  FloatAttr beta1, beta2, epsilon, weightDecay;
};

/// A parameter argument and its gradient result.
struct ParamAndGrad {
  BlockArgument param;
  StringAttr name;
  unsigned gradResult;
};

StringAttr getRole(ArrayRef<NamedAttribute> attrs) {
  for (const NamedAttribute &attr : attrs)
    if (attr.getName() == kRoleAttrName)
      return dyn_cast<StringAttr>(attr.getValue());
  return {};
}

DictionaryAttr roleAndName(Builder &b, StringRef role, StringAttr name) {
  return b.getDictionaryAttr({b.getNamedAttr(kRoleAttrName, b.getStringAttr(role)),
                              b.getNamedAttr(kNameAttrName, name)});
}

/// Step 1: kiln.train -> AdamWConfig, with an error on `module` otherwise.
FailureOr<AdamWConfig> readTrainConfig(ModuleOp module) {
  auto train = module->getAttrOfType<DictionaryAttr>(kTrainAttrName);
  if (!train)
    return module.emitError("--kiln-optimizer needs the module attribute "
                            "'kiln.train' (a dictionary with the optimizer "
                            "and its hyperparameters)");
  auto optimizer = train.getAs<StringAttr>("optimizer");
  if (!optimizer)
    return module.emitError("'kiln.train' has no string 'optimizer' entry");
  if (optimizer.getValue() != "adamw")
    return module.emitError("unsupported optimizer '")
           << optimizer.getValue() << "' in 'kiln.train' (supported: adamw)";

  Builder b(module.getContext());
  AdamWConfig config;
  for (auto [key, slot] :
       {std::pair<StringRef, FloatAttr *>{"beta1", &config.beta1},
        {"beta2", &config.beta2},
        {"epsilon", &config.epsilon},
        {"weight_decay", &config.weightDecay}}) {
    Attribute value = train.get(key);
    double number;
    if (auto f = dyn_cast_or_null<FloatAttr>(value))
      number = f.getValueAsDouble();
    else if (auto i = dyn_cast_or_null<IntegerAttr>(value))
      number = static_cast<double>(i.getInt());
    else
      return module.emitError("'kiln.train' needs a numeric '")
             << key << "' for the adamw optimizer";
    *slot = b.getF32FloatAttr(static_cast<float>(number));
  }
  return config;
}

/// Step 2: the params of `func` with their grad results.
FailureOr<SmallVector<ParamAndGrad>> pairParamsWithGrads(func::FuncOp func) {
  llvm::StringMap<unsigned> gradByName;
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i) {
    StringAttr role = getRole(func.getResultAttrs(i));
    if (role && (role.getValue() == role::kGradNorm || role.getValue() == role::kParam))
      return func.emitOpError("already has optimizer results "
                              "(was --kiln-optimizer already run?)");
    if (!role || role.getValue() != role::kGrad)
      continue;
    if (auto name = func.getResultAttrOfType<StringAttr>(i, kNameAttrName))
      gradByName[name.getValue()] = i;
  }
  if (gradByName.empty())
    return func.emitOpError("has no kiln.role = \"grad\" results; "
                            "--kiln-optimizer must run after --kiln-autodiff");

  SmallVector<ParamAndGrad> pairs;
  FailureOr<SmallVector<ParameterArgument>> params = getParameterArguments(func);
  if (failed(params))
    return failure();
  for (auto [arg, name] : *params) {
    auto it = gradByName.find(name.getValue());
    if (it == gradByName.end())
      return func.emitOpError("has no gradient result for parameter '")
             << name.getValue() << "'";
    if (func.getResultTypes()[it->second] != arg.getType())
      return func.emitOpError("gradient of parameter '")
             << name.getValue() << "' has type "
             << func.getResultTypes()[it->second] << ", expected "
             << arg.getType();
    auto type = cast<RankedTensorType>(arg.getType());
    if (!type.getElementType().isF32())
      return func.emitOpError("parameter '")
             << name.getValue()
             << "' must be f32 for the adamw optimizer, found " << type;
    pairs.push_back({arg, name, it->second});
  }
  return pairs;
}

/// Steps 3-5 on one function.
LogicalResult appendOptimizerStep(func::FuncOp func,
                                  const AdamWConfig &config) {
  FailureOr<SmallVector<ParamAndGrad>> pairs = pairParamsWithGrads(func);
  if (failed(pairs))
    return failure();

  auto ret = cast<func::ReturnOp>(func.front().getTerminator());
  OpBuilder b(ret);
  auto scalarType = RankedTensorType::get({}, b.getF32Type());

  // (3) Optimizer state and step inputs, appended after the existing args
  // in one insertArguments call (one at a time is quadratic: each insertion
  // rebuilds the function's argument attribute array).
  SmallVector<Type> newTypes;
  SmallVector<DictionaryAttr> newAttrs;
  SmallVector<Location> newLocs;
  for (StringRef argRole : {role::kAdamM, role::kAdamV})
    for (const ParamAndGrad &p : *pairs) {
      newTypes.push_back(p.param.getType());
      newAttrs.push_back(roleAndName(b, argRole, p.name));
      newLocs.push_back(p.param.getLoc());
    }
  for (StringRef argRole : {role::kLearningRate, role::kStep}) {
    newTypes.push_back(scalarType);
    newAttrs.push_back(roleAndName(b, argRole, b.getStringAttr(argRole)));
    newLocs.push_back(func.getLoc());
  }
  unsigned firstNew = func.getNumArguments();
  SmallVector<unsigned> newIndices(newTypes.size(), firstNew);
  func.insertArguments(newIndices, newTypes, newAttrs, newLocs);
  auto newArgs = func.getArguments().drop_front(firstNew);
  size_t numParams = pairs->size();
  SmallVector<Value> moments1(newArgs.take_front(numParams));
  SmallVector<Value> moments2(newArgs.slice(numParams, numParams));
  Value lr = newArgs[2 * numParams];
  Value step = newArgs[2 * numParams + 1];

  // (4) grad_norm = sqrt(sum_g sum(g * g)).
  SmallVector<Value> grads;
  for (const ParamAndGrad &p : *pairs)
    grads.push_back(ret.getOperand(p.gradResult));
  Value sumOfSquares;
  for (Value grad : grads) {
    auto type = cast<RankedTensorType>(grad.getType());
    Location loc = grad.getLoc();
    Value squares = b.create<MulOp>(loc, grad, grad); // shape of the param
    Value total = squares;
    if (type.getRank() > 0) {
      SmallVector<int64_t> allDims(type.getRank());
      std::iota(allDims.begin(), allDims.end(), 0);
      total = b.create<ReduceSumOp>(loc, squares, allDims); // tensor<f32>
    }
    sumOfSquares =
        sumOfSquares ? b.create<AddOp>(loc, sumOfSquares, total) : total;
  }
  Value gradNorm = b.create<SqrtOp>(func.getLoc(), sumOfSquares);

  // (5) The AdamW update of every parameter.
  SmallVector<Value> newParams, newMoments1, newMoments2;
  for (auto [p, m, v, grad] :
       llvm::zip_equal(*pairs, moments1, moments2, grads)) {
    Type type = p.param.getType();
    auto update = b.create<AdamWOp>(
        p.param.getLoc(), type, type, type, p.param, grad, m, v, lr, step,
        config.beta1, config.beta2, config.epsilon, config.weightDecay);
    newParams.push_back(update.getNewParam());
    newMoments1.push_back(update.getNewM());
    newMoments2.push_back(update.getNewV());
  }

  // Results: loss, grads... (unchanged), grad_norm, params, adam_m, adam_v.
  SmallVector<Value> results(ret.getOperands());
  SmallVector<DictionaryAttr> resultAttrs;
  func.getAllResultAttrs(resultAttrs);
  results.push_back(gradNorm);
  resultAttrs.push_back(
      roleAndName(b, role::kGradNorm, b.getStringAttr(role::kGradNorm)));
  auto appendResults = [&](ArrayRef<Value> values, StringRef role) {
    for (auto [value, p] : llvm::zip_equal(values, *pairs)) {
      results.push_back(value);
      resultAttrs.push_back(roleAndName(b, role, p.name));
    }
  };
  appendResults(newParams, role::kParam);
  appendResults(newMoments1, role::kAdamM);
  appendResults(newMoments2, role::kAdamV);

  ret->setOperands(results);
  func.setType(FunctionType::get(func.getContext(), func.getArgumentTypes(),
                                 ValueRange(results).getTypes()));
  func.setAllResultAttrs(resultAttrs);
  return success();
}

struct KilnOptimizerPass
    : public mlir::kiln::impl::KilnOptimizerBase<KilnOptimizerPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<AdamWConfig> config = readTrainConfig(module);
    if (failed(config))
      return signalPassFailure();

    bool found = false;
    for (func::FuncOp func : module.getOps<func::FuncOp>()) {
      if (!hasLossResult(func))
        continue;
      found = true;
      if (func.isExternal() || !func.getBody().hasOneBlock() ||
          !isa<func::ReturnOp>(func.front().getTerminator())) {
        func.emitOpError("must have a single-block body ending with "
                         "func.return");
        return signalPassFailure();
      }
      if (failed(appendOptimizerStep(func, *config)))
        return signalPassFailure();
    }
    if (!found) {
      module.emitError("--kiln-optimizer found no function with a "
                       "kiln.role = \"loss\" result");
      signalPassFailure();
    }
  }
};

} // namespace
