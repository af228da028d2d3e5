// RUN: kiln-opt %s --kiln-pad-dims=multiple=0 --verify-diagnostics

// Tests that the multiple must be positive.
// expected-error@+1 {{--kiln-pad-dims multiple must be positive, got 0}}
module {
}
