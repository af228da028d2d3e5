//===- CollectiveReport.cpp - The collectives a compiled step runs --------===//

#include "passes/CollectiveReport.h"

#include "ir/KilnOps.h"
#include "ir/OpCost.h"
#include "passes/RematReport.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::kiln {

std::string collectiveSummary(ModuleOp module) {
  auto mesh = module->getAttrOfType<DictionaryAttr>(kMeshAttrName);
  std::string lines;
  llvm::raw_string_ostream os(lines);
  int64_t total = 0, buckets = 0;
  module.walk([&](AllReduceOp op) {
    int64_t bytes = 0;
    for (Value v : op.getInputs())
      bytes += tensorBytes(v);
    total += bytes;
    ++buckets;
    auto func = op->getParentOfType<func::FuncOp>();
    os << "  @" << func.getSymName() << " all_reduce " << op.getReduction()
       << " over '" << op.getAxis() << "': " << op.getInputs().size()
       << " tensors, " << formatMiB(bytes);
    if (op.getReason())
      os << " (" << *op.getReason() << ")";
    os << "\n";
  });
  if (buckets == 0)
    return "";
  auto ranks = mesh ? mesh.getAs<IntegerAttr>("data") : IntegerAttr();
  std::string head;
  llvm::raw_string_ostream h(head);
  int64_t n = ranks ? ranks.getInt() : 1;
  h << "data parallel: " << n << (n == 1 ? " rank" : " ranks") << ", all-reduce of " << formatMiB(total) << " per step in "
    << buckets << (buckets == 1 ? " bucket" : " buckets") << "\n";
  return head + lines;
}

} // namespace mlir::kiln
