// RUN: kiln-opt %s --kiln-fusion=max-optimizer-tensors=0 --verify-diagnostics

// Tests that a multi-tensor optimizer kernel must be allowed at least one
// parameter (0 would silently mean "no multi-tensor kernels").
// expected-error@+1 {{--kiln-fusion max-optimizer-tensors must be at least 1}}
module {
}
