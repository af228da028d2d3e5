//===- RematReport.cpp - What --kiln-remat kept and recomputed -------------===//

#include "passes/RematReport.h"

#include "ir/KilnOps.h"
#include "ir/OpCost.h"
#include "ir/StepFunction.h"
#include "passes/FusionReport.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <map>

namespace mlir::kiln {

namespace {

/// "file:line" of `loc` (the column dropped: the report is per line).
std::string modelLine(Location loc) {
  std::string where = modelLocation(loc);
  size_t colon = where.rfind(':');
  return colon == std::string::npos || where == "?" ? where
                                                    : where.substr(0, colon);
}

/// Extra FLOPs as a share of the step's.
std::string overhead(DictionaryAttr remat) {
  auto extra = remat.getAs<FloatAttr>("extra_flops");
  auto total = remat.getAs<FloatAttr>("step_flops");
  double share = extra && total && total.getValueAsDouble() > 0
                     ? 100.0 * extra.getValueAsDouble() /
                           total.getValueAsDouble()
                     : 0.0;
  return llvm::formatv("+{0:F1}%", share).str();
}

/// "+52.44 GiB", "-3.10 MiB": traffic a plan adds, in GiB from 1 GiB.
std::string signedBytes(int64_t bytes) {
  double magnitude = std::abs(double(bytes));
  bool gib = magnitude >= double(1ull << 30);
  return llvm::formatv("{0}{1:F2} {2}", bytes < 0 ? "-" : "+",
                       magnitude / double(gib ? 1ull << 30 : 1ull << 20),
                       gib ? "GiB" : "MiB")
      .str();
}

/// ", +52.44 GiB (+29.4%) of its kernels' memory traffic" when kiln.remat
/// records the traffic (a plan other than none, compiled by kilnc).
std::string trafficOverhead(DictionaryAttr remat) {
  auto extra = remat.getAs<IntegerAttr>("extra_kernel_bytes");
  auto total = remat.getAs<IntegerAttr>("step_kernel_bytes");
  if (!extra || !total || total.getInt() <= 0)
    return "";
  double share = 100.0 * double(extra.getInt()) / double(total.getInt());
  return llvm::formatv(", {0} ({1}{2:F1}%) of its kernels' memory traffic",
                       signedBytes(extra.getInt()), share < 0 ? "" : "+", share)
      .str();
}

struct LineCost {
  int64_t kept = 0, recomputed = 0;
  double extraFlops = 0;
};

} // namespace

std::string formatMiB(int64_t bytes) {
  return llvm::formatv("{0:F2} MiB", (double)bytes / (1024.0 * 1024.0)).str();
}

std::string rematSummary(ModuleOp module) {
  auto remat = module->getAttrOfType<DictionaryAttr>(kRematAttrName);
  if (!remat)
    return "";
  std::string text = "remat: " +
                     remat.getAs<StringAttr>("mode").getValue().str() + ", " +
                     remat.getAs<StringAttr>("plan").getValue().str() +
                     "; recompute " + overhead(remat) + " of the step's FLOPs" +
                     trafficOverhead(remat);
  if (auto budget = remat.getAs<IntegerAttr>("budget"); budget && budget.getInt() > 0)
    text += "; budget " + formatMiB(budget.getInt());
  return text + "\n";
}

std::string rematSweepTable(ModuleOp module) {
  auto rows = module->getAttrOfType<ArrayAttr>(kRematSweepAttrName);
  auto remat = module->getAttrOfType<DictionaryAttr>(kRematAttrName);
  if (!rows || !remat)
    return "";
  double total = remat.getAs<FloatAttr>("step_flops").getValueAsDouble();
  std::string text = "memory budget sweep (planned peak, recompute as a "
                     "share of the step's FLOPs, the kernels' memory traffic "
                     "it adds, plan):\n";
  // The traffic with nothing recomputed (overrides too) is what rows add to.
  auto noneAttr = remat.getAs<IntegerAttr>("step_kernel_bytes");
  int64_t none = noneAttr ? noneAttr.getInt() : 0;
  for (Attribute row : rows) {
    auto dict = cast<DictionaryAttr>(row);
    double extra = dict.getAs<FloatAttr>("extra_flops").getValueAsDouble();
    int64_t traffic = dict.getAs<IntegerAttr>("kernel_bytes").getInt() - none;
    text += llvm::formatv("  {0,12}  +{1,5:F1}%  {2,12}  {3}\n",
                          formatMiB(dict.getAs<IntegerAttr>("peak").getInt()),
                          total > 0 ? 100.0 * extra / total : 0.0,
                          signedBytes(traffic),
                          dict.getAs<StringAttr>("plan").getValue())
                .str();
  }
  return text;
}

void printRematReport(ModuleOp module, llvm::raw_ostream &os) {
  auto remat = module->getAttrOfType<DictionaryAttr>(kRematAttrName);
  auto step = module.lookupSymbol<func::FuncOp>(kStepFunctionName);
  os << "# kiln remat report\n";
  if (!remat || !step) {
    os << "# no remat plan (no @step)\n";
    return;
  }
  os << "# " << rematSummary(module);
  if (auto peak = remat.getAs<IntegerAttr>("peak"))
    os << "# planned peak " << formatMiB(peak.getInt()) << "\n";
  os << "# per model-file line: bytes of forward values kept for the "
        "backward, bytes recomputed in it, extra FLOPs\n";

  llvm::DenseSet<Operation *> forward = getForwardOps(step);
  Block &body = step.getBody().front();
  std::map<std::string, LineCost> lines;
  for (Operation &op : body) {
    if (op.hasAttr(kRecomputeAttrName)) {
      LineCost &cost = lines[modelLine(op.getLoc())];
      for (Value result : op.getResults())
        cost.recomputed += isa<ReshapeOp>(op) ? 0 : tensorBytes(result);
      cost.extraFlops += estimateFlops(&op);
      continue;
    }
    // Kept: a forward value some backward op reads (reshapes are views of
    // their input, counted there).
    if (!forward.count(&op) || isa<ReshapeOp>(op))
      continue;
    for (Value result : op.getResults())
      for (Operation *user : result.getUsers()) {
        Operation *top = body.findAncestorOpInBlock(*user);
        if (top && !forward.count(top) && !isa<func::ReturnOp>(top)) {
          lines[modelLine(op.getLoc())].kept += tensorBytes(result);
          break;
        }
      }
  }
  os << llvm::formatv("{0,-40} {1,14} {2,14} {3,12}\n", "line", "kept",
                      "recomputed", "extra FLOPs");
  LineCost total;
  for (const auto &[line, cost] : lines) {
    os << llvm::formatv("{0,-40} {1,14} {2,14} {3,12:E2}\n", line,
                        formatMiB(cost.kept), formatMiB(cost.recomputed), cost.extraFlops);
    total.kept += cost.kept;
    total.recomputed += cost.recomputed;
    total.extraFlops += cost.extraFlops;
  }
  os << llvm::formatv("{0,-40} {1,14} {2,14} {3,12:E2}\n", "total",
                      formatMiB(total.kept), formatMiB(total.recomputed),
                      total.extraFlops);
}

} // namespace mlir::kiln
