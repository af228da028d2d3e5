// RUN: kiln-opt %s --kiln-fusion=max-kernel-inputs=3 | FileCheck %s

// Tests that a pointwise chain stops growing once its kernel would read more
// than max-kernel-inputs buffers (the global norm's chain of adds over every
// parameter's sum of squares spilled on CUDA as one kernel): a + b + c is one
// kernel (3 inputs), the add of d starts the next (it would make 4), which
// reads the partial sum, d and e, and the refusal says why. A splat constant
// is a literal in the kernel, so it is no input.
// CHECK-LABEL: func.func @update
// CHECK: %[[F0:.*]] = kiln.fusion pointwise (%arg0, %arg1, %arg2)
// CHECK: kiln.add
// CHECK: %[[S1:.*]] = kiln.add {{.*}} {kiln.not_fused = "into kiln.add at {{.*}}: the kernel would read 4 buffers, more than max-kernel-inputs = 3 (each is a pointer argument and a value held in registers)"}
// CHECK: kiln.yield %[[S1]]
// CHECK: %[[F1:.*]] = kiln.fusion pointwise (%[[F0]], %arg3, %arg4)
// CHECK: kiln.add
// CHECK: kiln.add
// CHECK: kiln.constant
// CHECK: kiln.mul
// CHECK: kiln.sqrt
// CHECK: return %[[F1]]
func.func @update(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<f32>,
                  %d: tensor<f32>, %e: tensor<f32>) -> tensor<f32> {
  %s0 = kiln.add %a, %b : tensor<f32>
  %s1 = kiln.add %s0, %c : tensor<f32>
  %s2 = kiln.add %s1, %d : tensor<f32>
  %s3 = kiln.add %s2, %e : tensor<f32>
  %half = kiln.constant dense<0.5> : tensor<f32>
  %m = kiln.mul %s3, %half : tensor<f32>
  %r = kiln.sqrt %m : tensor<f32>
  return %r : tensor<f32>
}
