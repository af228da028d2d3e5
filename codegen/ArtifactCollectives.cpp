//===- ArtifactCollectives.cpp - The artifact's CollectiveCalls -----------===//
//
// The collective stages of ArtifactWriter::plan:
//  - kiln.all_reduce: one CollectiveCall reducing its operands' buffers in
//    place (planAllReduce).
//  - kiln.reduce_scatter, kiln.all_gather, kiln.local_shard: one
//    CollectiveCall from the operand's buffer into the result's; ZeRO's
//    gathered parameter lands in the parameter's own storage
//    (planShardCollective).
//  - After each program: which collectives the runtime may run beside the
//    entries after them, and up to which entry (planOverlaps).
//
//===----------------------------------------------------------------------===//

#include "codegen/ArtifactWriter.h"

#include "ir/KilnOps.h"
#include "ir/StepFunction.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;
namespace k = mlir::kiln;

namespace kiln {

LogicalResult ArtifactWriter::planAllReduce(k::AllReduceOp op) {
  // Both targets run it in place: MPI or Gloo on the CPU, NCCL on CUDA.
  PlannedStep step;
  step.collective = PlannedCollective{
      schema::CollectiveKind_AllReduce,
      op.getReduction() == "mean" ? schema::Reduction_Mean
                                  : schema::Reduction_Sum,
      op.getAxis().str(), op.getReason() ? op.getReason()->str() : ""};
  step.location = locationString(op->getLoc());
  for (auto [operand, result] : llvm::zip(op.getInputs(), op.getResults())) {
    if (failed(planInPlace(op, result, operand)))
      return failure();
    step.buffers.push_back(bufferOf.lookup(result));
  }
  // Every buffer is read and written: all count as inputs (the memory plan
  // keeps them live across the call; nothing new is allocated).
  step.numInputs = step.buffers.size();
  schedule->push_back(std::move(step));
  return success();
}

Value ArtifactWriter::inPlaceHome(Value gathered) {
  SmallVector<Value> views{gathered};
  for (size_t next = 0; next < views.size(); ++next)
    for (OpOperand &use : views[next].getUses()) {
      Operation *user = use.getOwner();
      if (auto view = dyn_cast<k::ReshapeOp>(user)) {
        views.push_back(view.getResult());
        continue;
      }
      auto ret = dyn_cast<func::ReturnOp>(user);
      if (!ret)
        continue;
      auto func = ret->getParentOfType<func::FuncOp>();
      unsigned i = use.getOperandNumber();
      auto role = func.getResultAttrOfType<StringAttr>(i, k::kRoleAttrName);
      auto name = func.getResultAttrOfType<StringAttr>(i, k::kNameAttrName);
      if (!role || !name || !isInPlaceRole(role.getValue()))
        continue;
      for (BlockArgument arg : func.getArguments())
        if (func.getArgAttr(arg.getArgNumber(), k::kRoleAttrName) == role &&
            func.getArgAttr(arg.getArgNumber(), k::kNameAttrName) == name)
          return arg;
    }
  return Value();
}

LogicalResult ArtifactWriter::planShardCollective(Operation *op) {
  Value input = op->getOperand(0), result = op->getResult(0);
  PlannedStep step;
  PlannedCollective &c = step.collective.emplace();
  c.axis = op->getAttrOfType<StringAttr>("axis").str();
  if (auto reason = op->getAttrOfType<StringAttr>("reason"))
    c.reason = reason.str();
  if (auto scatter = dyn_cast<k::ReduceScatterOp>(op)) {
    c.kind = schema::CollectiveKind_ReduceScatter;
    c.reduction = scatter.getReduction() == "mean" ? schema::Reduction_Mean
                                                   : schema::Reduction_Sum;
  } else {
    c.kind = isa<k::AllGatherOp>(op) ? schema::CollectiveKind_AllGather
                                     : schema::CollectiveKind_LocalShard;
  }
  // Slices are contiguous runs of the flattened tensor: only a split of the
  // leading dimension is one (ZeRO splits flattened tensors).
  auto splitDim = op->getAttrOfType<IntegerAttr>("dim");
  if (splitDim.getInt() != 0)
    return op->emitError() << "codegen splits tensors over ranks along "
                              "dimension 0 only (contiguous slices), not "
                           << splitDim.getInt();
  std::string name = (op->getName().getStringRef() + "@" +
                      locationString(op->getLoc()))
                         .str();
  FailureOr<uint32_t> out = addBuffer(result, op, name);
  if (failed(out))
    return failure();
  // ZeRO's gathered parameter lands in the parameter itself.
  if (Value home = isa<k::AllGatherOp>(op) ? inPlaceHome(result) : Value()) {
    if (failed(planInPlace(op, result, home)))
      return failure();
    bufferOf[result] = *out;
    buffers[*out].aliasOf =
        static_cast<int32_t>(storageOf(bufferOf.lookup(home)));
  }
  step.buffers = {bufferOf.lookup(input), *out};
  step.numInputs = 1;
  step.location = locationString(op->getLoc());
  schedule->push_back(std::move(step));
  return success();
}

void ArtifactWriter::planOverlaps(PlannedProgram &program) {
  // The storage every entry touches.
  auto touched = [&](const PlannedStep &s) {
    std::vector<uint32_t> all(s.buffers);
    if (const std::optional<PlannedGemm> &g = s.gemm) {
      all.insert(all.end(), {g->a, g->b, g->c});
      for (int32_t extra : {g->bias, g->aux})
        if (extra >= 0)
          all.push_back(static_cast<uint32_t>(extra));
    }
    if (const std::optional<CudnnAttentionCall> &a = s.cudnnAttention)
      if (a->workspace >= 0)
        all.push_back(static_cast<uint32_t>(a->workspace));
    for (uint32_t &b : all)
      b = storageOf(b);
    return all;
  };
  auto persistent = [&](uint32_t b) {
    schema::BufferRole role = buffers[b].role;
    return role != schema::BufferRole_Activation && role != schema::BufferRole_Workspace;
  };
  std::vector<PlannedStep> &schedule = program.schedule;
  for (size_t i = 0; i < schedule.size(); ++i) {
    std::optional<PlannedCollective> &c = schedule[i].collective;
    if (!c)
      continue;
    std::vector<uint32_t> mine = touched(schedule[i]);
    // The first later entry that touches its buffers.
    size_t until = schedule.size();
    for (size_t j = i + 1; until == schedule.size() && j < schedule.size(); ++j)
      for (uint32_t b : touched(schedule[j]))
        if (llvm::is_contained(mine, b))
          until = j;
    if (c->kind == schema::CollectiveKind_AllReduce) {
      // Reduced in place: only what nothing reads later, and not
      // activations (their bytes may be given to others after the call).
      c->overlap = until == schedule.size() && llvm::all_of(mine, persistent);
    } else if (c->kind == schema::CollectiveKind_AllGather) {
      // Its input lives on (a parameter slice); its output is live from
      // this entry on, so the entries before `until` cannot touch it.
      c->overlap = persistent(mine.front()) && until > i + 1;
      if (c->overlap && until < schedule.size())
        c->overlapUntil = static_cast<int32_t>(until);
    }
  }
}

LogicalResult ArtifactWriter::plan() {
  for (StringRef name : {k::kStepFunctionName, k::kUpdateFunctionName}) {
    if (!module.lookupSymbol<func::FuncOp>(name))
      return module.emitError() << "codegen needs a func.func @" << name
                                << " (run the whole pipeline: @update comes "
                                   "from --kiln-optimizer)";
  }
  for (StringRef name : {k::kStepFunctionName, k::kUpdateFunctionName,
                         k::kEvalFunctionName}) {
    auto func = module.lookupSymbol<func::FuncOp>(name);
    if (func && failed(planFunction(func)))
      return failure();
  }
  for (func::FuncOp func : module.getOps<func::FuncOp>()) {
    StringRef name = func.getSymName();
    if (name != k::kStepFunctionName && name != k::kUpdateFunctionName &&
        name != k::kEvalFunctionName)
      return func.emitError() << "codegen does not know the program '"
                              << name << "' (expected step, update, eval)";
  }
  planLogicalShapes();
  planMemory();
  return success();
}

} // namespace kiln
