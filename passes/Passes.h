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

#include "codegen/program/StepProgram.h"
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

/// The step program a module (after the "optimizer" phase) lowers to, with
/// its memory plan: the peak the artifact will have and the tensors live at
/// it. Passes do not lower modules themselves (that is codegen, which
/// includes them), so kilnc hands this to --kiln-remat (the fusion phase,
/// then codegen's lowering, on a copy of the module).
using StepProgramFn = std::function<FailureOr<::kiln::StepProgram>(ModuleOp)>;

/// --kiln-remat with the planner it asks for peaks (kiln-opt's
/// createKilnRemat() has none: it plans explicit modes only).
std::unique_ptr<Pass> createKilnRemat(const KilnRematOptions &options,
                                      StepProgramFn lowerToStepProgram);

/// Registers every pass in Passes.td and the `kiln-training-pipeline` named
/// pipeline (defined in Pipelines.cpp), for kiln-opt and kilnc.
void registerKilnPasses();

} // namespace mlir::kiln

#endif // KILN_PASSES_PASSES_H
