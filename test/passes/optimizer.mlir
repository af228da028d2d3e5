// RUN: kiln-opt %s --split-input-file --kiln-optimizer | FileCheck %s

// Tests that AdamW builds @update with params, grads, loss, adam_m..., adam_v...,
// lr, step; the grad norm, the guard scale without clipping (max_norm = 0),
// one kiln.adam with decoupled decay, and the norms; results grad_norm,
// update_norm, param_norm, param, adam_m, adam_v. A rank-2 weight keeps the
// optimizer's weight decay, written on @step's and @update's param.
// CHECK-LABEL: func.func @step
// CHECK-SAME: kiln.name = "w", kiln.param_kind = "weight", kiln.role = #kiln.role<param>, kiln.weight_decay = 1.000000e-01 : f32
// CHECK-LABEL: func.func @update
// CHECK-SAME: %[[W:[^:]*]]: tensor<4x8xf32> {kiln.name = "w", kiln.param_kind = "weight", kiln.role = #kiln.role<param>, kiln.weight_decay = 1.000000e-01 : f32}
// CHECK-SAME: %[[G:[^:]*]]: tensor<4x8xf32> {kiln.name = "w", kiln.role = #kiln.role<grad>}
// CHECK-SAME: %[[L:[^:]*]]: tensor<f32> {kiln.name = "loss", kiln.role = #kiln.role<loss>}
// CHECK-SAME: %[[M:[^:]*]]: tensor<4x8xf32> {kiln.name = "w", kiln.role = #kiln.role<adam_m>}
// CHECK-SAME: %[[V:[^:]*]]: tensor<4x8xf32> {kiln.name = "w", kiln.role = #kiln.role<adam_v>}
// CHECK-SAME: %[[LR:[^:]*]]: tensor<f32> {kiln.name = "lr", kiln.role = #kiln.role<lr>}
// CHECK-SAME: %[[STEP:[^:]*]]: tensor<f32> {kiln.name = "step", kiln.role = #kiln.role<step>})
// CHECK-SAME: -> (tensor<f32> {kiln.name = "grad_norm", kiln.role = #kiln.role<grad_norm>},
// CHECK-SAME: tensor<f32> {kiln.name = "update_norm", kiln.role = #kiln.role<update_norm>},
// CHECK-SAME: tensor<f32> {kiln.name = "param_norm", kiln.role = #kiln.role<param_norm>},
// CHECK-SAME: tensor<4x8xf32> {kiln.name = "w", kiln.role = #kiln.role<param>},
// CHECK-SAME: tensor<4x8xf32> {kiln.name = "w", kiln.role = #kiln.role<adam_m>},
// CHECK-SAME: tensor<4x8xf32> {kiln.name = "w", kiln.role = #kiln.role<adam_v>})
// CHECK: %[[SQ:.*]] = kiln.mul %[[G]], %[[G]] : tensor<4x8xf32>
// CHECK: %[[SS:.*]] = kiln.reduce_sum %[[SQ]] dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
// CHECK: %[[NORM:.*]] = kiln.sqrt %[[SS]] : tensor<f32>
// CHECK: %[[SCALE:.*]] = kiln.grad_scale %[[NORM]], %[[L]] {max_norm = 0.000000e+00 : f32}
// CHECK: %[[P:.*]], %[[M1:.*]], %[[V1:.*]], %[[DU:.*]], %[[PP:.*]] = kiln.adam %[[W]], %[[G]], %[[M]], %[[V]], %[[LR]], %[[STEP]], %[[SCALE]]
// CHECK-SAME: beta1 = 0.899999976 : f32, beta2 = 0.949999988 : f32, decoupled_weight_decay = true, epsilon = 9.99999993E-9 : f32, weight_decay = 1.000000e-01 : f32
// CHECK: %[[UN:.*]] = kiln.sqrt %[[DU]]
// CHECK: %[[PN:.*]] = kiln.sqrt %[[PP]]
// CHECK: return %[[NORM]], %[[UN]], %[[PN]], %[[P]], %[[M1]], %[[V1]]
module attributes {kiln.train = #kiln.train<batch = 2, seq = 4,
    optimizer = adamw, beta1 = 0.9 : f32, beta2 = 0.95 : f32,
    epsilon = 1.0e-08 : f32, weight_decay = 0.1 : f32>} {
  func.func @step(
      %w: tensor<4x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"},
      %x: tensor<4x8xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>},
          tensor<4x8xf32> {kiln.role = #kiln.role<grad>, kiln.name = "w"}) {
    %0 = kiln.mul %w, %x : tensor<4x8xf32>
    %1 = kiln.reduce_sum %0 dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
    return %1, %x : tensor<f32>, tensor<4x8xf32>
  }
}

// -----

// Tests the weight-decay exclusions per kind of parameter: the table of a
// kiln.embedding (through a reshape view, used again as an unembedding:
// tied), the weight and bias of a layer_norm, another rank-1 parameter (a
// bias) and a rank-0 one all get 0; only the rank-2 weight decays. Clipping
// on: max_norm = clip. Parameters keep their order; two grads sum into the norm.
// CHECK-LABEL: func.func @update
// CHECK-SAME: kiln.name = "emb", kiln.param_kind = "embedding", kiln.role = #kiln.role<param>, kiln.weight_decay = 0.000000e+00 : f32
// CHECK-SAME: kiln.name = "ln_w", kiln.param_kind = "norm", kiln.role = #kiln.role<param>, kiln.weight_decay = 0.000000e+00 : f32
// CHECK-SAME: kiln.name = "ln_b", kiln.param_kind = "norm", kiln.role = #kiln.role<param>, kiln.weight_decay = 0.000000e+00 : f32
// CHECK-SAME: kiln.name = "b", kiln.param_kind = "bias", kiln.role = #kiln.role<param>, kiln.weight_decay = 0.000000e+00 : f32
// CHECK-SAME: kiln.name = "s", kiln.param_kind = "bias", kiln.role = #kiln.role<param>, kiln.weight_decay = 0.000000e+00 : f32
// CHECK-SAME: kiln.name = "w", kiln.param_kind = "weight", kiln.role = #kiln.role<param>, kiln.weight_decay = 5.000000e-01 : f32
// CHECK: kiln.grad_scale %{{.*}}, %{{.*}} {max_norm = 1.000000e+00 : f32}
// CHECK-COUNT-5: weight_decay = 0.000000e+00 : f32} : tensor
// CHECK: kiln.adam {{.*}} weight_decay = 5.000000e-01 : f32} : tensor<8x8xf32>
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1,
    clip = 1.0 : f32, optimizer = adamw, beta1 = 0.9 : f32, beta2 = 0.999 : f32,
    epsilon = 1.0e-08 : f32, weight_decay = 0.5 : f32>} {
  func.func @step(
      %emb: tensor<16x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "emb"},
      %ln_w: tensor<8xf32> {kiln.role = #kiln.role<param>, kiln.name = "ln_w"},
      %ln_b: tensor<8xf32> {kiln.role = #kiln.role<param>, kiln.name = "ln_b"},
      %b: tensor<8xf32> {kiln.role = #kiln.role<param>, kiln.name = "b"},
      %s: tensor<f32> {kiln.role = #kiln.role<param>, kiln.name = "s"},
      %w: tensor<8x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"},
      %tok: tensor<2x4xi32> {kiln.role = #kiln.role<input>, kiln.name = "tokens"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>},
          tensor<16x8xf32> {kiln.role = #kiln.role<grad>, kiln.name = "emb"},
          tensor<8xf32> {kiln.role = #kiln.role<grad>, kiln.name = "ln_w"},
          tensor<8xf32> {kiln.role = #kiln.role<grad>, kiln.name = "ln_b"},
          tensor<8xf32> {kiln.role = #kiln.role<grad>, kiln.name = "b"},
          tensor<f32> {kiln.role = #kiln.role<grad>, kiln.name = "s"},
          tensor<8x8xf32> {kiln.role = #kiln.role<grad>, kiln.name = "w"}) {
    %view = kiln.reshape %emb : tensor<16x8xf32> -> tensor<128xf32>
    %table = kiln.reshape %view : tensor<128xf32> -> tensor<16x8xf32>
    %x = kiln.embedding %table, %tok : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
    %y, %mean, %rstd = kiln.layer_norm %x, %ln_w, %ln_b {epsilon = 1.0e-05 : f32} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4xf32>, tensor<2x4xf32>)
    %l = kiln.reduce_sum %y dims = [0, 1, 2] : tensor<2x4x8xf32> -> tensor<f32>
    return %l, %emb, %b, %b, %b, %s, %w : tensor<f32>, tensor<16x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<f32>, tensor<8x8xf32>
  }
}

// -----

// Tests that decay_norms/decay_biases/decay_embeddings = true decay those
// kinds too, and that Adam (not AdamW) sets decoupled_weight_decay = false.
// CHECK-LABEL: func.func @update
// CHECK-SAME: kiln.name = "emb", kiln.param_kind = "embedding", kiln.role = #kiln.role<param>, kiln.weight_decay = 2.000000e-01 : f32
// CHECK-SAME: kiln.name = "ln_w", kiln.param_kind = "norm", kiln.role = #kiln.role<param>, kiln.weight_decay = 2.000000e-01 : f32
// CHECK-SAME: kiln.name = "b", kiln.param_kind = "bias", kiln.role = #kiln.role<param>, kiln.weight_decay = 2.000000e-01 : f32
// CHECK: kiln.adam {{.*}}decoupled_weight_decay = false
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1,
    optimizer = adam, beta1 = 0.9 : f32, beta2 = 0.999 : f32,
    epsilon = 1.0e-08 : f32, weight_decay = 0.2 : f32, decay_norms = true,
    decay_biases = true, decay_embeddings = true>} {
  func.func @step(
      %emb: tensor<16x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "emb"},
      %ln_w: tensor<8xf32> {kiln.role = #kiln.role<param>, kiln.name = "ln_w"},
      %b: tensor<8xf32> {kiln.role = #kiln.role<param>, kiln.name = "b"},
      %tok: tensor<2x4xi32> {kiln.role = #kiln.role<input>, kiln.name = "tokens"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>},
          tensor<16x8xf32> {kiln.role = #kiln.role<grad>, kiln.name = "emb"},
          tensor<8xf32> {kiln.role = #kiln.role<grad>, kiln.name = "ln_w"},
          tensor<8xf32> {kiln.role = #kiln.role<grad>, kiln.name = "b"}) {
    %x = kiln.embedding %emb, %tok : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
    %y, %mean, %rstd = kiln.layer_norm %x, %ln_w, %ln_w {epsilon = 1.0e-05 : f32} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4xf32>, tensor<2x4xf32>)
    %l = kiln.reduce_sum %y dims = [0, 1, 2] : tensor<2x4x8xf32> -> tensor<f32>
    return %l, %emb, %b, %b : tensor<f32>, tensor<16x8xf32>, tensor<8xf32>, tensor<8xf32>
  }
}

// -----

// Tests that SGD with momentum has one momentum buffer per parameter and a
// kiln.sgd_momentum update with its hyperparameters.
// CHECK-LABEL: func.func @update
// CHECK-SAME: %[[W:[^:]*]]: tensor<4xf32> {kiln.name = "w", kiln.param_kind = "bias", kiln.role = #kiln.role<param>, kiln.weight_decay = 0.000000e+00 : f32}
// CHECK-SAME: %[[G:[^:]*]]: tensor<4xf32> {kiln.name = "w", kiln.role = #kiln.role<grad>}
// CHECK-SAME: %[[L:[^:]*]]: tensor<f32> {kiln.name = "loss", kiln.role = #kiln.role<loss>}
// CHECK-SAME: %[[B:[^:]*]]: tensor<4xf32> {kiln.name = "w", kiln.role = #kiln.role<momentum>}
// CHECK-SAME: %[[LR:[^:]*]]: tensor<f32> {kiln.name = "lr", kiln.role = #kiln.role<lr>}
// CHECK-SAME: %[[STEP:[^:]*]]: tensor<f32> {kiln.name = "step", kiln.role = #kiln.role<step>})
// CHECK-SAME: tensor<4xf32> {kiln.name = "w", kiln.role = #kiln.role<param>}, tensor<4xf32> {kiln.name = "w", kiln.role = #kiln.role<momentum>})
// CHECK: %[[P:.*]], %[[B1:.*]], %{{.*}}, %{{.*}} = kiln.sgd_momentum %[[W]], %[[G]], %[[B]], %[[LR]], %[[STEP]], %{{.*}} {dampening = 0.000000e+00 : f32, momentum = 0.899999976 : f32, nesterov = true, weight_decay = 0.000000e+00 : f32} : tensor<4xf32>
// CHECK: return {{.*}}, %[[P]], %[[B1]]
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, optimizer = sgd,
    momentum = 0.9 : f32, dampening = 0.0 : f32, nesterov = true,
    weight_decay = 0.01 : f32>} {
  func.func @step(%w: tensor<4xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>},
          tensor<4xf32> {kiln.role = #kiln.role<grad>, kiln.name = "w"}) {
    %0 = kiln.reduce_sum %w dims = [0] : tensor<4xf32> -> tensor<f32>
    return %0, %w : tensor<f32>, tensor<4xf32>
  }
}

// -----

// Tests that plain SGD (momentum 0, the default) has no state arguments and
// uses kiln.sgd.
// CHECK-LABEL: func.func @update
// CHECK-SAME: {kiln.name = "loss", kiln.role = #kiln.role<loss>}, %{{[^:]*}}: tensor<f32> {kiln.name = "lr", kiln.role = #kiln.role<lr>}
// CHECK-NOT: momentum
// CHECK: kiln.sgd %{{.*}} {weight_decay = 1.000000e-01 : f32} : tensor<4x4xf32>
module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, optimizer = sgd,
    weight_decay = 0.1 : f32>} {
  func.func @step(%w: tensor<4x4xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>},
          tensor<4x4xf32> {kiln.role = #kiln.role<grad>, kiln.name = "w"}) {
    %0 = kiln.reduce_sum %w dims = [0, 1] : tensor<4x4xf32> -> tensor<f32>
    return %0, %w : tensor<f32>, tensor<4x4xf32>
  }
}

// -----

// Tests ZeRO-1 (zero = 1, mesh data = 2): a parameter whose elements split
// in two (w: 32) gets its Adam state as this rank's flat slice (16, with
// kiln.shard_axis), updates its slice of the flattened parameter and
// gradient, and all-gathers the new slice back into the parameter; the
// update and parameter norms' partial sums are summed over the ranks; the
// gathers follow all the updates. One
// that does not split (b: 3) stays replicated, and its sums join after.
// The gradients stay whole (ZeRO-1), so the gradient norm is as without.
// CHECK-LABEL: func.func @update
// CHECK-SAME: %[[W:[^:]*]]: tensor<4x8xf32> {kiln.name = "w", kiln.param_kind = "weight", kiln.role = #kiln.role<param>, kiln.weight_decay = 1.000000e-01 : f32}
// CHECK-SAME: %[[B:[^:]*]]: tensor<3xf32> {kiln.name = "b", kiln.param_kind = "bias", kiln.role = #kiln.role<param>, kiln.weight_decay = 0.000000e+00 : f32}
// CHECK-SAME: %[[GW:[^:]*]]: tensor<4x8xf32> {kiln.name = "w", kiln.role = #kiln.role<grad>}
// CHECK-SAME: %[[GB:[^:]*]]: tensor<3xf32> {kiln.name = "b", kiln.role = #kiln.role<grad>}
// CHECK-SAME: tensor<f32> {kiln.name = "loss", kiln.role = #kiln.role<loss>}
// CHECK-SAME: %[[MW:[^:]*]]: tensor<16xf32> {kiln.name = "w", kiln.role = #kiln.role<adam_m>, kiln.shard_axis = "data", kiln.whole_shape = array<i64: 4, 8>}
// CHECK-SAME: tensor<3xf32> {kiln.name = "b", kiln.role = #kiln.role<adam_m>}
// CHECK-SAME: tensor<16xf32> {kiln.name = "w", kiln.role = #kiln.role<adam_v>, kiln.shard_axis = "data", kiln.whole_shape = array<i64: 4, 8>}
// CHECK-SAME: tensor<3xf32> {kiln.name = "b", kiln.role = #kiln.role<adam_v>}
// CHECK-NOT: kiln.all_reduce
// CHECK: kiln.grad_scale
// CHECK: %[[FW:.*]] = kiln.reshape %[[W]] : tensor<4x8xf32> -> tensor<32xf32>
// CHECK: %[[SW:.*]] = kiln.local_shard %[[FW]] over "data" dim = 0 {reason = "ZeRO-1: this rank's share of the optimizer update"} : tensor<32xf32> -> tensor<16xf32>
// CHECK: %[[FG:.*]] = kiln.reshape %[[GW]] : tensor<4x8xf32> -> tensor<32xf32>
// CHECK: %[[SG:.*]] = kiln.local_shard %[[FG]] over "data" dim = 0
// CHECK: %[[P:.*]], %[[M1:.*]], %{{.*}}, %[[DU:.*]], %[[PP:.*]] = kiln.adam %[[SW]], %[[SG]], %[[MW]]
// CHECK-SAME: : tensor<16xf32>
// CHECK: %[[PB:.*]], %{{.*}}, %{{.*}}, %[[DUB:.*]], %[[PPB:.*]] = kiln.adam %[[B]], %[[GB]]
// CHECK: %[[GA:.*]] = kiln.all_gather %[[P]] over "data" dim = 0 {reason = "ZeRO-1: the updated parameter from every rank's shard"} : tensor<16xf32> -> tensor<32xf32>
// CHECK: %[[NW:.*]] = kiln.reshape %[[GA]] : tensor<32xf32> -> tensor<4x8xf32>
// CHECK: %[[SUMS:.*]]:2 = kiln.all_reduce sum %[[DU]], %[[PP]] over "data"
// CHECK: kiln.add %[[DUB]], %[[SUMS]]#0
// CHECK: kiln.add %[[PPB]], %[[SUMS]]#1
// CHECK: return {{.*}}, %[[NW]], %[[PB]], %[[M1]]
module attributes {kiln.mesh = {data = 2 : i64},
    kiln.train = #kiln.train<batch = 2, seq = 4, zero = 1, optimizer = adamw,
    beta1 = 0.9 : f32, beta2 = 0.95 : f32, epsilon = 1.0e-08 : f32,
    weight_decay = 0.1 : f32>} {
  func.func @step(
      %w: tensor<4x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"},
      %b: tensor<3xf32> {kiln.role = #kiln.role<param>, kiln.name = "b"},
      %x: tensor<4x8xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>},
          tensor<4x8xf32> {kiln.role = #kiln.role<grad>, kiln.name = "w"},
          tensor<3xf32> {kiln.role = #kiln.role<grad>, kiln.name = "b"}) {
    %0 = kiln.mul %w, %x : tensor<4x8xf32>
    %1 = kiln.reduce_sum %0 dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
    return %1, %x, %b : tensor<f32>, tensor<4x8xf32>, tensor<3xf32>
  }
}

// -----

// Tests ZeRO-2: the sharded parameter's gradient argument is this rank's
// slice too (@step is made to return it by --kiln-data-parallel), so its
// squared norm is partial and summed over the ranks before the clipping
// scale; no local_shard of it.
// CHECK-LABEL: func.func @update
// CHECK-SAME: %[[GW:[^:]*]]: tensor<16xf32> {kiln.name = "w", kiln.role = #kiln.role<grad>, kiln.shard_axis = "data", kiln.whole_shape = array<i64: 4, 8>}
// CHECK: %[[SQ:.*]] = kiln.mul %[[GW]], %[[GW]] : tensor<16xf32>
// CHECK: %[[SS:.*]] = kiln.reduce_sum %[[SQ]] dims = [0]
// CHECK: %[[TOT:.*]] = kiln.all_reduce sum %[[SS]] over "data" {reason = "ZeRO-2: the squared norms of the rank's gradient shards, summed for the global norm"}
// CHECK: %[[NORM:.*]] = kiln.sqrt %[[TOT]]
// CHECK: kiln.grad_scale %[[NORM]]
// CHECK: kiln.local_shard
// CHECK-NOT: kiln.local_shard
// CHECK: kiln.adam %{{.*}}, %[[GW]],
module attributes {kiln.mesh = {data = 2 : i64},
    kiln.train = #kiln.train<batch = 2, seq = 4, zero = 2, optimizer = adamw,
    beta1 = 0.9 : f32, beta2 = 0.95 : f32, epsilon = 1.0e-08 : f32,
    weight_decay = 0.1 : f32>} {
  func.func @step(
      %w: tensor<4x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"},
      %x: tensor<4x8xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>},
          tensor<4x8xf32> {kiln.role = #kiln.role<grad>, kiln.name = "w"}) {
    %0 = kiln.mul %w, %x : tensor<4x8xf32>
    %1 = kiln.reduce_sum %0 dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
    return %1, %x : tensor<f32>, tensor<4x8xf32>
  }
}

// -----

// Tests ZeRO-3: the parameter argument is this rank's slice too (@step
// gathers it where it reads it, --kiln-gather-params), so the update runs
// on it in place: no local_shard, no all-gather.
// CHECK-LABEL: func.func @update
// CHECK-SAME: %[[W:[^:]*]]: tensor<16xf32> {kiln.name = "w", kiln.param_kind = "weight", kiln.role = #kiln.role<param>, kiln.shard_axis = "data", kiln.weight_decay = 1.000000e-01 : f32, kiln.whole_shape = array<i64: 4, 8>}
// CHECK-SAME: %[[GW:[^:]*]]: tensor<16xf32> {kiln.name = "w", kiln.role = #kiln.role<grad>, kiln.shard_axis = "data", kiln.whole_shape = array<i64: 4, 8>}
// CHECK-NOT: kiln.local_shard
// CHECK: %[[P:.*]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} = kiln.adam %[[W]], %[[GW]],
// CHECK-NOT: kiln.all_gather
// CHECK: return {{.*}}, %[[P]],
module attributes {kiln.mesh = {data = 2 : i64},
    kiln.train = #kiln.train<batch = 2, seq = 4, zero = 3, optimizer = adamw,
    beta1 = 0.9 : f32, beta2 = 0.95 : f32, epsilon = 1.0e-08 : f32,
    weight_decay = 0.1 : f32>} {
  func.func @step(
      %w: tensor<4x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"},
      %x: tensor<4x8xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>},
          tensor<4x8xf32> {kiln.role = #kiln.role<grad>, kiln.name = "w"}) {
    %0 = kiln.mul %w, %x : tensor<4x8xf32>
    %1 = kiln.reduce_sum %0 dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
    return %1, %x : tensor<f32>, tensor<4x8xf32>
  }
}
