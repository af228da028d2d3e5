//===- Fusion.cpp - Groups of kiln ops that become one kernel -------------===//
//
// Steps 1 and 1d (recompute in the reader) are in FusionRecompute.cpp, step
// 4 in FusionMaterialize.cpp; the predicates saying what can be fused are in
// FusableOps.h.
//
// Algorithm, for each of @step, @update and @eval (single-block bodies):
//  1. Cheap producers (splat constants, iota, broadcasts) read by several
//     fusable ops are cloned in front of each fusable reader: recomputing
//     them inside the reader's loop costs nothing, while sharing them would
//     mean writing a full tensor and reading it back.
//  1b. Optimizer updates that read nothing computed after the first update
//     are moved next to each other (the norm sums the optimizer phase puts
//     between them follow after), so that one kernel can hold them.
//  1c. The bf16 copies of function arguments (precision = bf16: each
//     parameter rounded for the GEMMs, each bias for a bf16 GEMM epilogue)
//     read nothing computed in the function: they move to its start, and
//     copies with the same element count share one pointwise kernel (up to
//     max-optimizer-tensors each), instead of one tiny kernel per parameter.
//     Nothing else joins such a group.
//  1d. A fusable op of @step's backward that reads a forward bf16 value
//     made by pointwise ops and rounded (at most kMaxRecomputeOps of them,
//     through cheap widenings) recomputes it from that chain's inputs
//     instead (the rounding ends the chain, so the reader gets the very
//     value the forward would have stored), with
//     clones placed in front of it, when every input of the chain stays
//     live until then anyway (an argument, or a value something at or
//     after the reader reads) and the inputs are no more bytes than the
//     value the forward would store: SwiGLU's bf16 silu(x w1), whose
//     backward also reads x w1 itself. The forward kernel then no longer
//     writes the value (a free recompute: no extra reads, no longer live
//     range; a few FLOPs per element), and the peak loses it.
//  2. Walk the body in order; every fusable op joins or starts a group:
//     a. pointwise op C: joins the groups of its pointwise producers that
//        loop over the same element count; or, as an epilogue, the row group
//        whose row output it reads;
//     b. row op R (RowOpInterface: layer_norm, rms_norm, softmax,
//        cross_entropy and their backwards; reduce_sum over trailing dims):
//        absorbs the pointwise groups that
//        produce its row-sized operands (its prologue);
//     c. optimizer update (adam, sgd, sgd_momentum): joins the current
//        multi-tensor group of its kind, up to max-optimizer-tensors;
//     d. whole-tensor f32 reduce_sum S (to one value): joins the pointwise
//        group that computes its input, which then ends with S (each
//        element summed as it is computed, the input never stored: the
//        global norm's g * g of every gradient).
//     A join is legal when every value of the group read outside it is read
//     after C (so the kernel, placed at its last member, never feeds an op
//     that runs before it and no cycle can form), C does not broadcast a
//     value computed in the group, the element counts agree, and the kernel
//     would read at most max-kernel-inputs buffers (each is a pointer
//     argument and a loaded value live in registers: the global norm's
//     chain of adds over every parameter's sum of squares, one group, spilled
//     on CUDA from 100 inputs; a capped chain becomes a few kernels, each
//     summing its share and the previous partial sum). A value of
//     a member that is also read outside becomes an extra output: it is
//     written once either way, and the consumer inside no longer reads it
//     back (one pass over memory saved). kiln.matmul (a GEMM call),
//     embedding(_grad) and transpose never join a group.
//  2e. Sibling pointwise kernels: a pointwise group G that reads a buffer an
//     earlier pointwise group E over the same elements reads too moves up
//     to E and joins it (the buffer is read once): when G reads nothing of
//     E, every other buffer G reads exists before E's kernel (G's ops after
//     it move up to it; G's outputs are read after G's last op, so after
//     the joint kernel), the union reads at most max-kernel-inputs buffers
//     and holds at most kMaxKernelOps ops, and G's outputs are no more bytes
//     than the inputs G was the last to read, no other reader's kernel
//     running after E's (they now die at E: the memory live in between does
//     not grow).
//     SwiGLU's backward: dh * silu(a) and dh * b * silu'(a), two GEMMs
//     apart, read dh and a once. A joint group tries the groups before E in
//     turn: with remat, the recomputed product silu(a) * b (the weight
//     gradient's GEMM reads it) joins both halves, which alone are the last
//     to read a and b (their forward readers come before), so a and b are
//     read once in the backward.
//  2f. Whole-tensor sums of arguments only (the global norm's sum of each
//     gradient's squares) share multi-tensor kernels.
//  3. Each refused candidate gets `kiln.not_fused = "into <op> at <loc>:
//     <reason>"` on the producer (or, for optimizer updates, the update).
//  4. Every group of two or more ops becomes a kiln.fusion placed at its
//     last member: operands = values read from outside, results = values
//     read outside plus every result of a row or optimizer op and each row
//     op operand computed in the group (its kernel writes them). A splat
//     constant an element-wise member reads from outside is cloned into
//     the group as a literal, never passed as a buffer.
//  5. Splat constants no op reads any more are erased (else each would be
//     a kernel writing a whole tensor of one value).
//  kiln.fusion gemm (--kiln-fuse-gemm-epilogue, run before) is a GEMM
//  call and joins no group.
//
//===----------------------------------------------------------------------===//

#include "passes/FusableOps.h"
#include "passes/FusionMaterialize.h"
#include "passes/FusionRecompute.h"
#include "passes/FusionReport.h"
#include "passes/Passes.h"

#include "ir/KilnOps.h"
#include "ir/OpCost.h"
#include "ir/StepFunction.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <memory>

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNFUSION
#include "passes/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;
using namespace mlir::kiln;
using namespace mlir::kiln::fusion;

namespace {

// The most ops one fused kernel holds (whyNot).
constexpr size_t kMaxKernelOps = 512;

// Moves `op` right after `anchor`, in the same block. Not
// Operation::moveAfter: a splice marks the whole block's op order stale, so
// the next isBeforeInBlock renumbers every op, and the pass's moves between
// queries made it quadratic (Llama-3 at 256 layers). Removed and inserted
// again, only `op` needs a number, found between its neighbours'.
void moveAfterKeepingOrder(Operation *op, Operation *anchor) {
  op->remove();
  anchor->getBlock()->getOperations().insertAfter(anchor->getIterator(), op);
}

// ArgumentCopies: step 1c's groups (a pointwise kernel for codegen).
// Sum: step 2d's groups (a whole-tensor kiln.reduce_sum and the pointwise
// ops computing its input, summed as they are computed).
enum class GroupKind { Pointwise, Row, Optimizer, ArgumentCopies, Sum };

FusionKind kindOf(GroupKind kind) {
  switch (kind) {
  case GroupKind::Pointwise:
  case GroupKind::ArgumentCopies:
    return FusionKind::Pointwise;
  case GroupKind::Row:
    return FusionKind::Row;
  case GroupKind::Optimizer:
    return FusionKind::Optimizer;
  case GroupKind::Sum:
    return FusionKind::Sum;
  }
  llvm_unreachable("every group kind is a fusion kind");
}

struct Group {
  GroupKind kind;
  SmallVector<Operation *> ops; // in block order
  llvm::SmallPtrSet<Operation *, 16> members;
  Operation *rowOp = nullptr;   // Row groups
  int64_t elements = 0;         // the loop's elements (pointwise / row tensor)
};

class FunctionFuser {
public:
  FunctionFuser(func::FuncOp func, unsigned maxOptimizerTensors,
                unsigned maxKernelInputs)
      : func(func), block(func.getBody().front()),
        maxOptimizerTensors(maxOptimizerTensors),
        maxKernelInputs(maxKernelInputs) {}

  void run() {
    cloneCheapProducers(block);
    recomputeInBackward(func);
    gatherOptimizerUpdates();
    groupArgumentCopies();
    SmallVector<Operation *> ops;
    for (Operation &op : block.without_terminator())
      ops.push_back(&op);
    for (Operation *op : ops) {
      if (groupOf(op))
        continue; // an argument copy, grouped already
      if (isPointwise(op))
        visitPointwise(op);
      else if (rowLength(op))
        visitRow(op);
      else if (isOptimizerUpdate(op))
        visitOptimizer(op);
      else if (isTotalSum(op))
        visitSum(op);
    }
    mergeSiblings();
    gatherArgumentSums();
    for (auto &group : groups)
      if (group->ops.size() >= 2)
        materializeFusion(group->ops, group->members, group->rowOp,
                          kindOf(group->kind));
    eraseDeadSplats();
  }

private:
  // 1b. Pure ops: moving an update up past ops it does not read keeps the
  // function's meaning.
  void gatherOptimizerUpdates() {
    Operation *first = nullptr, *last = nullptr;
    SmallVector<Operation *> updates;
    for (Operation &op : block.without_terminator())
      if (isOptimizerUpdate(&op))
        updates.push_back(&op);
    for (Operation *op : updates) {
      if (!first) {
        first = last = op;
        continue;
      }
      bool readsLater = llvm::any_of(op->getOperands(), [&](Value v) {
        Operation *def = v.getDefiningOp();
        return def && def->getBlock() == &block && !def->isBeforeInBlock(first);
      });
      if (readsLater)
        continue;
      moveAfterKeepingOrder(op, last);
      last = op;
    }
  }

  // 1c. Copies read only arguments, so moving them to the start keeps the
  // function's meaning; they go there bucketed by element count, so each
  // group is contiguous and its kernel runs before any reader. A copy remat
  // recomputes in the backward stays there (at the start it would live
  // through the whole step again): those recomputed for one reader (the op
  // they precede, past the other recomputed clones) share a kernel per
  // element count, at the first of them.
  void groupArgumentCopies() {
    llvm::MapVector<int64_t, SmallVector<Operation *>> byElements;
    SmallVector<Operation *> recomputed;
    for (Operation &op : block.without_terminator()) {
      if (!isArgumentCopy(&op, block))
        continue;
      if (op.hasAttr(kRecomputeAttrName))
        recomputed.push_back(&op);
      else
        byElements[elementsOf(op.getResult(0))].push_back(&op);
    }
    // The anchor is no copy, so it never moves; each copy goes right
    // before it, after the ones placed earlier.
    Operation *anchor = &block.front();
    while (isArgumentCopy(anchor, block) && !anchor->hasAttr(kRecomputeAttrName))
      anchor = anchor->getNextNode();
    for (auto &[elements, copies] : byElements) {
      Group *group = nullptr;
      for (Operation *op : copies) {
        op->remove();
        block.getOperations().insert(anchor->getIterator(), op);
        if (group && group->ops.size() < maxOptimizerTensors)
          add(group, op);
        else
          group = newGroup(GroupKind::ArgumentCopies, op, elements);
      }
    }
    llvm::DenseMap<std::pair<Operation *, int64_t>, Group *> byReader;
    for (Operation *op : recomputed) {
      Operation *reader = op->getNextNode();
      while (reader->hasAttr(kRecomputeAttrName))
        reader = reader->getNextNode(); // the terminator has none
      int64_t elements = elementsOf(op->getResult(0));
      Group *&group = byReader[{reader, elements}];
      if (group && group->ops.size() < maxOptimizerTensors) {
        moveAfterKeepingOrder(op, group->ops.back());
        add(group, op);
      } else {
        group = newGroup(GroupKind::ArgumentCopies, op, elements);
      }
    }
  }

  Group *groupOf(Operation *op) { return groupIndex.lookup(op); }

  Group *newGroup(GroupKind kind, Operation *op, int64_t elements) {
    groups.push_back(std::make_unique<Group>());
    Group *group = groups.back().get();
    group->kind = kind;
    group->elements = elements;
    add(group, op);
    return group;
  }

  void add(Group *group, Operation *op) {
    group->ops.push_back(op);
    group->members.insert(op);
    groupIndex[op] = group;
  }

  // Moves `from`'s ops into `into` (both precede the op being visited).
  void merge(Group *into, Group *from) {
    if (into == from)
      return;
    for (Operation *op : from->ops)
      add(into, op);
    llvm::sort(into->ops,
               [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
    from->ops.clear();
    from->members.clear();
  }

  // Why `consumer` cannot join the union of `candidates`, or "" when it can:
  // every value of theirs read outside must be read after `consumer`, and a
  // pointwise or row kernel reads at most maxKernelInputs buffers.
  std::string whyNot(ArrayRef<Group *> candidates, Operation *consumer) {
    // A bound on a kernel's ops keeps this test, which walks the candidates'
    // ops, from making the pass quadratic in a long chain (and the kernel's
    // source from growing without end); real kernels hold a few dozen.
    size_t ops = 1;
    for (Group *group : candidates)
      ops += group->ops.size();
    if (ops > kMaxKernelOps)
      return ("the kernel would hold " + Twine(ops) + " ops, more than " +
              Twine(kMaxKernelOps))
          .str();
    auto inside = [&](Operation *op) {
      return op == consumer ||
             llvm::any_of(candidates,
                          [&](Group *g) { return g->members.contains(op); });
    };
    if (!isOptimizerUpdate(consumer)) {
      // The buffers the kernel reads: values computed outside it (a splat
      // constant becomes a literal, materialize() below).
      llvm::SmallDenseSet<Value, 16> inputs;
      auto read = [&](Operation *member) {
        for (Value v : member->getOperands()) {
          Operation *def = v.getDefiningOp();
          if (!def || (!inside(def) && !isSplatConstant(def)))
            inputs.insert(v);
        }
      };
      read(consumer);
      for (Group *group : candidates)
        for (Operation *member : group->ops)
          read(member);
      if (inputs.size() > maxKernelInputs)
        return ("the kernel would read " + Twine(inputs.size()) +
                " buffers, more than max-kernel-inputs = " +
                Twine(maxKernelInputs) +
                " (each is a pointer argument and a value held in registers)")
            .str();
    }
    for (Group *group : candidates)
      for (Operation *member : group->ops)
        for (Operation *user : member->getUsers())
          if (!inside(user) && !consumer->isBeforeInBlock(user))
            return (member->getName().getStringRef() + " at " +
                    modelLocation(member->getLoc()) + " is also read by " +
                    user->getName().getStringRef() + " at " +
                    modelLocation(user->getLoc()) +
                    ", which runs earlier (the kernel would feed an op "
                    "before it)")
                .str();
    return "";
  }

  // 3. Records why `producer` was not fused into `consumer`.
  void refuse(Operation *producer, Operation *consumer, StringRef reason) {
    std::string text = ("into " + consumer->getName().getStringRef() + " at " +
                        modelLocation(consumer->getLoc()) + ": " + reason)
                           .str();
    if (auto old = producer->getAttrOfType<StringAttr>(kNotFusedAttrName)) {
      if (StringRef(old.getValue()).contains(text))
        return;
      text = old.getValue().str() + "; " + text;
    }
    producer->setAttr(kNotFusedAttrName,
                      StringAttr::get(producer->getContext(), text));
  }

  // 2a. A pointwise op: epilogue of a row group, or vertical fusion. When it
  // reads epilogue values of several row groups (the residual gradient's
  // add of two norm backwards' dx), it joins the first one it legally can;
  // the others' values are buffers it reads.
  void visitPointwise(Operation *op) {
    int64_t n = elementsOf(op->getResult(0));
    SmallVector<std::pair<Group *, Operation *>> rows; // group, producer
    bool rowOk = true;
    SmallVector<std::pair<Group *, Operation *>> pointwise; // group, producer
    llvm::SmallPtrSet<Value, 4> seen;
    for (Value v : op->getOperands()) {
      if (!seen.insert(v).second)
        continue;
      Operation *producer = v.getDefiningOp();
      if (!producer || producer->getBlock() != &block)
        continue;
      Group *group = groupOf(producer);
      if (!group) {
        std::string why = whyStandalone(producer);
        if (!why.empty())
          refuse(producer, op, why);
        continue;
      }
      if (isa<BroadcastOp>(op)) {
        refuse(producer, op,
               "a kernel never broadcasts a value it computes itself");
        continue;
      }
      if (group->kind == GroupKind::Optimizer) {
        refuse(producer, op, "optimizer updates fuse only with each other");
        continue;
      }
      if (group->kind == GroupKind::Sum) {
        refuse(producer, op, "a whole-tensor sum ends its kernel");
        continue;
      }
      if (group->kind == GroupKind::ArgumentCopies) {
        refuse(producer, op,
               "the bf16 copies of arguments fuse only with each other (one "
               "kernel per element count at the function's start, or in front "
               "of the backward op remat recomputes them for)");
        continue;
      }
      if (group->elements != n) {
        refuse(producer, op,
               ("element counts differ (" + Twine(group->elements) + " vs " +
                Twine(n) + "), one loop cannot cover both")
                   .str());
        continue;
      }
      if (group->kind == GroupKind::Row) {
        bool epilogueValue =
            v == group->rowOp->getResult(0) ||
            (producer != group->rowOp &&
             group->rowOp->isBeforeInBlock(producer));
        if (!hasRowEpilogue(group->rowOp) || !epilogueValue) {
          refuse(producer, op,
                 "an epilogue reads only the row op's row output and values "
                 "computed after it");
          rowOk = false;
          continue;
        }
        if (!llvm::any_of(rows, [&](auto &r) { return r.first == group; }))
          rows.push_back({group, producer});
        continue;
      }
      if (!llvm::is_contained(pointwise, std::make_pair(group, producer)))
        pointwise.push_back({group, producer});
    }

    if (rowOk) {
      for (auto [row, producer] : rows) {
        std::string why = whyNot({row}, op);
        if (why.empty()) {
          add(row, op);
          return;
        }
        refuse(producer, op, why);
      }
    }
    SmallVector<Group *> join;
    for (auto [group, producer] : pointwise) {
      if (llvm::is_contained(join, group))
        continue;
      SmallVector<Group *> trial(join);
      trial.push_back(group);
      std::string why = whyNot(trial, op);
      if (why.empty())
        join.push_back(group);
      else
        refuse(producer, op, why);
    }
    if (join.empty()) {
      newGroup(GroupKind::Pointwise, op, n);
      return;
    }
    for (Group *group : ArrayRef<Group *>(join).drop_front())
      merge(join.front(), group);
    add(join.front(), op);
  }

  // 2b. A row op absorbs the pointwise groups producing its row operands.
  void visitRow(Operation *op) {
    int64_t n = elementsOf(op->getOperand(0));
    SmallVector<Group *> join;
    for (Value v : op->getOperands()) {
      Operation *producer = v.getDefiningOp();
      if (!producer || producer->getBlock() != &block || elementsOf(v) != n)
        continue;
      Group *group = groupOf(producer);
      if (!group) {
        std::string why = whyStandalone(producer);
        if (!why.empty())
          refuse(producer, op, why);
        continue;
      }
      if (llvm::is_contained(join, group))
        continue;
      if (group->kind != GroupKind::Pointwise || group->elements != n) {
        refuse(producer, op,
               "a row op's prologue is pointwise ops over its row tensor "
               "only");
        continue;
      }
      SmallVector<Group *> trial(join);
      trial.push_back(group);
      std::string why = whyNot(trial, op);
      if (why.empty())
        join.push_back(group);
      else
        refuse(producer, op, why);
    }
    Group *row = newGroup(GroupKind::Row, op, n);
    row->rowOp = op;
    for (Group *group : join)
      merge(row, group);
  }

  // 2d. A whole-tensor sum absorbs the pointwise group computing its input:
  // each element is summed as it is computed, never stored (the global
  // norm's g * g, the size of the largest parameter, is then no buffer).
  void visitSum(Operation *op) {
    Value input = op->getOperand(0);
    int64_t n = elementsOf(input);
    Operation *producer = input.getDefiningOp();
    Group *group = producer && producer->getBlock() == &block ? groupOf(producer) : nullptr;
    if (!group) {
      if (producer && producer->getBlock() == &block) {
        std::string why = whyStandalone(producer);
        if (!why.empty())
          refuse(producer, op, why);
      }
      return;
    }
    if (group->kind != GroupKind::Pointwise || group->elements != n) {
      refuse(producer, op, "a whole-tensor sum takes in pointwise ops over its input only");
      return;
    }
    std::string why = whyNot({group}, op);
    if (!why.empty()) {
      refuse(producer, op, why);
      return;
    }
    group->kind = GroupKind::Sum;
    add(group, op);
  }

  // 2f. Whole-tensor sums of arguments only (the global norm's sum of each
  // gradient's squares) share multi-tensor kernels, up to
  // maxOptimizerTensors sums each (codegen: one segment of the grid per
  // sum, the same blocks and order as the sum's own kernel). A sum whose
  // kernel writes anything but its total stays alone. Their ops move up to
  // the earliest total's place (they read arguments only), so each shared
  // kernel runs before any reader of its totals. Ordered by the totals, not
  // by the groups' first ops: a group may begin with a splat constant of
  // its own placed early (cloned per reader, step 1), and a total moved
  // down past a reader of it broke dominance (tools/fuzz/kiln_fuzz.py).
  void gatherArgumentSums() {
    auto readsArgumentsOnly = [&](Group *group) {
      for (Operation *op : group->ops)
        for (Value v : op->getOperands()) {
          Operation *def = v.getDefiningOp();
          if (def ? !group->members.contains(def) : v.getParentBlock() != &block)
            return false;
        }
      return true;
    };
    auto writesTotalOnly = [&](Group *group) {
      for (Operation *op : group->ops)
        if (op != group->ops.back() &&
            llvm::any_of(op->getUsers(),
                         [&](Operation *user) { return !group->members.contains(user); }))
          return false;
      return true;
    };
    SmallVector<Group *> sums;
    for (auto &group : groups)
      if (group->kind == GroupKind::Sum && group->ops.size() >= 2 &&
          readsArgumentsOnly(group.get()) && writesTotalOnly(group.get()))
        sums.push_back(group.get());
    llvm::sort(sums, [](Group *a, Group *b) {
      return a->ops.back()->isBeforeInBlock(b->ops.back());
    });
    for (size_t first = 0; first < sums.size(); first += maxOptimizerTensors) {
      size_t end = std::min<size_t>(sums.size(), first + maxOptimizerTensors);
      if (end - first < 2)
        break;
      Group *into = sums[first];
      Operation *anchor = into->ops.back();
      for (size_t i = first + 1; i < end; ++i) {
        for (Operation *op : sums[i]->ops) {
          moveAfterKeepingOrder(op, anchor);
          anchor = op;
          add(into, op);
        }
        sums[i]->ops.clear();
        sums[i]->members.clear();
      }
    }
  }

  // Where the value of `def` is made: the kernel of its group (placed at the
  // group's last op) when it is one, else `def` itself.
  Operation *kernelOf(Operation *def) {
    Group *group = groupOf(def);
    return group && group->ops.size() >= 2 ? group->ops.back() : def;
  }

  // The buffers `group` reads (splat constants become literals, no buffer).
  llvm::SetVector<Value> inputsOf(const Group &group) {
    llvm::SetVector<Value> inputs;
    for (Operation *op : group.ops)
      for (Value v : op->getOperands()) {
        Operation *def = v.getDefiningOp();
        if (!def || (!group.members.contains(def) && !isSplatConstant(def)))
          inputs.insert(v);
      }
    return inputs;
  }

  // 2e. Whether `later` can move up to `earlier`'s kernel and join it.
  bool canJoinSibling(const Group &earlier, const Group &later,
                      const llvm::SetVector<Value> &laterInputs) {
    Operation *place = earlier.ops.back();
    llvm::SetVector<Value> inputs = inputsOf(earlier);
    bool shared = false;
    int64_t diesEarlier = 0;
    for (Value v : laterInputs) {
      Operation *def = v.getDefiningOp();
      if (def && (earlier.members.contains(def) ||
                  !kernelOf(def)->isBeforeInBlock(place)))
        return false;
      shared = shared || inputs.contains(v);
      // Read by no kernel after the joint one (the forward's readers of a
      // value the backward reads again run before it; a reader in a group
      // runs where the group's kernel is).
      bool lastReader = llvm::all_of(v.getUsers(), [&](Operation *user) {
        Operation *top = block.findAncestorOpInBlock(*user);
        return later.members.contains(top) || earlier.members.contains(top) ||
               kernelOf(top)->isBeforeInBlock(place);
      });
      if (lastReader && !isa<BlockArgument>(v))
        diesEarlier += tensorBytes(v);
      inputs.insert(v);
    }
    if (!shared || inputs.size() > maxKernelInputs ||
        earlier.ops.size() + later.ops.size() > kMaxKernelOps)
      return false;
    int64_t written = 0;
    for (Operation *op : later.ops)
      for (Value r : op->getResults())
        if (llvm::any_of(r.getUsers(), [&](Operation *user) {
              return !later.members.contains(user);
            }))
          written += tensorBytes(r);
    return written <= diesEarlier;
  }

  void mergeSiblings() {
    SmallVector<Group *> pointwise;
    for (auto &group : groups)
      if (group->kind == GroupKind::Pointwise && !group->ops.empty())
        pointwise.push_back(group.get());
    llvm::sort(pointwise, [](Group *a, Group *b) {
      return a->ops.back()->isBeforeInBlock(b->ops.back());
    });
    for (size_t j = 1; j < pointwise.size(); ++j) {
      Group *later = pointwise[j];
      llvm::SetVector<Value> laterInputs = inputsOf(*later);
      for (size_t i = j; i-- > 0;) {
        Group *earlier = pointwise[i];
        if (earlier->ops.empty() || earlier->elements != later->elements ||
            !canJoinSibling(*earlier, *later, laterInputs))
          continue;
        Operation *place = earlier->ops.back();
        Operation *anchor = place;
        SmallVector<Operation *> members(later->ops);
        for (Operation *op : members)
          if (place->isBeforeInBlock(op)) {
            moveAfterKeepingOrder(op, anchor);
            anchor = op;
            // A splat constant it reads (no buffer, so not among the inputs
            // checked) may now come after it: it gets its own copy in front.
            for (OpOperand &use : op->getOpOperands()) {
              Operation *def = use.get().getDefiningOp();
              if (def && isSplatConstant(def) && !def->isBeforeInBlock(op)) {
                OpBuilder builder(op);
                use.set(builder.clone(*def)->getResult(0));
              }
            }
          }
        merge(earlier, later);
        // The joint group may join a sibling earlier still: SwiGLU's two
        // backward halves together, not either alone, are the last to read
        // a and b, which remat's recomputed product silu(a) * b reads too.
        later = earlier;
        laterInputs = inputsOf(*later);
      }
    }
  }

  // 2c. Updates of one kind share a multi-tensor kernel.
  void visitOptimizer(Operation *op) {
    StringRef kind = op->getName().getStringRef();
    Group *&current = optimizerGroups[kind];
    if (current && current->ops.size() < maxOptimizerTensors) {
      std::string why = whyNot({current}, op);
      if (why.empty()) {
        add(current, op);
        return;
      }
      refuse(op, current->ops.front(), why);
    }
    current = newGroup(GroupKind::Optimizer, op, 0);
  }

  // 5. A splat constant whose readers all took it in as a literal is gone:
  // it would otherwise be a kernel writing a full tensor of one value (the
  // 1/sqrt(d) scale of attention: [B, H, T, T]).
  void eraseDeadSplats() {
    SmallVector<Operation *> dead;
    for (Operation &op : block.without_terminator())
      if (isSplatConstant(&op) && op.use_empty())
        dead.push_back(&op);
    for (Operation *op : dead)
      op->erase();
  }

  func::FuncOp func;
  Block &block;
  unsigned maxOptimizerTensors;
  unsigned maxKernelInputs;
  std::vector<std::unique_ptr<Group>> groups;
  llvm::DenseMap<Operation *, Group *> groupIndex;
  llvm::StringMap<Group *> optimizerGroups;
};

struct KilnFusionPass
    : public mlir::kiln::impl::KilnFusionBase<KilnFusionPass> {
  using Base::Base;

  void runOnOperation() override {
    if (maxOptimizerTensors == 0) {
      getOperation().emitError()
          << "--kiln-fusion max-optimizer-tensors must be at least 1 (it "
             "caps the parameters one optimizer kernel updates)";
      return signalPassFailure();
    }
    if (maxKernelInputs < 2) {
      getOperation().emitError()
          << "--kiln-fusion max-kernel-inputs must be at least 2 (it caps "
             "the buffers one fused kernel reads; a binary op reads two)";
      return signalPassFailure();
    }
    for (StringRef name :
         {kStepFunctionName, kUpdateFunctionName, kEvalFunctionName}) {
      auto func = getOperation().lookupSymbol<func::FuncOp>(name);
      if (!func || !func.getBody().hasOneBlock())
        continue;
      FunctionFuser(func, maxOptimizerTensors, maxKernelInputs).run();
    }
  }
};

} // namespace
