//===- CollectiveReport.cpp - The collectives a compiled step runs --------===//

#include "passes/CollectiveReport.h"

#include "ir/KilnOps.h"
#include "ir/OpCost.h"
#include "ir/Sharding.h"
#include "ir/StepFunction.h"
#include "passes/RematReport.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::kiln {

namespace {

/// A collective's kind as the report names it.
StringRef kindName(Operation *op) {
  if (isa<AllReduceOp>(op))
    return "all-reduce";
  if (isa<ReduceScatterOp>(op))
    return "reduce-scatter";
  if (isa<AllGatherOp>(op))
    return "all-gather";
  return "local shard";
}

struct Tally {
  int64_t calls = 0, tensors = 0, bytes = 0;
};

} // namespace

int64_t communicatedBytes(Operation *op) {
  if (auto reduce = dyn_cast<AllReduceOp>(op)) {
    int64_t bytes = 0;
    for (Value v : reduce.getInputs())
      bytes += tensorBytes(v);
    return bytes;
  }
  if (isa<ReduceScatterOp>(op))
    return tensorBytes(op->getOperand(0));
  if (isa<AllGatherOp>(op))
    return tensorBytes(op->getResult(0));
  return 0;
}

int64_t runsPerStep(Operation *op) {
  auto func = op->getParentOfType<func::FuncOp>();
  auto module = op->getParentOfType<ModuleOp>();
  StringRef program = func ? func.getSymName() : "";
  if (program == kUpdateFunctionName)
    return 1;
  if (program != kStepFunctionName)
    return 0;
  return module ? getGradAccumSteps(module) : 1;
}

std::string collectiveSummary(ModuleOp module) {
  ZeroSharding zero = readZeroSharding(module);
  // Per kind (per step), and per function, kind and reason (the lines).
  // (kind, axis) -> tally.
  llvm::MapVector<std::pair<StringRef, StringRef>, Tally> perKind;
  std::vector<std::pair<std::string, Tally>> perLine;
  llvm::StringMap<size_t> lineIndex;
  module.walk([&](Operation *op) {
    if (!isa<AllReduceOp, ReduceScatterOp, AllGatherOp, LocalShardOp>(op))
      return;
    auto func = op->getParentOfType<func::FuncOp>();
    int64_t runs = runsPerStep(op);
    int64_t tensors = isa<AllReduceOp>(op) ? op->getNumOperands() : 1;
    int64_t bytes = communicatedBytes(op);
    StringRef axis = op->getAttrOfType<StringAttr>("axis").getValue();
    if (runs > 0) {
      Tally &k = perKind[{kindName(op), axis}];
      k.calls += runs;
      k.tensors += tensors;
      k.bytes += bytes * runs;
    }
    std::string what;
    llvm::raw_string_ostream w(what);
    w << "@" << func.getSymName() << " " << op->getName().stripDialect();
    if (auto reduction = op->getAttrOfType<ReductionAttr>("reduction"))
      w << " " << stringifyReduction(reduction.getValue());
    w << " over '" << op->getAttrOfType<StringAttr>("axis").getValue() << "'";
    if (auto reason = op->getAttrOfType<StringAttr>("reason"))
      w << " (" << reason.getValue() << ")";
    auto [at, fresh] = lineIndex.try_emplace(what, perLine.size());
    if (fresh)
      perLine.push_back({what, Tally()});
    Tally &l = perLine[at->second].second;
    l.calls += 1;
    l.tensors += tensors;
    l.bytes += bytes;
  });
  if (perLine.empty())
    return "";

  std::string text;
  llvm::raw_string_ostream os(text);
  Mesh mesh = readMesh(module);
  bool tensorAxes = llvm::any_of(mesh.axes, [](const auto &axis) {
    return axis.first != kDataAxisName;
  });
  if (!tensorAxes) {
    os << "data parallel: " << zero.ranks << (zero.ranks == 1 ? " rank" : " ranks");
  } else {
    int64_t ranks = 1;
    os << "mesh [";
    for (auto [i, axis] : llvm::enumerate(mesh.axes)) {
      os << (i ? ", " : "") << axis.first << " = " << axis.second;
      ranks *= axis.second;
    }
    os << "], " << ranks << (ranks == 1 ? " rank" : " ranks");
  }
  if (zero.stage > 0)
    os << ", ZeRO-" << zero.stage;
  for (auto &[key, t] : perKind) {
    auto [kind, axis] = key;
    if (kind == "local shard")
      continue;
    os << ", " << kind;
    if (tensorAxes)
      os << " over '" << axis << "'";
    os << " of " << formatMiB(t.bytes) << " per step in " << t.calls;
    if (kind == "all-reduce" && axis == kDataAxisName)
      os << (t.calls == 1 ? " bucket" : " buckets");
    else
      os << (t.calls == 1 ? " call" : " calls");
  }
  os << "\n";
  for (auto &[what, t] : perLine) {
    os << "  " << what << ": " << t.tensors
       << (t.tensors == 1 ? " tensor, " : " tensors, ") << formatMiB(t.bytes);
    if (t.calls > 1)
      os << " in " << t.calls << " calls";
    os << "\n";
  }
  if (tensorAxes) {
    // Which parameters tensor parallelism splits.
    auto step = module.lookupSymbol<func::FuncOp>(kStepFunctionName);
    int64_t params = 0, split = 0;
    if (step)
      for (unsigned i = 0, e = step.getNumArguments(); i < e; ++i) {
        if (getArgumentRole(step, i) != Role::Param)
          continue;
        ++params;
        split += step.getArgAttr(i, kShardDimAttrName) != nullptr;
      }
    os << "  tensor parallel: " << split << " of " << params
       << " parameters split (sharding.txt with --dump-phases-to lists every "
          "value); the memory plan above is one rank's\n";
  }
  if (zero.stage > 0) {
    // Which parameters' state is sharded, and which stays whole.
    auto update = module.lookupSymbol<func::FuncOp>(kUpdateFunctionName);
    SmallVector<StringRef> replicated;
    int64_t params = 0;
    if (update)
      for (unsigned i = 0, e = update.getNumArguments(); i < e; ++i) {
        if (getArgumentRole(update, i) != Role::Param)
          continue;
        ++params;
        // Under ZeRO-3 the argument is the slice already.
        auto name = update.getArgAttrOfType<StringAttr>(i, kNameAttrName);
        if (!update.getArgAttr(i, kShardAxisAttrName) &&
            !zero.shardType(cast<RankedTensorType>(update.getArgument(i).getType())))
          replicated.push_back(name ? name.getValue() : "?");
      }
    os << "  ZeRO-" << zero.stage << ": "
       << (zero.stage >= 3   ? "parameters, gradients and optimizer state"
           : zero.stage >= 2 ? "gradients and optimizer state"
                             : "optimizer state")
       << " of " << params - static_cast<int64_t>(replicated.size()) << " of "
       << params << " parameters sharded over " << zero.ranks << " ranks";
    if (!replicated.empty()) {
      os << "; replicated (elements not divisible by " << zero.ranks << "):";
      for (StringRef name : replicated)
        os << " " << name;
    }
    os << "; the memory plan above is one rank's\n";
  }
  return text;
}

} // namespace mlir::kiln
