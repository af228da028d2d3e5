//===- AttentionReport.cpp - What --kiln-attention-match matched or refused ===//

#include "passes/AttentionReport.h"

#include "passes/FusionReport.h"

#include "ir/KilnOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::kiln {

namespace {

// "2x4x128x32xf32"
std::string typeText(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  auto tensor = cast<RankedTensorType>(type);
  for (int64_t d : tensor.getShape())
    os << d << 'x';
  os << tensor.getElementType();
  return text;
}

} // namespace

void printAttentionReport(ModuleOp module, llvm::raw_ostream &os) {
  os << "# kiln attention report: softmax(q @ kT * scale + bias) @ v "
        "rewritten into kiln.attention (flash kernels), and the softmaxes "
        "left alone with the reason\n";
  module.walk([&](func::FuncOp func) {
    SmallVector<AttentionOp> matched;
    SmallVector<SoftmaxOp> refused;
    func.walk([&](Operation *op) {
      if (auto attention = dyn_cast<AttentionOp>(op))
        matched.push_back(attention);
      else if (auto softmax = dyn_cast<SoftmaxOp>(op))
        if (softmax->hasAttr(kNotAttentionAttrName))
          refused.push_back(softmax);
    });
    if (matched.empty() && refused.empty())
      return;
    os << "\n@" << func.getSymName() << ": " << matched.size()
       << " attention, " << refused.size() << " not matched\n";
    for (AttentionOp attention : matched) {
      os << "  attention " << modelLocation(attention.getLoc()) << ": q "
         << typeText(attention.getQ().getType()) << ", k "
         << typeText(attention.getK().getType()) << ", scale "
         << attention.getScale().convertToDouble() << ", "
         << attention.getCaptures().size() << " captures, score "
         << (attention.getScoreBlock() ? "region" : "s") << ", mask "
         << (attention.getMaskBlock() ? "region" : "none") << "\n";
    }
    for (SoftmaxOp softmax : refused)
      os << "  not attention " << modelLocation(softmax.getLoc()) << ": "
         << softmax->getAttrOfType<StringAttr>(kNotAttentionAttrName)
                .getValue()
         << "\n";
  });
}

} // namespace mlir::kiln
