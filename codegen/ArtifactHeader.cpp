//===- ArtifactHeader.cpp - What the artifact says besides its program ----===//
//
// Reads from the module what the serializer writes around the step program:
// the TrainConfig the runtime needs from `kiln.train` (batch, seq,
// grad_accum, clip, optimizer, every setting as one JSON object), the
// vocabulary bound of the token data, the model's name and the mesh.
//
//===----------------------------------------------------------------------===//

#include "codegen/StepLowering.h"

#include "ir/KilnOps.h"
#include "ir/StepFunction.h"

#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
namespace k = mlir::kiln;

namespace kiln {

namespace {

// Whether `value` is (a reshape view of, or a kiln.fusion block argument
// bound to) an argument of @step with
// kiln.role = #kiln.role<input>: indices the data loader fills from the token file.
bool isDataInput(func::FuncOp func, Value value) {
  // Inside a kiln.fusion, a block argument stands for the fusion's operand.
  for (;;) {
    if (auto reshape = value.getDefiningOp<k::ReshapeOp>()) {
      value = reshape->getOperand(0);
      continue;
    }
    auto inner = dyn_cast<BlockArgument>(value);
    auto fusion = inner ? dyn_cast<k::FusionOp>(inner.getOwner()->getParentOp())
                        : k::FusionOp();
    if (!fusion)
      break;
    value = fusion.getInputs()[inner.getArgNumber()];
  }
  auto arg = dyn_cast<BlockArgument>(value);
  if (!arg || arg.getOwner()->getParentOp() != func.getOperation())
    return false;
  return k::getArgumentRole(func, arg.getArgNumber()) == k::Role::Input;
}

// TrainConfig.vocab_size: the largest token id + 1 the step can index with
// data from the token file. Token ids index the table of a kiln.embedding
// (tokens) and the classes of a kiln.cross_entropy (targets); both come from
// the same file, so the bound is the smallest of those dimensions. 0 when no
// data input indexes anything (nothing for the runtime to check).
int64_t vocabularySize(func::FuncOp func) {
  int64_t vocab = 0;
  auto bound = [&](int64_t size) {
    vocab = vocab == 0 ? size : std::min(vocab, size);
  };
  func.walk([&](Operation *op) {
    if (auto embedding = dyn_cast<k::EmbeddingOp>(op)) {
      // table [V, D] gathered by indices [...]; a table padded by pad-dims
      // has its true V in kiln.true_shape.
      if (isDataInput(func, embedding.getIndices())) {
        Value table = embedding.getTable();
        int64_t rows = cast<RankedTensorType>(table.getType()).getDimSize(0);
        if (auto arg = dyn_cast<BlockArgument>(table))
          if (auto trueShape = func.getArgAttrOfType<DenseI64ArrayAttr>(
                  arg.getArgNumber(), k::kTrueShapeAttrName))
            rows = trueShape[0];
        bound(rows);
      }
    } else if (auto crossEntropy = dyn_cast<k::CrossEntropyOp>(op)) {
      // logits [..., V], targets [...]; valid_classes when padded
      if (isDataInput(func, crossEntropy.getTargets())) {
        auto logits = cast<RankedTensorType>(crossEntropy.getLogits().getType());
        bound(crossEntropy.getValidClasses().value_or(
            logits.getDimSize(logits.getRank() - 1)));
      }
    }
  });
  return vocab;
}

} // namespace

FailureOr<ArtifactHeader> readArtifactHeader(ModuleOp module,
                                             const CodegenOptions &options) {
  k::TrainConfigAttr train = k::getTrainConfig(module);
  if (!train)
    return module.emitError() << "codegen needs the module attribute kiln.train";
  ArtifactHeader header;
  auto model = module->getAttrOfType<StringAttr>(k::kModelAttrName);
  header.model = model ? model.getValue().str() : "";
  header.target = options.target;
  if (options.target == "cuda")
    header.cudaArchs = options.cudaArchs;
  header.prelude = kernelPrelude(options.target);
  header.batch = train.getBatch();
  header.seq = train.getSeq();
  header.optimizer = k::stringifyOptimizerKind(train.getOptimizer()).str();
  auto step = module.lookupSymbol<func::FuncOp>(k::kStepFunctionName);
  header.vocabSize = step ? vocabularySize(step) : 0;
  header.gradAccum = train.getGradAccum();
  header.clip = static_cast<float>(train.getClipValue());
  header.settingsJson = train.toJson();
  // kiln.mesh: the processes kiln-run must be launched as.
  if (auto mesh = module->getAttrOfType<DictionaryAttr>(k::kMeshAttrName))
    for (NamedAttribute axis : mesh)
      if (auto size = dyn_cast<IntegerAttr>(axis.getValue()))
        header.mesh.emplace_back(axis.getName().str(),
                                 static_cast<uint32_t>(size.getInt()));
  return header;
}

} // namespace kiln
