//===- Passes.h - Kiln compiler passes ------------------------------------===//
//
// Declarations of every Kiln pass (generated from passes/Passes.td) and the
// registration entry point used by kiln-opt. The pipeline that orders the
// passes lives in passes/Pipelines.h.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_PASSES_H
#define KILN_PASSES_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include "ir/KilnDialect.h"

#include <functional>
#include <string>

namespace mlir::kiln {

// createKilnAutodiff(), createKilnOptimizer(), and the pass option structs.
#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

namespace detail {
// The generated per-pass registration; use mlir::kiln::registerKilnPasses()
// below, which also registers the named pipeline.
#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"
} // namespace detail

/// The peak bytes the artifact of a module (after the "optimizer" phase)
/// would plan, and the largest tensors live at that peak (a report).
struct PlannedPeak {
  int64_t bytes = 0;
  std::string liveAtPeak;
};
/// Plans the memory of a module; passes cannot include codegen, so kilnc
/// hands this to --kiln-remat (fusion plus codegen's memory plan).
using PlannedPeakFn = std::function<FailureOr<PlannedPeak>(ModuleOp)>;

/// --kiln-remat with the planner it asks for peaks (kiln-opt's
/// createKilnRemat() has none: it plans explicit modes only).
std::unique_ptr<Pass> createKilnRemat(const KilnRematOptions &options,
                                      PlannedPeakFn plannedPeak);

/// Registers every pass in Passes.td and the `kiln-training-pipeline` named
/// pipeline (defined in Pipelines.cpp), for kiln-opt and kilnc.
void registerKilnPasses();

} // namespace mlir::kiln

#endif // KILN_PASSES_PASSES_H
