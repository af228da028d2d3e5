// RUN: kiln-opt %s -split-input-file -verify-diagnostics

// Tests that an unknown comparison predicate is rejected.
func.func @bad_predicate(%a: tensor<4xf32>) -> tensor<4xi1> {
  // expected-error @+1 {{comparison predicate: one of lt, le, gt, ge, eq, ne}}
  %0 = kiln.cmp "lte", %a, %a : tensor<4xf32> -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

// Tests that a comparison produces i1.
func.func @cmp_result_type(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{result #0 must be statically shaped tensor of 1-bit signless integer values}}
  %0 = "kiln.cmp"(%a, %a) {predicate = "lt"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that both sides of a comparison have one type (no implicit
// int -> float: the frontend inserts kiln.convert).
func.func @cmp_mixed(%a: tensor<4xf32>, %n: tensor<4xi32>) -> tensor<4xi1> {
  // expected-error @+1 {{requires all operands to have the same type}}
  %0 = "kiln.cmp"(%a, %n) {predicate = "lt"} : (tensor<4xf32>, tensor<4xi32>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

// Tests that the compared tensors and the result have one shape.
func.func @cmp_shape(%a: tensor<4xf32>) -> tensor<8xi1> {
  // expected-error @+1 {{all non-scalar operands/results must have the same shape and base type}}
  %0 = "kiln.cmp"(%a, %a) {predicate = "lt"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xi1>
  return %0 : tensor<8xi1>
}

// -----

// Tests that a select's condition is i1.
func.func @select_condition(%c: tensor<4xf32>, %a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 1-bit signless integer values}}
  %0 = "kiln.select"(%c, %a, %a) : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that a select's two values have one type.
func.func @select_values(%c: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<4xbf16>) -> tensor<4xf32> {
  // expected-error @+1 {{all of {true_value, false_value, result} have same type}}
  %0 = "kiln.select"(%c, %a, %b) : (tensor<4xi1>, tensor<4xf32>, tensor<4xbf16>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that the condition has the values' shape (where() broadcasts it
// explicitly first).
func.func @select_shape(%c: tensor<4xi1>, %a: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{all non-scalar operands/results must have the same shape and base type}}
  %0 = kiln.select %c, %a, %a : tensor<4xi1>, tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// Tests that i1 is not an arithmetic type: and/or are selects.
func.func @no_bool_arithmetic(%a: tensor<4xi1>) -> tensor<4xi1> {
  // expected-error @+1 {{must be statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float or 32-bit signless integer or 64-bit signless integer values}}
  %0 = kiln.add %a, %a : tensor<4xi1>
  return %0 : tensor<4xi1>
}
