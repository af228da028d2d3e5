//===- DataParallel.cpp - Gradients averaged over the data axis -----------===//
//
// --kiln-data-parallel: with `kiln.mesh = {data = N > 1}` every rank computes
// gradients on its own share of the batch, and @update must see their mean.
//
// Algorithm:
//  1. Read N from kiln.mesh (no mesh or N = 1: nothing to do).
//  2. Find @update's grad arguments (error without them: the pass runs
//     after --kiln-optimizer) and its loss argument.
//  3. Cut the grads, last argument first (the backward finishes the last
//     parameters' gradients first, so a bucket is complete early once the
//     reduction overlaps the backward), into buckets of at most
//     `bucket-bytes` (a larger gradient gets a bucket of its own); the loss
//     joins the last bucket.
//  4. At the top of @update, one kiln.all_reduce "mean" per bucket; every
//     use of an argument reads the bucket's result instead (codegen then
//     reduces the argument's buffer in place).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "ir/KilnOps.h"
#include "ir/OpCost.h"
#include "ir/StepFunction.h"

#include "mlir/IR/Builders.h"

namespace mlir::kiln {
#define GEN_PASS_DEF_KILNDATAPARALLEL
#include "passes/Passes.h.inc"
} // namespace mlir::kiln

using namespace mlir;
using namespace mlir::kiln;

namespace {

constexpr StringLiteral kDataAxis = "data";

struct KilnDataParallelPass
    : public mlir::kiln::impl::KilnDataParallelBase<KilnDataParallelPass> {
  using KilnDataParallelBase::KilnDataParallelBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // (1)
    auto mesh = module->getAttrOfType<DictionaryAttr>(kMeshAttrName);
    auto ranks = mesh ? mesh.getAs<IntegerAttr>(kDataAxis) : IntegerAttr();
    // A mesh of one rank is data parallelism over one rank: its all-reduces
    // degenerate, but run through the same path (MPI, Gloo or NCCL) as with
    // more, which is how that path is checked on one GPU. No mesh: none.
    if (!ranks || ranks.getInt() < 1)
      return;
    auto update = module.lookupSymbol<func::FuncOp>("update");
    if (!update) {
      module.emitError("kiln.mesh asks for data parallelism but the module "
                       "has no @update; --kiln-data-parallel runs after "
                       "--kiln-optimizer");
      return signalPassFailure();
    }
    // (2)
    SmallVector<BlockArgument> grads;
    BlockArgument loss;
    for (unsigned i = 0, e = update.getNumArguments(); i < e; ++i) {
      StringRef role = getArgumentRole(update, i);
      if (role == role::kGrad)
        grads.push_back(update.getArgument(i));
      else if (role == role::kLoss)
        loss = update.getArgument(i);
    }
    if (grads.empty()) {
      update.emitOpError("has no kiln.role = \"grad\" arguments to average "
                         "over the data axis");
      return signalPassFailure();
    }
    // (3)
    SmallVector<SmallVector<Value>> buckets(1);
    int64_t bytes = 0;
    for (BlockArgument g : llvm::reverse(grads)) {
      int64_t size = tensorBytes(g);
      if (!buckets.back().empty() && bytes + size > bucketBytes) {
        buckets.emplace_back();
        bytes = 0;
      }
      buckets.back().push_back(g);
      bytes += size;
    }
    if (loss)
      buckets.back().push_back(loss);
    // (4)
    OpBuilder b = OpBuilder::atBlockBegin(&update.front());
    auto reason = b.getStringAttr(
        "data parallel: mean of the gradients" +
        std::string(loss ? " and the loss" : "") + " over " +
        std::to_string(ranks.getInt()) + (ranks.getInt() == 1 ? " rank" : " ranks"));
    for (SmallVector<Value> &bucket : buckets) {
      auto reduce = b.create<AllReduceOp>(update.getLoc(), bucket, "mean",
                                          kDataAxis, reason);
      for (auto [i, arg] : llvm::enumerate(bucket))
        arg.replaceAllUsesExcept(reduce.getResult(i), reduce);
    }
  }
};

} // namespace
