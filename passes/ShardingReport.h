//===- ShardingReport.h - Every value's sharding and every collective -----===//
//
// What kilnc writes to DIR/sharding.txt with --dump-phases-to: after the
// sharding phase, every value of the forward graph with its model-file
// line, its whole shape, its sharding and one rank's shape; at the end of
// the pipeline, every collective of every program with its bytes per rank
// and the reason the compiler gave it.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_SHARDINGREPORT_H
#define KILN_PASSES_SHARDINGREPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace mlir::kiln {

/// The values part, from the module after the sharding phase: the mesh,
/// then each argument and op result of each function.
std::string shardingValuesReport(ModuleOp module);

/// `values` (shardingValuesReport's), then the collectives of `module`
/// (the finished pipeline): program, kind, axis, bytes per run, runs per
/// step, line and reason, one per line.
void printShardingReport(llvm::StringRef values, ModuleOp module,
                         llvm::raw_ostream &os);

} // namespace mlir::kiln

#endif // KILN_PASSES_SHARDINGREPORT_H
