//===- KilnDialect.h - The kiln dialect -------------------------*- C++ -*-===//
//
// The `kiln` dialect class and its attributes (`#kiln.init<...>`). Include
// ir/KilnOps.h for the ops; it includes this header.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_IR_KILNDIALECT_H
#define KILN_IR_KILNDIALECT_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"

#include "ir/KilnDialect.h.inc"

namespace mlir::kiln::detail {
// Hand-written storage of #kiln.init (KilnDialect.cpp): it hashes a double.
struct InitializerAttrStorage;
} // namespace mlir::kiln::detail

#include "ir/KilnEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "ir/KilnAttrs.h.inc"

#endif // KILN_IR_KILNDIALECT_H
