//===- PropagateSharding.cpp - Shardings from the model file's annotations -===//
//
// --kiln-propagate-sharding: gives every value of the forward graph a
// sharding (ir/Sharding.h), starting from the model file's annotations
// (`shard [...]` on params and inputs, shard(x, [...]) on values) and
// moving along each op's sharding rule, forward and backward, as Shardy's
// propagation does with user annotations first. Nothing is replicated
// silently: where the annotations ask for what the rules cannot give, the
// pass stops with an error at the op's model-file line, the annotation's
// line, the sizes and the ways out.
//
// 1. Seed: annotated arguments and the results of kiln.sharding_constraint
//    are fixed; every other value starts whole, each split dimension
//    remembering the annotation it came from.
// 2. Sweep the ops forward, then backward, until nothing changes. At each
//    op, a factor (not Whole) that some operand or result splits over axis
//    A -- and no other over another axis -- splits, over A, every other
//    dimension of the op that names that factor and is whole, not fixed,
//    and not already split over A elsewhere. A dimension A does not divide
//    is an error: propagation would have to leave it whole (the "silent
//    replication" of other compilers).
// 3. Check every op: a Whole factor on a split dimension (a softmax over a
//    split row), two axes for one factor, or one axis for two factors is
//    an error naming both annotations.
// 4. Write the result: `kiln.sharding` on every argument and op result
//    that is split (argument attribute; op attribute with one list per
//    result). --kiln-partition reads them.
//
//===----------------------------------------------------------------------===//

#include "ir/KilnOps.h"
#include "ir/Sharding.h"
#include "ir/StepFunction.h"
#include "passes/FusionReport.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/Sequence.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNPROPAGATESHARDING
#include "passes/Passes.h.inc"

namespace {

/// One value's sharding as propagation builds it.
struct ValueState {
  TensorSharding axes;
  SmallVector<Location, 4> origin; // per split dim: the annotation's location
  bool fixed = false;              // a user annotation: never changed
};

/// "operand #1" / "result #0" of an op, for messages.
std::string tensorName(unsigned tensor, unsigned numOperands) {
  return tensor < numOperands ? "operand #" + std::to_string(tensor)
                              : "result #" + std::to_string(tensor - numOperands);
}

std::string opName(Operation *op) {
  return op->getName().getStringRef().drop_front(5).str(); // "kiln."
}

class Propagation {
public:
  Propagation(func::FuncOp func, const Mesh &mesh) : func_(func), mesh_(mesh) {}

  LogicalResult run() {
    seed();
    if (failed(error_))
      return failure();
    SmallVector<Operation *> ops;
    for (Operation &op : func_.getBody().front())
      if (!isa<func::ReturnOp>(op)) {
        ops.push_back(&op);
        rules_[&op] = getShardingRule(&op); // once: every sweep reads it
      }
    // Each sweep splits at least one more dimension or ends; the bound
    // only guards against a rule that oscillates.
    for (int sweep = 0; sweep < 64; ++sweep) {
      changed_ = false;
      for (Operation *op : ops)
        if (failed(propagate(op)))
          return failure();
      for (Operation *op : llvm::reverse(ops))
        if (failed(propagate(op)))
          return failure();
      if (!changed_)
        break;
    }
    for (Operation *op : ops)
      if (failed(check(op)))
        return failure();
    write(ops);
    return success();
  }

private:
  ValueState &state(Value v) {
    auto it = states_.find(v);
    if (it != states_.end())
      return it->second;
    ValueState &s = states_[v];
    int64_t rank = cast<RankedTensorType>(v.getType()).getRank();
    s.axes.assign(rank, "");
    s.origin.assign(rank, UnknownLoc::get(v.getContext()));
    return s;
  }

  void seed() {
    for (BlockArgument arg : func_.getArguments()) {
      auto attr = func_.getArgAttr(arg.getArgNumber(), kShardingAttrName);
      auto type = dyn_cast<RankedTensorType>(arg.getType());
      if (!attr || !type)
        continue;
      ValueState &s = state(arg);
      s.axes = readSharding(attr, s.axes.size());
      s.origin.assign(s.axes.size(), arg.getLoc());
      s.fixed = true;
      // Sema checked the annotation but a parameter's size here, which
      // --kiln-pad-dims may have padded.
      for (auto [d, axis] : llvm::enumerate(s.axes))
        if (!axis.empty() && type.getDimSize(d) % mesh_.size(axis) != 0 &&
            succeeded(error_)) {
          auto name = func_.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                         kNameAttrName);
          int64_t size = type.getDimSize(d), ranks = mesh_.size(axis);
          emitError(arg.getLoc())
              << "dimension " << d << " of parameter '"
              << (name ? name.getValue() : "?") << "' (" << size
              << ") does not split over mesh axis '" << axis << "' (" << ranks
              << " ranks): " << size << " / " << ranks
              << " is not whole; pad it to " << (size / ranks + 1) * ranks
              << ", split another dimension, or give '" << axis
              << "' a size that divides " << size;
          error_ = failure();
        }
    }
    func_.walk([&](ShardingConstraintOp op) {
      ValueState &s = state(op.getResult());
      s.axes = readSharding(op.getSharding(), s.axes.size());
      s.origin.assign(s.axes.size(), op.getLoc());
      s.fixed = true;
    });
  }

  /// The op's tensors: operands, then results.
  SmallVector<Value> tensorsOf(Operation *op) {
    SmallVector<Value> values(op->getOperands());
    values.append(op->result_begin(), op->result_end());
    return values;
  }

  /// What the op's tensors say of one factor: the axis splitting it (the
  /// first met), where that came from, whether a user annotation on the
  /// tensor itself says so, and whether two tensors name different axes.
  struct Claim {
    std::string axis;
    Location origin;
    bool fixed = false;
    bool agreed = true;
  };

  SmallVector<Claim> claimsOf(const ShardingRule &rule, ArrayRef<Value> tensors,
                              MLIRContext *ctx) {
    SmallVector<Claim> claims(rule.factors.size(),
                              Claim{"", UnknownLoc::get(ctx)});
    for (int64_t f = 0; f < (int64_t)rule.factors.size(); ++f)
      (void)forEachDimOf(rule, tensors, f, [&](unsigned t, unsigned d) {
        ValueState &s = state(tensors[t]);
        const std::string &a = s.axes[d];
        if (a.empty())
          return success();
        Claim &c = claims[f];
        if (!c.axis.empty() && a != c.axis)
          c.agreed = false;
        if (c.axis.empty()) {
          c.axis = a;
          c.origin = s.origin[d];
        }
        c.fixed |= s.fixed && a == c.axis;
        return success();
      });
    return claims;
  }

  /// The factors that yield their axis at this op: where several factors
  /// claim one axis and a user annotation makes exactly one of the claims
  /// (a weight's split), the others yield -- their tensors are resharded
  /// by --kiln-partition (an activation gathered before a column-parallel
  /// product; a row-parallel product's partial sums reduce-scattered into
  /// a sequence-split result: sequence parallelism). Sets `unresolved`
  /// when no single annotation decides.
  static SmallVector<bool> yielding(ArrayRef<Claim> claims,
                                    llvm::StringSet<> &unresolved) {
    SmallVector<bool> yields(claims.size(), false);
    for (size_t f = 0; f < claims.size(); ++f) {
      if (claims[f].axis.empty())
        continue;
      SmallVector<size_t> same, fixed;
      for (size_t g = 0; g < claims.size(); ++g)
        if (claims[g].axis == claims[f].axis) {
          same.push_back(g);
          if (claims[g].fixed)
            fixed.push_back(g);
        }
      if (same.size() < 2)
        continue;
      if (fixed.size() != 1) {
        unresolved.insert(claims[f].axis);
        continue;
      }
      if (f != fixed.front())
        yields[f] = true;
    }
    return yields;
  }

  LogicalResult propagate(Operation *op) {
    // shard(x, [...]) is where the user reshards: its result is fixed, and
    // its operand keeps what its own producers and readers give it.
    if (isa<ShardingConstraintOp>(op))
      return success();
    const ShardingRule &rule = rules_[op];
    SmallVector<Value> tensors = tensorsOf(op);
    SmallVector<Claim> claims = claimsOf(rule, tensors, op->getContext());
    llvm::StringSet<> unresolved;
    SmallVector<bool> yields = yielding(claims, unresolved);
    for (int64_t f = 0; f < (int64_t)rule.factors.size(); ++f) {
      if (rule.factors[f].kind == FactorKind::Whole ||
          rule.factors[f].kind == FactorKind::Rewritten)
        continue;
      const Claim &claim = claims[f];
      // Nothing to move, a conflict check() reports, or an axis another
      // factor of this op holds by annotation.
      if (claim.axis.empty() || !claim.agreed || yields[f] ||
          unresolved.contains(claim.axis))
        continue;
      const std::string &axis = claim.axis;
      Location origin = claim.origin;
      LogicalResult moved = forEachDimOf(rule, tensors, f, [&](unsigned t,
                                                               unsigned d) {
        ValueState &s = state(tensors[t]);
        if (s.fixed || !s.axes[d].empty() || llvm::is_contained(s.axes, axis))
          return success();
        int64_t size =
            cast<RankedTensorType>(tensors[t].getType()).getDimSize(d);
        int64_t ranks = mesh_.size(axis);
        if (size % ranks != 0)
          return notDivisible(op, t, d, size, axis, origin);
        s.axes[d] = axis;
        s.origin[d] = origin;
        changed_ = true;
        return success();
      });
      if (failed(moved))
        return failure();
    }
    return success();
  }

  /// `fn(t, d)` for every dimension d of tensor t (of `tensors`, the op's
  /// operands then results) that names factor `f`; stops at a failure.
  static LogicalResult
  forEachDimOf(const ShardingRule &rule, ArrayRef<Value> tensors, int64_t f,
               llvm::function_ref<LogicalResult(unsigned, unsigned)> fn) {
    for (unsigned t = 0; t < tensors.size(); ++t) {
      if (!isa<RankedTensorType>(tensors[t].getType()))
        continue;
      ArrayRef<int64_t> dims = rule.dimsOf(t);
      for (unsigned d = 0; d < dims.size(); ++d)
        if (dims[d] == f && failed(fn(t, d)))
          return failure();
    }
    return success();
  }

  LogicalResult notDivisible(Operation *op, unsigned t, unsigned d,
                             int64_t size, StringRef axis, Location origin) {
    int64_t ranks = mesh_.size(axis);
    InFlightDiagnostic diag = op->emitError();
    if (isa<AttentionOp>(op) && (t == 1 || t == 2) && d == 1)
      diag << "grouped-query attention: its key/value heads (" << size
           << ") do not split over the " << ranks << " ranks of mesh axis '"
           << axis << "' that split its query heads, and each rank's query "
              "heads need their own group's key/value heads (use a multiple of "
           << ranks << " key/value heads); ";
    diag << "the sharding over mesh axis '" << axis << "' that "
         << modelLocation(origin) << " asks for reaches dimension " << d
         << " of this " << opName(op) << "'s "
         << tensorName(t, op->getNumOperands()) << " (size " << size
         << "), which " << ranks << " ranks do not divide: it would have to "
         << "be replicated. Make it a multiple of " << ranks << ", give '"
         << axis << "' a size that divides " << size
         << ", or gather the value before this op with shard(x, [...])";
    diag.attachNote(origin) << "the annotation is here";
    return failure();
  }

  LogicalResult check(Operation *op) {
    if (auto attention = dyn_cast<AttentionOp>(op))
      if (failed(checkHeadIndex(attention)))
        return failure();
    const ShardingRule &rule = rules_[op];
    SmallVector<Value> tensors = tensorsOf(op);
    unsigned numOperands = op->getNumOperands();
    // factor -> (axis, tensor, dim) of its first split dimension.
    DenseMap<int64_t, std::tuple<std::string, unsigned, unsigned>> seen;
    for (unsigned t = 0; t < tensors.size(); ++t) {
      if (!isa<RankedTensorType>(tensors[t].getType()))
        continue;
      ValueState &s = state(tensors[t]);
      ArrayRef<int64_t> dims = rule.dimsOf(t);
      for (unsigned d = 0; d < s.axes.size(); ++d) {
        const std::string &axis = s.axes[d];
        if (axis.empty())
          continue;
        // A sharding_constraint's operand may differ from its result: the
        // constraint is where the user asked to reshard.
        if (isa<ShardingConstraintOp>(op))
          continue;
        int64_t f = d < dims.size() ? dims[d] : -1;
        if (f < 0 || rule.factors[f].kind == FactorKind::Whole) {
          std::string why = f < 0 ? "it whole" : rule.factors[f].why;
          InFlightDiagnostic diag = op->emitError();
          diag << "this " << opName(op) << " needs " << why
               << ", but dimension " << d << " of its "
               << tensorName(t, numOperands) << " "
               << formatShape(tensors[t]) << " is split over mesh axis '"
               << axis << "' (as " << modelLocation(s.origin[d])
               << " asks); gathering it here would replicate "
               << bytesOf(tensors[t]) << " the annotation split. Split "
               << "another dimension, or gather it explicitly with "
               << "shard(x, " << formatSharding(TensorSharding(s.axes.size(), ""))
               << ") before this op";
          diag.attachNote(s.origin[d]) << "the annotation is here";
          return failure();
        }
        auto [it, inserted] = seen.try_emplace(f, axis, t, d);
        auto [otherAxis, otherT, otherD] = it->second;
        if (!inserted && otherAxis != axis)
          return conflict(op, axis, t, d, otherAxis, otherT, otherD, s,
                          state(tensors[otherT]));
      }
    }
    // One axis for two factors: each rank would need a different block of
    // the same dimension -- unless one annotation decides (yielding()):
    // then the other factor's tensors are resharded, which the partitioner
    // does for an operand (a gather) and for a result a sum over the same
    // axis fills (a reduce-scatter), not for a result of another split.
    SmallVector<Claim> claims = claimsOf(rule, tensors, op->getContext());
    llvm::StringSet<> unresolved;
    SmallVector<bool> yields = yielding(claims, unresolved);
    DenseMap<StringRef, int64_t> factorOfAxis;
    for (auto &[f, where] : seen) {
      auto &[axis, t, d] = where;
      auto [it, inserted] = factorOfAxis.try_emplace(axis, f);
      if (inserted)
        continue;
      auto &[axis2, t2, d2] = seen.find(it->second)->second;
      if (!unresolved.contains(axis))
        continue;
      return conflict(op, axis, t, d, axis2, t2, d2, state(tensors[t]),
                      state(tensors[t2]));
    }
    for (unsigned r = 0; r < op->getNumResults(); ++r) {
      if (!isa<RankedTensorType>(op->getResult(r).getType()))
        continue;
      ValueState &s = state(op->getResult(r));
      for (auto [d, f] : llvm::enumerate(rule.results[r])) {
        if (f < 0 || !yields[f] || s.axes[d].empty())
          continue;
        bool summed = llvm::any_of(llvm::seq<size_t>(0, claims.size()),
                                   [&](size_t g) {
                                     return claims[g].axis == s.axes[d] &&
                                            rule.factors[g].kind == FactorKind::Sum;
                                   });
        if (summed)
          continue; // partial sums reduce-scattered into the split result
        InFlightDiagnostic diag = op->emitError();
        diag << "this " << opName(op) << "'s result is split over '"
             << s.axes[d] << "' along dimension " << d << " (as "
             << modelLocation(s.origin[d]) << " asks), but the annotation at "
             << modelLocation(claims[f].origin)
             << " gives that axis to another of its dimensions; reshard the "
                "result with shard(x, [...]) after this op";
        diag.attachNote(s.origin[d]) << "the result's split comes from here";
        return failure();
      }
    }
    return success();
  }

  /// With its heads split, each rank's attention counts its own heads from
  /// 0: a score or mask that reads the head index `h` (an ALiBi slope per
  /// head) would read another head's value on every rank but the first, and
  /// dropout would draw the same mask on every rank.
  LogicalResult checkHeadIndex(AttentionOp op) {
    ValueState &q = state(op.getQ());
    if (q.axes[1].empty())
      return success();
    Block *score = op.getScoreBlock(), *mask = op.getMaskBlock();
    // Block arguments: score (s, b, h, i, j, captures...), mask (b, h, i, j,
    // captures...).
    bool readsHead = (score && !score->getArgument(2).use_empty()) ||
                     (mask && !mask->getArgument(1).use_empty());
    // Dropout's Philox counters are keyed by the (local) head too: every
    // rank would drop the same pattern from its heads.
    const char *problem =
        op.getDropoutProbability() > 0.0
            ? "its dropout draws its mask by head index, which each rank "
              "would count from 0: every rank would drop the same pattern; "
              "split another dimension, or train without attention dropout"
        : readsHead
            ? "its score or mask reads the head index h, which each rank "
              "would count from 0 over its own heads; split another "
              "dimension, or keep the heads whole with shard(x, [...]) on q, "
              "k and v"
            : nullptr;
    if (!problem)
      return success();
    InFlightDiagnostic diag = op.emitError();
    diag << "this attention's heads are split over mesh axis '" << q.axes[1]
         << "' (as " << modelLocation(q.origin[1]) << " asks), but "
         << problem;
    diag.attachNote(q.origin[1]) << "the annotation is here";
    return failure();
  }

  LogicalResult conflict(Operation *op, StringRef axis, unsigned t, unsigned d,
                         StringRef otherAxis, unsigned otherT, unsigned otherD,
                         ValueState &s, ValueState &other) {
    unsigned n = op->getNumOperands();
    InFlightDiagnostic diag = op->emitError();
    diag << "conflicting shardings at this " << opName(op) << ": its "
         << tensorName(t, n) << " splits dimension " << d << " over '" << axis
         << "' (as " << modelLocation(s.origin[d]) << " asks) and its "
         << tensorName(otherT, n) << " splits dimension " << otherD
         << " over '" << otherAxis << "' (as "
         << modelLocation(other.origin[otherD])
         << " asks), which the op cannot compute together. Change one "
            "annotation, or reshard one operand with shard(x, [...])";
    diag.attachNote(s.origin[d]) << "one annotation is here";
    diag.attachNote(other.origin[otherD]) << "the other is here";
    return failure();
  }

  static std::string formatShape(Value v) {
    std::string s = "[";
    for (auto [i, d] : llvm::enumerate(cast<RankedTensorType>(v.getType()).getShape()))
      s += (i ? ", " : "") + std::to_string(d);
    return s + "]";
  }

  static std::string bytesOf(Value v) {
    auto type = cast<RankedTensorType>(v.getType());
    double bytes = type.getNumElements() *
                   std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
    char text[32];
    std::snprintf(text, sizeof text, "%.2f MiB", bytes / (1024.0 * 1024.0));
    return text;
  }

  void write(ArrayRef<Operation *> ops) {
    MLIRContext *ctx = func_.getContext();
    for (BlockArgument arg : func_.getArguments()) {
      auto it = states_.find(arg);
      if (it != states_.end() && !isReplicated(it->second.axes))
        func_.setArgAttr(arg.getArgNumber(), kShardingAttrName,
                         shardingAttr(ctx, it->second.axes));
    }
    for (Operation *op : ops) {
      SmallVector<Attribute> perResult;
      bool any = false;
      for (Value r : op->getResults()) {
        auto it = states_.find(r);
        TensorSharding axes =
            it != states_.end()
                ? it->second.axes
                : TensorSharding(isa<RankedTensorType>(r.getType())
                                     ? cast<RankedTensorType>(r.getType()).getRank()
                                     : 0,
                                 "");
        any |= !isReplicated(axes);
        perResult.push_back(shardingAttr(ctx, axes));
      }
      if (any)
        op->setAttr(kShardingAttrName, ArrayAttr::get(ctx, perResult));
    }
  }

  func::FuncOp func_;
  const Mesh &mesh_;
  DenseMap<Value, ValueState> states_;
  DenseMap<Operation *, ShardingRule> rules_;
  LogicalResult error_ = success();
  bool changed_ = false;
};

struct KilnPropagateSharding
    : impl::KilnPropagateShardingBase<KilnPropagateSharding> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    Mesh mesh = readMesh(module);
    for (auto func : module.getOps<func::FuncOp>())
      if (failed(Propagation(func, mesh).run()))
        return signalPassFailure();
  }
};

} // namespace
} // namespace mlir::kiln
