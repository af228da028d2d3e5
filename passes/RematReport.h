//===- RematReport.h - What --kiln-remat kept and recomputed --------------===//
//
// The report kilnc writes to DIR/remat.txt with --dump-phases-to (after the
// "remat" phase) and the one-line summary it prints with the memory plan.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_REMATREPORT_H
#define KILN_PASSES_REMATREPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>

namespace mlir::kiln {

/// "24.49 MiB": how remat's reports and errors show bytes.
std::string formatMiB(int64_t bytes);

/// The plan kiln.remat records, then per model-file line of @step: bytes of
/// forward values kept for the backward, bytes recomputed in it, and the
/// recompute's FLOPs.
void printRematReport(ModuleOp module, llvm::raw_ostream &os);

/// "remat: auto, Block.0-1 full, Block.2-3 none; recompute +12.3% of the
/// step's FLOPs; budget 40.00 MiB" ("" when the module has no kiln.remat).
std::string rematSummary(ModuleOp module);

/// kilnc --memory-budget-sweep: one line per plan of kiln.remat_sweep, from
/// no recompute to the least peak ("" without a sweep).
std::string rematSweepTable(ModuleOp module);

} // namespace mlir::kiln

#endif // KILN_PASSES_REMATREPORT_H
