// RUN: kiln-opt %s --kiln-fusion=max-kernel-inputs=1 --verify-diagnostics

// Tests that a fused kernel must be allowed the two inputs of a binary op
// (1 would refuse every join silently).
// expected-error@+1 {{--kiln-fusion max-kernel-inputs must be at least 2}}
module {
}
