//===- FusionMaterialize.h - A fusion group becomes a kiln.fusion op ------===//
//
// Step 4 of --kiln-fusion (Fusion.cpp): after every group is formed, each of
// two or more ops becomes one kiln.fusion region, the kernel codegen emits.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_FUSIONMATERIALIZE_H
#define KILN_PASSES_FUSIONMATERIALIZE_H

#include "ir/KilnDialect.h"

#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/SmallVector.h"

namespace mlir::kiln::fusion {

/// Moves `ops` (in block order; `members` holds the same ops) into a new
/// kiln.fusion of `kind` placed at the last of them: operands are the values
/// read from outside, results the values read outside plus what the kernel
/// writes anyway (`rowOp`'s results, save a norm's row output only its
/// epilogue reads, and row operands computed in the group). A splat constant
/// an element-wise member reads from outside is cloned in as a literal (and
/// added to `ops` and `members`), never passed as a buffer.
void materializeFusion(SmallVectorImpl<Operation *> &ops,
                       SmallPtrSetImpl<Operation *> &members, Operation *rowOp,
                       FusionKind kind);

} // namespace mlir::kiln::fusion

#endif // KILN_PASSES_FUSIONMATERIALIZE_H
