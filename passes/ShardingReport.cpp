//===- ShardingReport.cpp - Every value's sharding and every collective ---===//

#include "passes/ShardingReport.h"

#include "ir/KilnOps.h"
#include "ir/Sharding.h"
#include "ir/StepFunction.h"
#include "passes/CollectiveReport.h"
#include "passes/FusionReport.h"
#include "passes/RematReport.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::kiln {

namespace {

std::string formatShape(ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(shape))
    s += (i ? ", " : "") + std::to_string(d);
  return s + "]";
}

/// "[8, 128, 512] [_, _, model] -> [8, 128, 256] per rank" (or "whole").
std::string describeValue(Value v, const Mesh &mesh) {
  auto local = dyn_cast<RankedTensorType>(v.getType());
  if (!local)
    return "";
  TensorSharding sharding = getSharding(v);
  SmallVector<int64_t> whole(local.getShape());
  for (auto [d, axis] : llvm::enumerate(sharding))
    if (!axis.empty())
      whole[d] *= mesh.size(axis);
  std::string s = formatShape(whole) + " " + formatSharding(sharding);
  // Partial sums: each rank holds its part of the sum a collective makes.
  for (Operation *user : v.getUsers())
    if (isa<AllReduceOp, ReduceScatterOp>(user) &&
        user->getAttrOfType<ReductionAttr>("reduction").getValue() == Reduction::Sum)
      return s + " partial sums over '" +
             user->getAttrOfType<StringAttr>("axis").str() + "'";
  if (isReplicated(sharding))
    return s + " whole on every rank";
  return s + " -> " + formatShape(local.getShape()) + " per rank";
}

} // namespace

std::string shardingValuesReport(ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  Mesh mesh = readMesh(module);
  os << "# kiln sharding report: mesh [";
  for (auto [i, axis] : llvm::enumerate(mesh.axes))
    os << (i ? ", " : "") << axis.first << " = " << axis.second;
  os << "]\n# Every value of the forward graph after --kiln-partition: "
        "model-file line, op, whole shape, sharding ([_, model]: dimension 1 "
        "split over 'model'), one rank's shape. Then every collective.\n";
  for (auto func : module.getOps<func::FuncOp>()) {
    os << "\n@" << func.getSymName() << " values\n";
    for (BlockArgument arg : func.getArguments()) {
      auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                    kNameAttrName);
      os << "  " << modelLocation(arg.getLoc()) << "  "
         << roleName(getArgumentRole(func, arg.getArgNumber())) << " "
         << (name ? name.getValue() : "?") << "  " << describeValue(arg, mesh)
         << "\n";
    }
    func.walk([&](Operation *op) {
      if (isa<func::FuncOp, func::ReturnOp>(op) ||
          op->getParentOp() != func.getOperation())
        return;
      for (Value r : op->getResults()) {
        std::string what = describeValue(r, mesh);
        if (what.empty())
          continue;
        os << "  " << modelLocation(op->getLoc()) << "  "
           << op->getName().getStringRef();
        if (op->getNumResults() > 1)
          os << "#" << cast<OpResult>(r).getResultNumber();
        os << "  " << what << "\n";
      }
    });
  }
  return text;
}

void printShardingReport(StringRef values, ModuleOp module,
                         llvm::raw_ostream &os) {
  os << values;
  os << "\ncollectives (bytes each rank hands the library per run; runs per "
        "training step: @step once per micro-batch, @update once, @eval "
        "none)\n";
  int64_t count = 0;
  module.walk([&](Operation *op) {
    if (!isa<AllReduceOp, ReduceScatterOp, AllGatherOp, LocalShardOp>(op))
      return;
    StringRef program = op->getParentOfType<func::FuncOp>().getSymName();
    int64_t runs = runsPerStep(op);
    int64_t bytes = communicatedBytes(op);
    os << "  @" << program << "  " << op->getName().stripDialect();
    if (auto reduction = op->getAttrOfType<ReductionAttr>("reduction"))
      os << " " << stringifyReduction(reduction.getValue());
    os << " over '" << op->getAttrOfType<StringAttr>("axis").getValue()
       << "'  " << formatMiB(bytes) << " x " << runs << "  "
       << modelLocation(op->getLoc());
    if (auto reason = op->getAttrOfType<StringAttr>("reason"))
      os << "  " << reason.getValue();
    os << "\n";
    ++count;
  });
  if (count == 0)
    os << "  none\n";
}

} // namespace mlir::kiln
