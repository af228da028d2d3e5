//===- Remat.cpp - Recompute forward values instead of keeping them -------===//
//
// --kiln-remat: plans which forward values of @step stay live until the
// backward reads them and which are recomputed there, per block instance,
// to meet kiln.train's memory_budget with the least recompute.
//
// Algorithm:
//  1. Forward ops are the ops of @step that the loss and metric results
//     depend on; every other op is backward. A forward op belongs to the
//     block instance named by the outermost NameLoc call site of its
//     location ("Block.3"); instances are numbered in program order. A
//     value made from arguments alone by gathers and pointwise ops outside
//     blocks belongs to the instance whose forward alone reads it (directly
//     or through such values): a bf16 copy of a parameter (mixed precision
//     rounds each once, at the top of @step, at the parameter's own
//     location: recomputing it costs a pass over the parameter, keeping it
//     holds the copy from the step's start to the block's backward; Llama-3
//     1.2B: 1.8 GiB of them at the peak), and the token (and position)
//     embedding that is the first block's input (a gather from the
//     parameters and token ids, kept otherwise from the step's start to its
//     end: 256 MiB of fp32 for Llama-3 1.2B at [16, 2048]; not under ZeRO-3,
//     where recomputing it would gather the sliced table again).
//  2. A plan gives each instance a tier (none < pointwise < selective <
//     full). A forward value is recomputed when its instance's tier does not
//     keep it: pointwise keeps GEMM and attention outputs, selective keeps
//     GEMM outputs, full keeps nothing; every tier keeps the values other
//     instances or unblocked ops read (the residual stream between blocks),
//     so recompute never crosses a block boundary. Pointwise and selective
//     also keep a value whose recompute would read kept values that nothing
//     else reads (its chain's own GEMM outputs: a projection before its bias
//     add or RoPE) when those are at least its bytes: keeping it lets them
//     die in the forward, so recomputing it would save no byte and cost a
//     pass over both (and, for a bias add, the GEMM's epilogue).
//  3. Applying a plan: walk the backward ops in order; each operand that is
//     a recomputed value is replaced by a clone of its producer inserted
//     just before the first backward op that reads it, the producer's own
//     recomputed operands cloned first (recursively), each value cloned
//     once. The original keeps its forward uses, so its live range now ends
//     in the forward.
//  4. Plans are ordered by recompute: plan c (0 <= c <= 3·B for B blocks)
//     gives every block tier c / B and the first c % B blocks one tier
//     more. `none` is plan 0, `pointwise` B, `selective` 2·B, `full` 3·B. `auto` with a
//     budget binary-searches the least c whose planned peak (the injected
//     StepProgramFn: fusion and codegen's lowering on a copy of the module,
//     so the very plan the artifact will carry) is at most the budget; the peak falls as c grows.
//  5. The chosen plan is applied to the module and described in the module
//     attribute kiln.remat (mode, budget, plan, peak, extra and step FLOPs).
//     With the StepProgramFn, a plan that recomputes anything also records
//     the memory traffic of @step's kernels (FusionReport's measureTraffic,
//     on the copy the StepProgramFn fused) with nothing recomputed, the
//     model's own overrides included (kNoRecompute), and what the plan adds
//     to it: recomputing pointwise ops costs bandwidth, not FLOPs.
//  6. Instances the model file sets (kiln.remat_overrides: `Block(x, remat =
//     full)`) keep their tier in every plan; plans, modes and the budget
//     range over the others (B counts those only).
//
//===----------------------------------------------------------------------===//

#include "passes/FusableOps.h"
#include "passes/FusionReport.h"
#include "passes/Passes.h"
#include "passes/RematReport.h"

#include "ir/KilnOps.h"
#include "ir/OpCost.h"
#include "ir/StepFunction.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/FormatVariadic.h"

#include <functional>
#include <map>
#include <optional>

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNREMAT
#include "passes/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;
using namespace mlir::kiln;

namespace {

enum class Tier { None = 0, Pointwise = 1, Selective = 2, Full = 3 };
constexpr int kTiers = 4;

const char *tierName(Tier tier) {
  switch (tier) {
  case Tier::None:
    return "none";
  case Tier::Pointwise:
    return "pointwise";
  case Tier::Selective:
    return "selective";
  case Tier::Full:
    return "full";
  }
  return "?";
}

std::optional<Tier> tierFromName(StringRef name) {
  for (int t = 0; t < kTiers; ++t)
    if (name == tierName((Tier)t))
      return (Tier)t;
  return std::nullopt;
}

/// The block instance of a location: the name of its outermost named call
/// site ("Block.3"), or "" outside blocks.
StringRef blockInstance(Location loc) {
  if (auto site = dyn_cast<CallSiteLoc>(loc))
    return blockInstance(site.getCaller());
  if (auto named = dyn_cast<NameLoc>(loc))
    return named.getName().getValue();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location part : fused.getLocations())
      if (StringRef name = blockInstance(part); !name.empty())
        return name;
  return "";
}

/// @step's forward ops and their block instances.
struct StepGraph {
  mutable func::FuncOp step; // handles are const-incorrect in MLIR
  llvm::DenseSet<Operation *> forward;
  llvm::DenseMap<Operation *, unsigned> instanceOf; // forward ops in blocks
  SmallVector<std::string> instances;               // program order
  SmallVector<std::optional<Tier>> pinned;          // per instance (step 6)
  SmallVector<int> freeIndex; // per instance: its place among the unpinned
  int numFree = 0;

  static FailureOr<StepGraph> build(ModuleOp module) {
    StepGraph graph;
    graph.step = module.lookupSymbol<func::FuncOp>(kStepFunctionName);
    if (!graph.step || graph.step.getBody().getBlocks().size() != 1)
      return failure();
    Block &body = graph.step.getBody().front();
    graph.forward = getForwardOps(graph.step);
    llvm::StringMap<unsigned> index;
    for (Operation &op : body) {
      if (!graph.forward.count(&op))
        continue;
      StringRef instance = blockInstance(op.getLoc());
      if (instance.empty())
        continue;
      auto [it, fresh] = index.try_emplace(instance, graph.instances.size());
      if (fresh)
        graph.instances.push_back(instance.str());
      graph.instanceOf[&op] = it->second;
    }
    // Values made from arguments alone by unblocked gathers and pointwise
    // ops (a parameter's bf16 copy, which mixed precision rounds once at the
    // top of @step; the token and position embeddings that are the first
    // block's input) belong to the instance whose forward alone reads them,
    // directly or through such values. Decided last reader first.
    // Under ZeRO-3 a gather from a parameter stays in the forward: recomputed,
    // it would need the whole table gathered again in the backward
    // (--kiln-gather-params), or kept whole through it.
    ZeroSharding zero = readZeroSharding(module);
    auto gathersSlicedParam = [&](Operation &op) {
      auto gather = dyn_cast<EmbeddingOp>(op);
      auto table = gather ? dyn_cast<BlockArgument>(gather->getOperand(0)) : nullptr;
      return zero.stage >= 3 && table && table.getOwner() == &body &&
             getArgumentRole(graph.step, table.getArgNumber()) == Role::Param &&
             zero.shardType(cast<RankedTensorType>(table.getType()));
    };
    llvm::SetVector<Operation *> fromArguments;
    for (Operation &op : body) {
      if (!graph.forward.count(&op) || graph.instanceOf.count(&op) ||
          op.getNumRegions() != 0 || op.getNumResults() != 1 ||
          !(isa<EmbeddingOp>(op) || fusion::isPointwise(&op)) ||
          gathersSlicedParam(op))
        continue;
      if (llvm::all_of(op.getOperands(), [&](Value v) {
            Operation *def = v.getDefiningOp();
            return def ? fromArguments.contains(def) : v.getParentBlock() == &body;
          }))
        fromArguments.insert(&op);
    }
    for (Operation *op : llvm::reverse(fromArguments)) {
      llvm::SmallDenseSet<unsigned, 2> readers;
      bool unblocked = false;
      for (Operation *user : op->getUsers()) {
        Operation *top = body.findAncestorOpInBlock(*user);
        if (!top || !graph.forward.count(top))
          continue;
        auto userIt = graph.instanceOf.find(top);
        if (userIt == graph.instanceOf.end())
          unblocked = true;
        else
          readers.insert(userIt->second);
      }
      if (!unblocked && readers.size() == 1)
        graph.instanceOf[op] = *readers.begin();
    }
    auto overrides = module->getAttrOfType<DictionaryAttr>(kRematOverridesAttrName);
    for (const std::string &instance : graph.instances) {
      std::optional<Tier> tier;
      if (auto name = overrides ? overrides.getAs<StringAttr>(instance) : nullptr)
        tier = tierFromName(name.getValue());
      graph.pinned.push_back(tier);
      graph.freeIndex.push_back(tier ? -1 : graph.numFree++);
    }
    return graph;
  }

  int numPlans() const { return (kTiers - 1) * numFree; }

  /// A plan outside steps 4 and 6: every instance, pinned ones included,
  /// tier none (the baseline of the traffic a plan adds, step 5).
  static constexpr int kNoRecompute = -1;

  /// Whether plan `plan` recomputes any instance.
  bool recomputes(int plan) const {
    for (unsigned i = 0; i < instances.size(); ++i)
      if (tierOf(plan, i) != Tier::None)
        return true;
    return false;
  }

  /// Plan `plan`'s tier for instance `i` (see steps 4 and 6).
  Tier tierOf(int plan, unsigned i) const {
    if (plan == kNoRecompute)
      return Tier::None;
    if (pinned[i])
      return *pinned[i];
    if (numFree == 0)
      return Tier::None;
    int tier = plan / numFree + (freeIndex[i] < plan % numFree ? 1 : 0);
    return (Tier)std::min(tier, kTiers - 1);
  }

  /// "Block.0-2 full, Block.3 selective" (ranges of equal tiers).
  std::string describe(int plan) const {
    if (instances.empty())
      return "no block instances to recompute";
    std::string text;
    for (size_t i = 0; i < instances.size();) {
      size_t j = i;
      while (j + 1 < instances.size() && tierOf(plan, j + 1) == tierOf(plan, i) &&
             pinned[j + 1].has_value() == pinned[i].has_value())
        ++j;
      if (!text.empty())
        text += ", ";
      text += instances[i];
      if (j > i) {
        StringRef last = instances[j];
        text += "-" + last.substr(last.rfind('.') + 1).str();
      }
      text += std::string(" ") + tierName(tierOf(plan, i));
      if (pinned[i])
        text += " (set in the model)";
      i = j + 1;
    }
    return text;
  }
};

/// Applies plan `plan` to the @step of `graph` (step 3); returns the FLOPs
/// of the recomputed ops.
double applyPlan(const StepGraph &graph, int plan) {
  // The values `op` reads: its operands and those its regions use.
  auto readValues = [](Operation *op) {
    llvm::SetVector<Value> used(op->operand_begin(), op->operand_end());
    getUsedValuesDefinedAbove(op->getRegions(), used);
    return used;
  };
  // Decided once per value, when the backward walk (or a clone's operands)
  // first asks; the answer does not change as clones add uses.
  llvm::DenseMap<Value, bool> decided;
  std::function<bool(Value)> decide;
  auto isRecomputed = [&](Value value) {
    auto [it, fresh] = decided.try_emplace(value, false);
    if (fresh) {
      bool recompute = decide(value);
      decided[value] = recompute; // `it` may have moved meanwhile
      return recompute;
    }
    return it->second;
  };
  Block &body = graph.step.getBody().front();
  // Step 2's exception: whether the kept values `value`'s recompute would
  // read and nothing else reads hold at least its bytes. Its chain is the
  // ops recomputed to make it; every chain value must be read by the chain
  // (or `value`'s op) alone, else keeping `value` frees nothing. Only
  // activations count as freed: constants are stored once (splats not at
  // all), arguments always. An op of several results is left to step 2:
  // each result would count the same leaves.
  auto cheaperToKeep = [&](Value value) {
    Operation *root = value.getDefiningOp();
    if (root->getNumResults() != 1)
      return false;
    llvm::SetVector<Operation *> chain;
    llvm::SetVector<Value> leaves;
    SmallVector<Operation *> work = {root};
    while (!work.empty()) {
      Operation *op = work.pop_back_val();
      for (Value operand : readValues(op)) {
        if (!isRecomputed(operand))
          leaves.insert(operand);
        else if (chain.insert(operand.getDefiningOp()))
          work.push_back(operand.getDefiningOp());
      }
    }
    auto readOnlyByChain = [&](Value v) {
      return llvm::all_of(v.getUsers(), [&](Operation *user) {
        Operation *top = body.findAncestorOpInBlock(*user);
        return top == root || chain.contains(top);
      });
    };
    for (Operation *op : chain)
      if (!llvm::all_of(op->getResults(), readOnlyByChain))
        return false;
    int64_t freed = 0;
    for (Value leaf : leaves) {
      Operation *def = leaf.getDefiningOp();
      if (def && !def->hasTrait<OpTrait::ConstantLike>() && readOnlyByChain(leaf))
        freed += tensorBytes(leaf);
    }
    return freed > 0 && freed >= tensorBytes(value);
  };
  decide = [&](Value value) -> bool {
    Operation *def = value.getDefiningOp();
    auto it = def ? graph.instanceOf.find(def) : graph.instanceOf.end();
    if (it == graph.instanceOf.end())
      return false;
    Tier tier = graph.tierOf(plan, it->second);
    // Constants are not activations: codegen stores them once.
    if (tier == Tier::None || def->hasTrait<OpTrait::ConstantLike>())
      return false;
    // Block outputs stay: values other instances or unblocked forward ops
    // read.
    for (Operation *user : value.getUsers()) {
      Operation *top = body.findAncestorOpInBlock(*user);
      if (!top || !graph.forward.count(top))
        continue;
      auto userIt = graph.instanceOf.find(top);
      if (userIt == graph.instanceOf.end() || userIt->second != it->second)
        return false;
    }
    if (tier == Tier::Pointwise && isa<MatmulOp, AttentionOp>(def))
      return false;
    if (tier == Tier::Selective && isa<MatmulOp>(def))
      return false;
    return tier == Tier::Full || !cheaperToKeep(value);
  };

  double extraFlops = 0;
  llvm::DenseMap<Value, Value> recomputed;
  OpBuilder builder(graph.step.getContext());
  // The recomputed copy of `value`, created before `before` on first use.
  std::function<Value(Value, Operation *)> materialize =
      [&](Value value, Operation *before) -> Value {
    if (Value copy = recomputed.lookup(value))
      return copy;
    Operation *def = value.getDefiningOp();
    IRMapping mapping;
    for (Value operand : readValues(def))
      if (isRecomputed(operand))
        mapping.map(operand, materialize(operand, before));
    builder.setInsertionPoint(before);
    Operation *copy = builder.clone(*def, mapping);
    copy->setAttr(kRecomputeAttrName, builder.getUnitAttr());
    extraFlops += estimateFlops(copy);
    for (auto [original, result] :
         llvm::zip(def->getResults(), copy->getResults()))
      recomputed[original] = result;
    return recomputed.lookup(value);
  };

  SmallVector<Operation *> backward;
  // The return hands results out (metrics are forward values): not a reader.
  for (Operation &op : graph.step.getBody().front().without_terminator())
    if (!graph.forward.count(&op))
      backward.push_back(&op);
  for (Operation *op : backward)
    op->walk([&](Operation *nested) {
      // Values defined inside `op`'s regions are never recomputed ones.
      for (OpOperand &use : nested->getOpOperands())
        if (isRecomputed(use.get()))
          use.set(materialize(use.get(), op));
    });
  return extraFlops;
}

/// FLOPs of one run of @step (the denominator of the recompute overhead).
double stepFlops(func::FuncOp step) {
  double flops = 0;
  for (Operation &op : step.getBody().front())
    flops += estimateFlops(&op);
  return flops;
}

/// A copy of `module` whose every value lists its uses in the original's
/// order. Fusion's choices follow use-list order, which a plain clone
/// rebuilds from op order; without this, a plan's peak on a copy could differ
/// from the artifact's.
OwningOpRef<ModuleOp> cloneKeepingUseOrder(ModuleOp module) {
  OwningOpRef<ModuleOp> copy = module.clone();
  SmallVector<Operation *> originals, copies;
  module->walk<WalkOrder::PreOrder>([&](Operation *op) { originals.push_back(op); });
  (*copy)->walk<WalkOrder::PreOrder>([&](Operation *op) { copies.push_back(op); });
  llvm::DenseMap<Operation *, Operation *> copyOf;
  for (auto [original, clone] : llvm::zip(originals, copies))
    copyOf[original] = clone;
  auto reorder = [&](Value original, Value clone) {
    llvm::DenseMap<std::pair<Operation *, unsigned>, unsigned> position;
    for (OpOperand &use : original.getUses())
      position[{copyOf.lookup(use.getOwner()), use.getOperandNumber()}] =
          position.size();
    if (position.size() < 2)
      return;
    SmallVector<unsigned> indices;
    for (OpOperand &use : clone.getUses())
      indices.push_back(position.lookup({use.getOwner(), use.getOperandNumber()}));
    clone.shuffleUseList(indices);
  };
  for (auto [original, clone] : llvm::zip(originals, copies)) {
    for (auto [a, b] : llvm::zip(original->getResults(), clone->getResults()))
      reorder(a, b);
    for (auto [ra, rb] : llvm::zip(original->getRegions(), clone->getRegions()))
      for (auto [ba, bb] : llvm::zip(ra, rb))
        for (auto [a, b] : llvm::zip(ba.getArguments(), bb.getArguments()))
          reorder(a, b);
  }
  return copy;
}

struct KilnRemat : mlir::kiln::impl::KilnRematBase<KilnRemat> {
  using Base::Base;
  KilnRemat(const KilnRematOptions &options, StepProgramFn lowerToStepProgram)
      : Base(options), lowerToStepProgram(std::move(lowerToStepProgram)) {}

  void runOnOperation() override;

  /// Plan `plan` applied to a copy of the module: its planned peak, the
  /// FLOPs it recomputes and its @step kernels' memory traffic.
  struct Evaluation {
    int64_t peak = 0;       // the arena's bytes
    std::string liveAtPeak; // the memory plan's summary
    double extraFlops = 0;
    int64_t kernelBytes = 0; // measureTraffic's, after the copy's fusion
  };
  FailureOr<Evaluation> evaluate(int plan) {
    OwningOpRef<ModuleOp> copy = cloneKeepingUseOrder(getOperation());
    FailureOr<StepGraph> graph = StepGraph::build(*copy);
    if (failed(graph))
      return failure();
    Evaluation evaluation;
    evaluation.extraFlops = applyPlan(*graph, plan);
    FailureOr<::kiln::StepProgram> program = lowerToStepProgram(*copy);
    if (failed(program))
      return failure();
    evaluation.peak = program->memory.arenaBytes;
    evaluation.liveAtPeak = ::kiln::formatMemorySummary(*program);
    evaluation.kernelBytes =
        measureTraffic(copy->lookupSymbol<func::FuncOp>(kStepFunctionName)).kernelBytes;
    return evaluation;
  }

  StepProgramFn lowerToStepProgram;
};

void KilnRemat::runOnOperation() {
  ModuleOp module = getOperation();
  TrainConfigAttr train = getTrainConfig(module);
  std::string chosenMode = mode;
  if (chosenMode.empty() && train)
    chosenMode = stringifyRematMode(train.getRemat()).str();
  if (chosenMode.empty())
    chosenMode = "auto";
  int64_t budget = memoryBudget;
  if (budget < 0)
    budget = train ? train.getMemoryBudget() : 0;
  if (chosenMode != "auto" && chosenMode != "none" && chosenMode != "pointwise" &&
      chosenMode != "selective" && chosenMode != "full") {
    module.emitError() << "--kiln-remat: unknown mode '" << chosenMode
                       << "'; expected auto, none, pointwise, selective or full";
    return signalPassFailure();
  }

  FailureOr<StepGraph> graph = StepGraph::build(module);
  if (failed(graph))
    return; // no @step: nothing to plan
  if (auto overrides = module->getAttrOfType<DictionaryAttr>(kRematOverridesAttrName))
    for (NamedAttribute entry : overrides) {
      auto tier = dyn_cast<StringAttr>(entry.getValue());
      if (!tier || !tierFromName(tier.getValue())) {
        module.emitError() << kRematOverridesAttrName << ": " << entry.getName()
                           << " = " << entry.getValue()
                           << " is not none, pointwise, selective or full";
        return signalPassFailure();
      }
      // An instance absent from the forward has nothing to recompute: a
      // call whose result nothing uses is dead code, and a call computing
      // what another already computes (the same block body on the same
      // input) was merged into it by CSE. Its override applies to nothing.
    }
  int last = graph->numPlans();
  bool needPeaks = budget > 0 || sweep;
  if (needPeaks && !lowerToStepProgram) {
    module.emitError() << "--kiln-remat: a memory budget needs the planned "
                          "peak; compile with kilnc (--memory-budget)";
    return signalPassFailure();
  }

  Builder b(module.getContext());
  std::map<int, Evaluation> evaluations;
  auto peakOfPlan = [&](int plan) -> FailureOr<int64_t> {
    auto it = evaluations.find(plan);
    if (it == evaluations.end()) {
      FailureOr<Evaluation> evaluation = evaluate(plan);
      if (failed(evaluation))
        return failure();
      it = evaluations.emplace(plan, *evaluation).first;
    }
    return it->second.peak;
  };

  if (sweep) {
    SmallVector<Attribute> rows;
    for (int plan = 0; plan <= last; ++plan) {
      FailureOr<int64_t> peak = peakOfPlan(plan);
      if (failed(peak))
        return signalPassFailure();
      rows.push_back(b.getDictionaryAttr(
          {b.getNamedAttr("plan", b.getStringAttr(graph->describe(plan))),
           b.getNamedAttr("peak", b.getI64IntegerAttr(*peak)),
           b.getNamedAttr("extra_flops",
                          b.getF64FloatAttr(evaluations[plan].extraFlops)),
           b.getNamedAttr("kernel_bytes",
                          b.getI64IntegerAttr(evaluations[plan].kernelBytes))}));
    }
    module->setAttr(kRematSweepAttrName, b.getArrayAttr(rows));
  }

  int plan = 0;
  if (chosenMode == "pointwise")
    plan = (int)Tier::Pointwise * graph->numFree;
  else if (chosenMode == "selective")
    plan = (int)Tier::Selective * graph->numFree;
  else if (chosenMode == "full")
    plan = last;
  if (budget > 0) {
    FailureOr<int64_t> peak = peakOfPlan(plan);
    if (failed(peak))
      return signalPassFailure();
    // Budget errors name no model line: no one line is to blame.
    Location nowhere = UnknownLoc::get(module.getContext());
    if (*peak > budget && chosenMode != "auto") {
      emitError(nowhere) << "memory budget " << formatMiB(budget)
                         << " is not met: remat = " << chosenMode
                         << " plans a peak of " << formatMiB(*peak)
                         << "; use remat = auto, or a larger budget";
      return signalPassFailure();
    }
    if (*peak > budget) {
      FailureOr<int64_t> lastPeak = peakOfPlan(last);
      if (failed(lastPeak))
        return signalPassFailure();
      if (*lastPeak <= budget) {
        // The least plan whose peak fits, by bisection: peaks fall as plans
        // grow (up to a few bytes of arena packing).
        int lo = plan, hi = last; // peak(lo) > budget >= peak(hi)
        while (hi - lo > 1) {
          int mid = lo + (hi - lo) / 2;
          FailureOr<int64_t> midPeak = peakOfPlan(mid);
          if (failed(midPeak))
            return signalPassFailure();
          (*midPeak <= budget ? hi : lo) = mid;
        }
        plan = hi;
      } else {
        // Full recompute does not fit: the least peak may still be an
        // earlier plan's (packing), so try them all before giving up.
        int least = last;
        for (int p = 0; p < last && *peak > budget; ++p) {
          FailureOr<int64_t> pPeak = peakOfPlan(p);
          if (failed(pPeak))
            return signalPassFailure();
          if (*pPeak <= budget)
            plan = p, peak = pPeak;
          if (*pPeak < evaluations[least].peak)
            least = p;
        }
        if (*peak > budget) {
          // Bytes too: a small model's budget and peak round to 0.00 MiB.
          emitError(nowhere)
              << "memory budget " << formatMiB(budget) << " (" << budget
              << " bytes) cannot be met: the least achievable peak is "
              << formatMiB(evaluations[least].peak) << " (" << evaluations[least].peak
              << " bytes; " << graph->describe(least) << ")\n"
              << evaluations[least].liveAtPeak;
          return signalPassFailure();
        }
      }
    }
  }

  // The traffic the plan adds to none at all (step 5): a pointwise tier's
  // whole cost, which its FLOPs do not show.
  std::optional<std::pair<int64_t, int64_t>> traffic; // step's, plan's extra
  if (lowerToStepProgram && (sweep || graph->recomputes(plan))) {
    if (failed(peakOfPlan(StepGraph::kNoRecompute)) || failed(peakOfPlan(plan)))
      return signalPassFailure();
    int64_t none = evaluations[StepGraph::kNoRecompute].kernelBytes;
    traffic = {none, evaluations[plan].kernelBytes - none};
  }

  double total = stepFlops(graph->step);
  double extra = applyPlan(*graph, plan);
  NamedAttrList summary;
  summary.append("mode", b.getStringAttr(chosenMode));
  summary.append("budget", b.getI64IntegerAttr(budget));
  summary.append("plan", b.getStringAttr(graph->describe(plan)));
  if (evaluations.count(plan))
    summary.append("peak", b.getI64IntegerAttr(evaluations[plan].peak));
  summary.append("extra_flops", b.getF64FloatAttr(extra));
  summary.append("step_flops", b.getF64FloatAttr(total));
  if (traffic) {
    summary.append("step_kernel_bytes", b.getI64IntegerAttr(traffic->first));
    summary.append("extra_kernel_bytes", b.getI64IntegerAttr(traffic->second));
  }
  module->setAttr(kRematAttrName, summary.getDictionary(module.getContext()));
}

} // namespace

std::unique_ptr<Pass>
mlir::kiln::createKilnRemat(const KilnRematOptions &options,
                            StepProgramFn lowerToStepProgram) {
  return std::make_unique<KilnRemat>(options, std::move(lowerToStepProgram));
}
