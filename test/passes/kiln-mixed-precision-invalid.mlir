// RUN: kiln-opt %s --split-input-file --kiln-mixed-precision --verify-diagnostics

// Tests that an unknown precision is refused.
// expected-error@+1 {{'kiln.train' precision must be "fp32", "tf32" or "bf16", got "fp8"}}
module attributes {kiln.train = {precision = "fp8"}} {
}

// -----

// Tests that precision must be a string.
// expected-error@+1 {{'kiln.train' precision must be "fp32", "tf32" or "bf16", got 16 : i64}}
module attributes {kiln.train = {precision = 16 : i64}} {
}
