//===- FusionReport.cpp - What --kiln-fusion grouped and what it refused --===//
//
// Counts kernels the way codegen plans them: every op is one kernel except
// reshapes (views), non-splat constants (buffers) and matmuls and
// matmul_accumulates (GEMM calls);
// a kiln.fusion is one kernel for all its members, except kind "gemm": one
// GEMM call, its epilogue ops costing no kernel.
//
//===----------------------------------------------------------------------===//

#include "passes/FusionReport.h"

#include "ir/KilnOps.h"
#include "ir/OpCost.h"
#include "ir/StepFunction.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/FormatVariadic.h"

#include <map>
#include <vector>

namespace mlir::kiln {

namespace {

bool isKernel(Operation *op) {
  if (isa<ReshapeOp, MatmulOp, MatmulAccumulateOp, YieldOp, func::ReturnOp>(op))
    return false;
  if (auto constant = dyn_cast<ConstantOp>(op)) {
    auto value = constant->getAttrOfType<DenseElementsAttr>("value");
    return value && value.isSplat();
  }
  return true;
}

bool isGemmCall(Operation *op) {
  if (auto fusion = dyn_cast<FusionOp>(op))
    return fusion.getKind() == FusionKind::Gemm;
  return isa<MatmulOp, MatmulAccumulateOp>(op);
}

std::string gib(int64_t bytes) {
  return llvm::formatv("{0:F2} GiB", double(bytes) / double(1ull << 30)).str();
}

/// fusion.txt's traffic line of `func` and its largest kernels by model
/// line.
void printTraffic(func::FuncOp func, llvm::raw_ostream &os) {
  std::map<std::pair<std::string, std::string>, std::pair<int64_t, unsigned>>
      byLine; // (model line, kind) -> bytes, kernels
  Traffic traffic = measureTraffic(func, [&](Operation *op, int64_t bytes) {
    std::string kind = op->getName().getStringRef().str();
    if (auto fusion = dyn_cast<FusionOp>(op))
      kind = ("kiln.fusion " + stringifyFusionKind(fusion.getKind())).str();
    auto &entry = byLine[{modelLocation(op->getLoc()), kind}];
    entry.first += bytes;
    ++entry.second;
  });
  os << "@" << func.getName()
     << " memory traffic (each buffer a kernel reads and each result it "
        "writes counted once): "
     << traffic.kernels << " kernels " << gib(traffic.kernelBytes) << ", "
     << traffic.gemms << " GEMM calls " << gib(traffic.gemmBytes) << " ("
     << llvm::formatv("{0:F1}", traffic.gemmFlops / 1e12) << " TFLOP)\n";
  std::vector<std::pair<std::pair<std::string, std::string>,
                        std::pair<int64_t, unsigned>>>
      lines(byLine.begin(), byLine.end());
  llvm::stable_sort(lines, [](const auto &a, const auto &b) {
    return a.second.first > b.second.first;
  });
  for (const auto &[key, value] : llvm::ArrayRef(lines).take_front(12))
    os << llvm::formatv("  {0,10}  {1,4} x {2} at {3}\n", gib(value.first),
                        value.second, key.second, key.first);
}

} // namespace

Traffic measureTraffic(func::FuncOp func,
                       llvm::function_ref<void(Operation *, int64_t)> eachKernel) {
  Traffic traffic;
  for (Operation &op : func.getBody().getOps()) {
    bool gemm = isGemmCall(&op);
    if (!gemm && !isKernel(&op))
      continue;
    int64_t bytes = 0;
    for (Value v : llvm::SetVector<Value>(op.operand_begin(), op.operand_end()))
      bytes += tensorBytes(v);
    for (Value v : op.getResults())
      bytes += tensorBytes(v);
    if (gemm) {
      traffic.gemmBytes += bytes;
      ++traffic.gemms;
      if (auto fusion = dyn_cast<FusionOp>(op))
        fusion.getBody().walk([&](Operation *member) {
          traffic.gemmFlops += isa<MatmulOp>(member) ? estimateFlops(member) : 0;
        });
      else
        traffic.gemmFlops += estimateFlops(&op);
      continue;
    }
    traffic.kernelBytes += bytes;
    ++traffic.kernels;
    if (eachKernel)
      eachKernel(&op, bytes);
  }
  return traffic;
}

std::string modelLocation(Location loc) {
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    return (file.getFilename().getValue() + ":" + llvm::Twine(file.getLine()) +
            ":" + llvm::Twine(file.getColumn()))
        .str();
  if (auto site = dyn_cast<CallSiteLoc>(loc))
    return modelLocation(site.getCallee());
  if (auto name = dyn_cast<NameLoc>(loc))
    return modelLocation(name.getChildLoc());
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations()) {
      std::string s = modelLocation(inner);
      if (s != "?")
        return s;
    }
  return "?";
}

void printFusionReport(ModuleOp module, llvm::raw_ostream &os) {
  os << "# kiln fusion report: kernels per program run, with fusion (and "
        "without)\n";
  for (llvm::StringRef name :
       {kStepFunctionName, kUpdateFunctionName, kEvalFunctionName}) {
    auto func = module.lookupSymbol<func::FuncOp>(name);
    if (!func)
      continue;
    unsigned fused = 0, unfused = 0, gemms = 0, fusions = 0, epilogues = 0;
    for (Operation &op : func.getBody().getOps()) {
      if (isa<MatmulOp, MatmulAccumulateOp>(op))
        ++gemms;
      if (auto fusion = dyn_cast<FusionOp>(op)) {
        // A "gemm" kernel is a GEMM call: its epilogue ops cost no kernel.
        bool gemm = fusion.getKind() == FusionKind::Gemm;
        fused += !gemm;
        fusions += !gemm;
        gemms += gemm;
        epilogues += gemm;
        for (Operation &member : fusion.getBody().getOps())
          unfused += isKernel(&member);
        continue;
      }
      fused += isKernel(&op);
      unfused += isKernel(&op);
    }
    os << "@" << name << ": " << fused << " kernels (" << unfused
       << " unfused), " << fusions << " of them kiln.fusion, " << gemms
       << " GEMM calls (" << epilogues << " with an epilogue)\n";
  }
  for (llvm::StringRef name :
       {kStepFunctionName, kUpdateFunctionName, kEvalFunctionName}) {
    auto func = module.lookupSymbol<func::FuncOp>(name);
    if (!func)
      continue;
    unsigned index = 0;
    os << "\n@" << name << " kernels:\n";
    for (auto fusion : func.getBody().getOps<FusionOp>()) {
      os << "  kernel " << index++ << " (" << stringifyFusionKind(fusion.getKind()) << ") at "
         << modelLocation(fusion.getLoc()) << ":\n";
      for (Operation &member : fusion.getBody().front().without_terminator())
        os << "    " << member.getName() << " at "
           << modelLocation(member.getLoc()) << "\n";
    }
    printTraffic(func, os);
    os << "@" << name << " refused candidates:\n";
    func.walk([&](Operation *op) {
      if (auto reason = op->getAttrOfType<StringAttr>(kNotFusedAttrName))
        os << "  " << op->getName() << " at " << modelLocation(op->getLoc())
           << " not fused " << reason.getValue() << "\n";
    });
  }
}

} // namespace mlir::kiln
