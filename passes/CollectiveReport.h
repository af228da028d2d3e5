//===- CollectiveReport.h - The collectives a compiled step runs ----------===//
//
// What kilnc prints with the memory plan when the step communicates: the
// mesh, and every collective with its bytes per rank and why it is there.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_COLLECTIVEREPORT_H
#define KILN_PASSES_COLLECTIVEREPORT_H

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace mlir::kiln {

/// "data parallel: 2 ranks, all-reduce of 3.21 MiB per step in 1 bucket"
/// (with ZeRO: its stage, and the reduce-scatters and all-gathers too;
/// @step's collectives count once per micro-batch), one line per function,
/// collective and reason, and with ZeRO which parameters it shards ("" when
/// the step does not communicate).
std::string collectiveSummary(ModuleOp module);

/// The bytes one run of the collective `op` hands to the library per rank:
/// what an all-reduce or reduce-scatter reduces, what an all-gather
/// gathers; a local shard communicates nothing.
int64_t communicatedBytes(Operation *op);

/// How often the program holding `op` runs per training step: @step once
/// per micro-batch (kiln.train's grad_accum), @update once, @eval never.
int64_t runsPerStep(Operation *op);

} // namespace mlir::kiln

#endif // KILN_PASSES_COLLECTIVEREPORT_H
