//===- StepLoweringCollectives.cpp - The step's CollectiveCalls ------------===//
//
// The collectives of StepLowering:
//  - kiln.all_reduce: one CollectiveCall reducing its operands' buffers in
//    place (planAllReduce).
//  - kiln.reduce_scatter, kiln.all_gather, kiln.local_shard: one
//    CollectiveCall from the operand's buffer into the result's; ZeRO's
//    gathered parameter lands in the parameter's own storage
//    (planShardCollective).
// Which of them the runtime may run beside the entries after them is the
// step program's decision (StepProgram::planOverlaps).
//
//===----------------------------------------------------------------------===//

#include "codegen/StepLowering.h"

#include "ir/KilnOps.h"
#include "ir/StepFunction.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;
namespace k = mlir::kiln;

namespace kiln {

LogicalResult StepLowering::planAllReduce(k::AllReduceOp op) {
  // Both targets run it in place: MPI or Gloo on the CPU, NCCL on CUDA.
  PlannedStep step;
  step.collective = PlannedCollective{
      schema::CollectiveKind_AllReduce,
      op.getReduction() == k::Reduction::Mean ? schema::Reduction_Mean
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

Value StepLowering::inPlaceHome(Value gathered) {
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
      auto role = func.getResultAttrOfType<k::RoleAttr>(i, k::kRoleAttrName);
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

LogicalResult StepLowering::planShardCollective(Operation *op) {
  Value input = op->getOperand(0), result = op->getResult(0);
  PlannedStep step;
  PlannedCollective &c = step.collective.emplace();
  c.axis = op->getAttrOfType<StringAttr>("axis").str();
  if (auto reason = op->getAttrOfType<StringAttr>("reason"))
    c.reason = reason.str();
  if (auto scatter = dyn_cast<k::ReduceScatterOp>(op)) {
    c.kind = schema::CollectiveKind_ReduceScatter;
    c.reduction = scatter.getReduction() == k::Reduction::Mean ? schema::Reduction_Mean
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

FailureOr<StepProgram> StepLowering::lower() {
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
  program.planOverlaps();
  program.planMemory();
  return std::move(program);
}

} // namespace kiln
