//===- FusionReport.cpp - What --kiln-fusion grouped and what it refused --===//
//
// Counts kernels the way codegen plans them: every op is one kernel except
// reshapes (views), non-splat constants (buffers) and matmuls (GEMM calls);
// a kiln.fusion is one kernel for all its members, except kind "gemm": one
// GEMM call, its epilogue ops costing no kernel.
//
//===----------------------------------------------------------------------===//

#include "passes/FusionReport.h"

#include "ir/KilnOps.h"
#include "ir/StepFunction.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"

namespace mlir::kiln {

namespace {

bool isKernel(Operation *op) {
  if (isa<ReshapeOp, MatmulOp, YieldOp, func::ReturnOp>(op))
    return false;
  if (auto constant = dyn_cast<ConstantOp>(op)) {
    auto value = constant->getAttrOfType<DenseElementsAttr>("value");
    return value && value.isSplat();
  }
  return true;
}

} // namespace

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
      if (isa<MatmulOp>(op))
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
    os << "@" << name << " refused candidates:\n";
    func.walk([&](Operation *op) {
      if (auto reason = op->getAttrOfType<StringAttr>(kNotFusedAttrName))
        os << "  " << op->getName() << " at " << modelLocation(op->getLoc())
           << " not fused " << reason.getValue() << "\n";
    });
  }
}

} // namespace mlir::kiln
