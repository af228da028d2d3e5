//===- KilnOptimizerOps.cpp - Verifiers of the optimizer ops --------------===//
//
// The hyperparameters of the update ops are baked into generated kernels:
// a value PyTorch would refuse (a beta of 1, a negative epsilon, momentum with
// nesterov but dampening) is refused here too, with the values in the message.
//
//===----------------------------------------------------------------------===//

#include "ir/KilnOps.h"

using namespace mlir;
using namespace mlir::kiln;

namespace {

std::string str(const APFloat &x) { return formatShortestFloat(x); }

bool isNegative(const APFloat &x) { return x.isNegative() && !x.isZero(); }

bool inUnitInterval(const APFloat &x) {
  double d = x.convertToDouble();
  return d >= 0.0 && d < 1.0;
}

/// weight_decay: finite and >= 0 (0 for parameters excluded from decay).
LogicalResult verifyWeightDecay(Operation *op, const APFloat &decay) {
  if (isNegative(decay) || !decay.isFinite())
    return op->emitOpError()
           << "weight_decay must be finite and non-negative, got "
           << str(decay);
  return success();
}

} // namespace

LogicalResult AccumulateOp::verify() {
  APFloat scale = getScale();
  if (!scale.isFinite() || scale.isNegative() || scale.isZero())
    return emitOpError() << "scale must be finite and positive, got "
                         << str(scale);
  return success();
}

LogicalResult GradScaleOp::verify() {
  APFloat maxNorm = getMaxNorm();
  if (isNegative(maxNorm) || !maxNorm.isFinite())
    return emitOpError() << "max_norm must be finite and non-negative (0: no "
                            "clipping), got "
                         << str(maxNorm);
  return success();
}

LogicalResult AdamOp::verify() {
  if (!inUnitInterval(getBeta1()) || !inUnitInterval(getBeta2()))
    return emitOpError() << "beta1 and beta2 must be in [0, 1), got "
                         << str(getBeta1()) << ", " << str(getBeta2());
  APFloat eps = getEpsilon();
  if (eps.isNegative() || eps.isZero() || !eps.isFinite())
    return emitOpError() << "epsilon must be finite and positive, got "
                         << str(eps);
  return verifyWeightDecay(*this, getWeightDecay());
}

LogicalResult SgdOp::verify() {
  return verifyWeightDecay(*this, getWeightDecay());
}

LogicalResult SgdMomentumOp::verify() {
  APFloat momentum = getMomentum(), dampening = getDampening();
  if (momentum.isNegative() || momentum.isZero() || !momentum.isFinite())
    return emitOpError() << "momentum must be finite and positive (use "
                            "kiln.sgd without momentum), got "
                         << str(momentum);
  if (isNegative(dampening) || !dampening.isFinite() ||
      dampening.convertToDouble() > 1.0)
    return emitOpError() << "dampening must be in [0, 1], got "
                         << str(dampening);
  if (getNesterov() && !dampening.isZero())
    return emitOpError() << "nesterov momentum needs dampening = 0, got "
                         << str(dampening);
  return verifyWeightDecay(*this, getWeightDecay());
}
