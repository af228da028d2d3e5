//===- OpCost.h - FLOPs and bytes of one kiln op --------------------------===//
//
// The cost model remat and the reports share: an op's floating-point
// operations (a GEMM 2·M·N·K per batch, plus M·N when it adds into a sum; attention's two GEMMs 4·Tq·Tk·D per
// head; anything else one per result element) and the bytes of its results.
// Coarse by design: it ranks choices and reports overheads as a share of the
// step, it does not predict time.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_IR_OPCOST_H
#define KILN_IR_OPCOST_H

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"

#include <cstdint>

namespace mlir::kiln {

/// Floating-point operations of one execution of `op` (0 for ops that only
/// move or view data: reshape, constants).
double estimateFlops(Operation *op);

/// Bytes of a ranked tensor value (0 for anything else).
int64_t tensorBytes(Value value);

} // namespace mlir::kiln

#endif // KILN_IR_OPCOST_H
