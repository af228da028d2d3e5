// Attention kernel variants for the NVRTC compile check (cuda-kernels-attention
// in CMakeLists.txt; emit_cuda_kernels writes their CUDA kernels). Written by
// hand from one template: for bf16 (tensor cores) and f32 (CUDA cores), head
// dims 64, 80, 96, 128, 192 and 256: 4 query heads on 2 kv heads, T = 37,
// S = 53, score s - slope[h] * |i - j| with a learned slope (a float capture
// with a gradient), mask j < len[b] and j <= i (per-sample length, causal);
// then one plain bf16 attention with no regions and Dv != D.

func.func @attention_bf16_d64(%q: tensor<2x4x37x64xbf16>, %k: tensor<2x2x53x64xbf16>, %v: tensor<2x2x53x64xbf16>, %dout: tensor<2x4x37x64xbf16>,
    %slope: tensor<4xf32>, %len: tensor<2xi32>) -> (tensor<2x4x37x64xbf16>, tensor<2x4x37x64xbf16>, tensor<2x2x53x64xbf16>, tensor<2x2x53x64xbf16>, tensor<4xf32>) {
  %out, %lse = kiln.attention %q, %k, %v captures(%slope, %len) {scale = 0.125 : f32}
      : (tensor<2x4x37x64xbf16>, tensor<2x2x53x64xbf16>, tensor<2x2x53x64xbf16>, tensor<4xf32>, tensor<2xi32>) -> (tensor<2x4x37x64xbf16>, tensor<2x4x37xf32>)
    score(%s: f32, %b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %sl = tensor.extract %c0[%h] : tensor<4xf32>
      %ii = arith.index_cast %i : index to i64
      %jj = arith.index_cast %j : index to i64
      %dij = arith.subi %ii, %jj : i64
      %df = arith.sitofp %dij : i64 to f32
      %ad = math.absf %df : f32
      %pen = arith.mulf %sl, %ad : f32
      %r = arith.subf %s, %pen : f32
      kiln.yield %r : f32
    }
    mask(%b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %n = tensor.extract %c1[%b] : tensor<2xi32>
      %jj = arith.index_cast %j : index to i32
      %inlen = arith.cmpi slt, %jj, %n : i32
      %causal = arith.cmpi ule, %j, %i : index
      %keep = arith.andi %inlen, %causal : i1
      kiln.yield %keep : i1
    }
  %dq, %dk, %dv, %dslope = kiln.attention_grad %q, %k, %v, %out, %lse, %dout captures(%slope, %len) {scale = 0.125 : f32}
      : (tensor<2x4x37x64xbf16>, tensor<2x2x53x64xbf16>, tensor<2x2x53x64xbf16>, tensor<2x4x37x64xbf16>, tensor<2x4x37xf32>, tensor<2x4x37x64xbf16>, tensor<4xf32>, tensor<2xi32>) -> (tensor<2x4x37x64xbf16>, tensor<2x2x53x64xbf16>, tensor<2x2x53x64xbf16>, tensor<4xf32>)
    score(%s: f32, %b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %sl = tensor.extract %c0[%h] : tensor<4xf32>
      %ii = arith.index_cast %i : index to i64
      %jj = arith.index_cast %j : index to i64
      %dij = arith.subi %ii, %jj : i64
      %df = arith.sitofp %dij : i64 to f32
      %ad = math.absf %df : f32
      %pen = arith.mulf %sl, %ad : f32
      %r = arith.subf %s, %pen : f32
      kiln.yield %r : f32
    }
    mask(%b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %n = tensor.extract %c1[%b] : tensor<2xi32>
      %jj = arith.index_cast %j : index to i32
      %inlen = arith.cmpi slt, %jj, %n : i32
      %causal = arith.cmpi ule, %j, %i : index
      %keep = arith.andi %inlen, %causal : i1
      kiln.yield %keep : i1
    }
  return %out, %dq, %dk, %dv, %dslope : tensor<2x4x37x64xbf16>, tensor<2x4x37x64xbf16>, tensor<2x2x53x64xbf16>, tensor<2x2x53x64xbf16>, tensor<4xf32>
}

func.func @attention_bf16_d80(%q: tensor<2x4x37x80xbf16>, %k: tensor<2x2x53x80xbf16>, %v: tensor<2x2x53x80xbf16>, %dout: tensor<2x4x37x80xbf16>,
    %slope: tensor<4xf32>, %len: tensor<2xi32>) -> (tensor<2x4x37x80xbf16>, tensor<2x4x37x80xbf16>, tensor<2x2x53x80xbf16>, tensor<2x2x53x80xbf16>, tensor<4xf32>) {
  %out, %lse = kiln.attention %q, %k, %v captures(%slope, %len) {scale = 0.125 : f32}
      : (tensor<2x4x37x80xbf16>, tensor<2x2x53x80xbf16>, tensor<2x2x53x80xbf16>, tensor<4xf32>, tensor<2xi32>) -> (tensor<2x4x37x80xbf16>, tensor<2x4x37xf32>)
    score(%s: f32, %b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %sl = tensor.extract %c0[%h] : tensor<4xf32>
      %ii = arith.index_cast %i : index to i64
      %jj = arith.index_cast %j : index to i64
      %dij = arith.subi %ii, %jj : i64
      %df = arith.sitofp %dij : i64 to f32
      %ad = math.absf %df : f32
      %pen = arith.mulf %sl, %ad : f32
      %r = arith.subf %s, %pen : f32
      kiln.yield %r : f32
    }
    mask(%b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %n = tensor.extract %c1[%b] : tensor<2xi32>
      %jj = arith.index_cast %j : index to i32
      %inlen = arith.cmpi slt, %jj, %n : i32
      %causal = arith.cmpi ule, %j, %i : index
      %keep = arith.andi %inlen, %causal : i1
      kiln.yield %keep : i1
    }
  %dq, %dk, %dv, %dslope = kiln.attention_grad %q, %k, %v, %out, %lse, %dout captures(%slope, %len) {scale = 0.125 : f32}
      : (tensor<2x4x37x80xbf16>, tensor<2x2x53x80xbf16>, tensor<2x2x53x80xbf16>, tensor<2x4x37x80xbf16>, tensor<2x4x37xf32>, tensor<2x4x37x80xbf16>, tensor<4xf32>, tensor<2xi32>) -> (tensor<2x4x37x80xbf16>, tensor<2x2x53x80xbf16>, tensor<2x2x53x80xbf16>, tensor<4xf32>)
    score(%s: f32, %b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %sl = tensor.extract %c0[%h] : tensor<4xf32>
      %ii = arith.index_cast %i : index to i64
      %jj = arith.index_cast %j : index to i64
      %dij = arith.subi %ii, %jj : i64
      %df = arith.sitofp %dij : i64 to f32
      %ad = math.absf %df : f32
      %pen = arith.mulf %sl, %ad : f32
      %r = arith.subf %s, %pen : f32
      kiln.yield %r : f32
    }
    mask(%b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %n = tensor.extract %c1[%b] : tensor<2xi32>
      %jj = arith.index_cast %j : index to i32
      %inlen = arith.cmpi slt, %jj, %n : i32
      %causal = arith.cmpi ule, %j, %i : index
      %keep = arith.andi %inlen, %causal : i1
      kiln.yield %keep : i1
    }
  return %out, %dq, %dk, %dv, %dslope : tensor<2x4x37x80xbf16>, tensor<2x4x37x80xbf16>, tensor<2x2x53x80xbf16>, tensor<2x2x53x80xbf16>, tensor<4xf32>
}

func.func @attention_bf16_d96(%q: tensor<2x4x37x96xbf16>, %k: tensor<2x2x53x96xbf16>, %v: tensor<2x2x53x96xbf16>, %dout: tensor<2x4x37x96xbf16>,
    %slope: tensor<4xf32>, %len: tensor<2xi32>) -> (tensor<2x4x37x96xbf16>, tensor<2x4x37x96xbf16>, tensor<2x2x53x96xbf16>, tensor<2x2x53x96xbf16>, tensor<4xf32>) {
  %out, %lse = kiln.attention %q, %k, %v captures(%slope, %len) {scale = 0.125 : f32}
      : (tensor<2x4x37x96xbf16>, tensor<2x2x53x96xbf16>, tensor<2x2x53x96xbf16>, tensor<4xf32>, tensor<2xi32>) -> (tensor<2x4x37x96xbf16>, tensor<2x4x37xf32>)
    score(%s: f32, %b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %sl = tensor.extract %c0[%h] : tensor<4xf32>
      %ii = arith.index_cast %i : index to i64
      %jj = arith.index_cast %j : index to i64
      %dij = arith.subi %ii, %jj : i64
      %df = arith.sitofp %dij : i64 to f32
      %ad = math.absf %df : f32
      %pen = arith.mulf %sl, %ad : f32
      %r = arith.subf %s, %pen : f32
      kiln.yield %r : f32
    }
    mask(%b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %n = tensor.extract %c1[%b] : tensor<2xi32>
      %jj = arith.index_cast %j : index to i32
      %inlen = arith.cmpi slt, %jj, %n : i32
      %causal = arith.cmpi ule, %j, %i : index
      %keep = arith.andi %inlen, %causal : i1
      kiln.yield %keep : i1
    }
  %dq, %dk, %dv, %dslope = kiln.attention_grad %q, %k, %v, %out, %lse, %dout captures(%slope, %len) {scale = 0.125 : f32}
      : (tensor<2x4x37x96xbf16>, tensor<2x2x53x96xbf16>, tensor<2x2x53x96xbf16>, tensor<2x4x37x96xbf16>, tensor<2x4x37xf32>, tensor<2x4x37x96xbf16>, tensor<4xf32>, tensor<2xi32>) -> (tensor<2x4x37x96xbf16>, tensor<2x2x53x96xbf16>, tensor<2x2x53x96xbf16>, tensor<4xf32>)
    score(%s: f32, %b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %sl = tensor.extract %c0[%h] : tensor<4xf32>
      %ii = arith.index_cast %i : index to i64
      %jj = arith.index_cast %j : index to i64
      %dij = arith.subi %ii, %jj : i64
      %df = arith.sitofp %dij : i64 to f32
      %ad = math.absf %df : f32
      %pen = arith.mulf %sl, %ad : f32
      %r = arith.subf %s, %pen : f32
      kiln.yield %r : f32
    }
    mask(%b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %n = tensor.extract %c1[%b] : tensor<2xi32>
      %jj = arith.index_cast %j : index to i32
      %inlen = arith.cmpi slt, %jj, %n : i32
      %causal = arith.cmpi ule, %j, %i : index
      %keep = arith.andi %inlen, %causal : i1
      kiln.yield %keep : i1
    }
  return %out, %dq, %dk, %dv, %dslope : tensor<2x4x37x96xbf16>, tensor<2x4x37x96xbf16>, tensor<2x2x53x96xbf16>, tensor<2x2x53x96xbf16>, tensor<4xf32>
}

func.func @attention_bf16_d128(%q: tensor<2x4x37x128xbf16>, %k: tensor<2x2x53x128xbf16>, %v: tensor<2x2x53x128xbf16>, %dout: tensor<2x4x37x128xbf16>,
    %slope: tensor<4xf32>, %len: tensor<2xi32>) -> (tensor<2x4x37x128xbf16>, tensor<2x4x37x128xbf16>, tensor<2x2x53x128xbf16>, tensor<2x2x53x128xbf16>, tensor<4xf32>) {
  %out, %lse = kiln.attention %q, %k, %v captures(%slope, %len) {scale = 0.125 : f32}
      : (tensor<2x4x37x128xbf16>, tensor<2x2x53x128xbf16>, tensor<2x2x53x128xbf16>, tensor<4xf32>, tensor<2xi32>) -> (tensor<2x4x37x128xbf16>, tensor<2x4x37xf32>)
    score(%s: f32, %b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %sl = tensor.extract %c0[%h] : tensor<4xf32>
      %ii = arith.index_cast %i : index to i64
      %jj = arith.index_cast %j : index to i64
      %dij = arith.subi %ii, %jj : i64
      %df = arith.sitofp %dij : i64 to f32
      %ad = math.absf %df : f32
      %pen = arith.mulf %sl, %ad : f32
      %r = arith.subf %s, %pen : f32
      kiln.yield %r : f32
    }
    mask(%b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %n = tensor.extract %c1[%b] : tensor<2xi32>
      %jj = arith.index_cast %j : index to i32
      %inlen = arith.cmpi slt, %jj, %n : i32
      %causal = arith.cmpi ule, %j, %i : index
      %keep = arith.andi %inlen, %causal : i1
      kiln.yield %keep : i1
    }
  %dq, %dk, %dv, %dslope = kiln.attention_grad %q, %k, %v, %out, %lse, %dout captures(%slope, %len) {scale = 0.125 : f32}
      : (tensor<2x4x37x128xbf16>, tensor<2x2x53x128xbf16>, tensor<2x2x53x128xbf16>, tensor<2x4x37x128xbf16>, tensor<2x4x37xf32>, tensor<2x4x37x128xbf16>, tensor<4xf32>, tensor<2xi32>) -> (tensor<2x4x37x128xbf16>, tensor<2x2x53x128xbf16>, tensor<2x2x53x128xbf16>, tensor<4xf32>)
    score(%s: f32, %b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %sl = tensor.extract %c0[%h] : tensor<4xf32>
      %ii = arith.index_cast %i : index to i64
      %jj = arith.index_cast %j : index to i64
      %dij = arith.subi %ii, %jj : i64
      %df = arith.sitofp %dij : i64 to f32
      %ad = math.absf %df : f32
      %pen = arith.mulf %sl, %ad : f32
      %r = arith.subf %s, %pen : f32
      kiln.yield %r : f32
    }
    mask(%b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %n = tensor.extract %c1[%b] : tensor<2xi32>
      %jj = arith.index_cast %j : index to i32
      %inlen = arith.cmpi slt, %jj, %n : i32
      %causal = arith.cmpi ule, %j, %i : index
      %keep = arith.andi %inlen, %causal : i1
      kiln.yield %keep : i1
    }
  return %out, %dq, %dk, %dv, %dslope : tensor<2x4x37x128xbf16>, tensor<2x4x37x128xbf16>, tensor<2x2x53x128xbf16>, tensor<2x2x53x128xbf16>, tensor<4xf32>
}

func.func @attention_bf16_d192(%q: tensor<2x4x37x192xbf16>, %k: tensor<2x2x53x192xbf16>, %v: tensor<2x2x53x192xbf16>, %dout: tensor<2x4x37x192xbf16>,
    %slope: tensor<4xf32>, %len: tensor<2xi32>) -> (tensor<2x4x37x192xbf16>, tensor<2x4x37x192xbf16>, tensor<2x2x53x192xbf16>, tensor<2x2x53x192xbf16>, tensor<4xf32>) {
  %out, %lse = kiln.attention %q, %k, %v captures(%slope, %len) {scale = 0.125 : f32}
      : (tensor<2x4x37x192xbf16>, tensor<2x2x53x192xbf16>, tensor<2x2x53x192xbf16>, tensor<4xf32>, tensor<2xi32>) -> (tensor<2x4x37x192xbf16>, tensor<2x4x37xf32>)
    score(%s: f32, %b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %sl = tensor.extract %c0[%h] : tensor<4xf32>
      %ii = arith.index_cast %i : index to i64
      %jj = arith.index_cast %j : index to i64
      %dij = arith.subi %ii, %jj : i64
      %df = arith.sitofp %dij : i64 to f32
      %ad = math.absf %df : f32
      %pen = arith.mulf %sl, %ad : f32
      %r = arith.subf %s, %pen : f32
      kiln.yield %r : f32
    }
    mask(%b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %n = tensor.extract %c1[%b] : tensor<2xi32>
      %jj = arith.index_cast %j : index to i32
      %inlen = arith.cmpi slt, %jj, %n : i32
      %causal = arith.cmpi ule, %j, %i : index
      %keep = arith.andi %inlen, %causal : i1
      kiln.yield %keep : i1
    }
  %dq, %dk, %dv, %dslope = kiln.attention_grad %q, %k, %v, %out, %lse, %dout captures(%slope, %len) {scale = 0.125 : f32}
      : (tensor<2x4x37x192xbf16>, tensor<2x2x53x192xbf16>, tensor<2x2x53x192xbf16>, tensor<2x4x37x192xbf16>, tensor<2x4x37xf32>, tensor<2x4x37x192xbf16>, tensor<4xf32>, tensor<2xi32>) -> (tensor<2x4x37x192xbf16>, tensor<2x2x53x192xbf16>, tensor<2x2x53x192xbf16>, tensor<4xf32>)
    score(%s: f32, %b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %sl = tensor.extract %c0[%h] : tensor<4xf32>
      %ii = arith.index_cast %i : index to i64
      %jj = arith.index_cast %j : index to i64
      %dij = arith.subi %ii, %jj : i64
      %df = arith.sitofp %dij : i64 to f32
      %ad = math.absf %df : f32
      %pen = arith.mulf %sl, %ad : f32
      %r = arith.subf %s, %pen : f32
      kiln.yield %r : f32
    }
    mask(%b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %n = tensor.extract %c1[%b] : tensor<2xi32>
      %jj = arith.index_cast %j : index to i32
      %inlen = arith.cmpi slt, %jj, %n : i32
      %causal = arith.cmpi ule, %j, %i : index
      %keep = arith.andi %inlen, %causal : i1
      kiln.yield %keep : i1
    }
  return %out, %dq, %dk, %dv, %dslope : tensor<2x4x37x192xbf16>, tensor<2x4x37x192xbf16>, tensor<2x2x53x192xbf16>, tensor<2x2x53x192xbf16>, tensor<4xf32>
}

func.func @attention_bf16_d256(%q: tensor<2x4x37x256xbf16>, %k: tensor<2x2x53x256xbf16>, %v: tensor<2x2x53x256xbf16>, %dout: tensor<2x4x37x256xbf16>,
    %slope: tensor<4xf32>, %len: tensor<2xi32>) -> (tensor<2x4x37x256xbf16>, tensor<2x4x37x256xbf16>, tensor<2x2x53x256xbf16>, tensor<2x2x53x256xbf16>, tensor<4xf32>) {
  %out, %lse = kiln.attention %q, %k, %v captures(%slope, %len) {scale = 0.125 : f32}
      : (tensor<2x4x37x256xbf16>, tensor<2x2x53x256xbf16>, tensor<2x2x53x256xbf16>, tensor<4xf32>, tensor<2xi32>) -> (tensor<2x4x37x256xbf16>, tensor<2x4x37xf32>)
    score(%s: f32, %b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %sl = tensor.extract %c0[%h] : tensor<4xf32>
      %ii = arith.index_cast %i : index to i64
      %jj = arith.index_cast %j : index to i64
      %dij = arith.subi %ii, %jj : i64
      %df = arith.sitofp %dij : i64 to f32
      %ad = math.absf %df : f32
      %pen = arith.mulf %sl, %ad : f32
      %r = arith.subf %s, %pen : f32
      kiln.yield %r : f32
    }
    mask(%b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %n = tensor.extract %c1[%b] : tensor<2xi32>
      %jj = arith.index_cast %j : index to i32
      %inlen = arith.cmpi slt, %jj, %n : i32
      %causal = arith.cmpi ule, %j, %i : index
      %keep = arith.andi %inlen, %causal : i1
      kiln.yield %keep : i1
    }
  %dq, %dk, %dv, %dslope = kiln.attention_grad %q, %k, %v, %out, %lse, %dout captures(%slope, %len) {scale = 0.125 : f32}
      : (tensor<2x4x37x256xbf16>, tensor<2x2x53x256xbf16>, tensor<2x2x53x256xbf16>, tensor<2x4x37x256xbf16>, tensor<2x4x37xf32>, tensor<2x4x37x256xbf16>, tensor<4xf32>, tensor<2xi32>) -> (tensor<2x4x37x256xbf16>, tensor<2x2x53x256xbf16>, tensor<2x2x53x256xbf16>, tensor<4xf32>)
    score(%s: f32, %b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %sl = tensor.extract %c0[%h] : tensor<4xf32>
      %ii = arith.index_cast %i : index to i64
      %jj = arith.index_cast %j : index to i64
      %dij = arith.subi %ii, %jj : i64
      %df = arith.sitofp %dij : i64 to f32
      %ad = math.absf %df : f32
      %pen = arith.mulf %sl, %ad : f32
      %r = arith.subf %s, %pen : f32
      kiln.yield %r : f32
    }
    mask(%b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %n = tensor.extract %c1[%b] : tensor<2xi32>
      %jj = arith.index_cast %j : index to i32
      %inlen = arith.cmpi slt, %jj, %n : i32
      %causal = arith.cmpi ule, %j, %i : index
      %keep = arith.andi %inlen, %causal : i1
      kiln.yield %keep : i1
    }
  return %out, %dq, %dk, %dv, %dslope : tensor<2x4x37x256xbf16>, tensor<2x4x37x256xbf16>, tensor<2x2x53x256xbf16>, tensor<2x2x53x256xbf16>, tensor<4xf32>
}

func.func @attention_f32_d64(%q: tensor<2x4x37x64xf32>, %k: tensor<2x2x53x64xf32>, %v: tensor<2x2x53x64xf32>, %dout: tensor<2x4x37x64xf32>,
    %slope: tensor<4xf32>, %len: tensor<2xi32>) -> (tensor<2x4x37x64xf32>, tensor<2x4x37x64xf32>, tensor<2x2x53x64xf32>, tensor<2x2x53x64xf32>, tensor<4xf32>) {
  %out, %lse = kiln.attention %q, %k, %v captures(%slope, %len) {scale = 0.125 : f32}
      : (tensor<2x4x37x64xf32>, tensor<2x2x53x64xf32>, tensor<2x2x53x64xf32>, tensor<4xf32>, tensor<2xi32>) -> (tensor<2x4x37x64xf32>, tensor<2x4x37xf32>)
    score(%s: f32, %b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %sl = tensor.extract %c0[%h] : tensor<4xf32>
      %ii = arith.index_cast %i : index to i64
      %jj = arith.index_cast %j : index to i64
      %dij = arith.subi %ii, %jj : i64
      %df = arith.sitofp %dij : i64 to f32
      %ad = math.absf %df : f32
      %pen = arith.mulf %sl, %ad : f32
      %r = arith.subf %s, %pen : f32
      kiln.yield %r : f32
    }
    mask(%b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %n = tensor.extract %c1[%b] : tensor<2xi32>
      %jj = arith.index_cast %j : index to i32
      %inlen = arith.cmpi slt, %jj, %n : i32
      %causal = arith.cmpi ule, %j, %i : index
      %keep = arith.andi %inlen, %causal : i1
      kiln.yield %keep : i1
    }
  %dq, %dk, %dv, %dslope = kiln.attention_grad %q, %k, %v, %out, %lse, %dout captures(%slope, %len) {scale = 0.125 : f32}
      : (tensor<2x4x37x64xf32>, tensor<2x2x53x64xf32>, tensor<2x2x53x64xf32>, tensor<2x4x37x64xf32>, tensor<2x4x37xf32>, tensor<2x4x37x64xf32>, tensor<4xf32>, tensor<2xi32>) -> (tensor<2x4x37x64xf32>, tensor<2x2x53x64xf32>, tensor<2x2x53x64xf32>, tensor<4xf32>)
    score(%s: f32, %b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %sl = tensor.extract %c0[%h] : tensor<4xf32>
      %ii = arith.index_cast %i : index to i64
      %jj = arith.index_cast %j : index to i64
      %dij = arith.subi %ii, %jj : i64
      %df = arith.sitofp %dij : i64 to f32
      %ad = math.absf %df : f32
      %pen = arith.mulf %sl, %ad : f32
      %r = arith.subf %s, %pen : f32
      kiln.yield %r : f32
    }
    mask(%b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %n = tensor.extract %c1[%b] : tensor<2xi32>
      %jj = arith.index_cast %j : index to i32
      %inlen = arith.cmpi slt, %jj, %n : i32
      %causal = arith.cmpi ule, %j, %i : index
      %keep = arith.andi %inlen, %causal : i1
      kiln.yield %keep : i1
    }
  return %out, %dq, %dk, %dv, %dslope : tensor<2x4x37x64xf32>, tensor<2x4x37x64xf32>, tensor<2x2x53x64xf32>, tensor<2x2x53x64xf32>, tensor<4xf32>
}

func.func @attention_f32_d80(%q: tensor<2x4x37x80xf32>, %k: tensor<2x2x53x80xf32>, %v: tensor<2x2x53x80xf32>, %dout: tensor<2x4x37x80xf32>,
    %slope: tensor<4xf32>, %len: tensor<2xi32>) -> (tensor<2x4x37x80xf32>, tensor<2x4x37x80xf32>, tensor<2x2x53x80xf32>, tensor<2x2x53x80xf32>, tensor<4xf32>) {
  %out, %lse = kiln.attention %q, %k, %v captures(%slope, %len) {scale = 0.125 : f32}
      : (tensor<2x4x37x80xf32>, tensor<2x2x53x80xf32>, tensor<2x2x53x80xf32>, tensor<4xf32>, tensor<2xi32>) -> (tensor<2x4x37x80xf32>, tensor<2x4x37xf32>)
    score(%s: f32, %b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %sl = tensor.extract %c0[%h] : tensor<4xf32>
      %ii = arith.index_cast %i : index to i64
      %jj = arith.index_cast %j : index to i64
      %dij = arith.subi %ii, %jj : i64
      %df = arith.sitofp %dij : i64 to f32
      %ad = math.absf %df : f32
      %pen = arith.mulf %sl, %ad : f32
      %r = arith.subf %s, %pen : f32
      kiln.yield %r : f32
    }
    mask(%b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %n = tensor.extract %c1[%b] : tensor<2xi32>
      %jj = arith.index_cast %j : index to i32
      %inlen = arith.cmpi slt, %jj, %n : i32
      %causal = arith.cmpi ule, %j, %i : index
      %keep = arith.andi %inlen, %causal : i1
      kiln.yield %keep : i1
    }
  %dq, %dk, %dv, %dslope = kiln.attention_grad %q, %k, %v, %out, %lse, %dout captures(%slope, %len) {scale = 0.125 : f32}
      : (tensor<2x4x37x80xf32>, tensor<2x2x53x80xf32>, tensor<2x2x53x80xf32>, tensor<2x4x37x80xf32>, tensor<2x4x37xf32>, tensor<2x4x37x80xf32>, tensor<4xf32>, tensor<2xi32>) -> (tensor<2x4x37x80xf32>, tensor<2x2x53x80xf32>, tensor<2x2x53x80xf32>, tensor<4xf32>)
    score(%s: f32, %b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %sl = tensor.extract %c0[%h] : tensor<4xf32>
      %ii = arith.index_cast %i : index to i64
      %jj = arith.index_cast %j : index to i64
      %dij = arith.subi %ii, %jj : i64
      %df = arith.sitofp %dij : i64 to f32
      %ad = math.absf %df : f32
      %pen = arith.mulf %sl, %ad : f32
      %r = arith.subf %s, %pen : f32
      kiln.yield %r : f32
    }
    mask(%b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %n = tensor.extract %c1[%b] : tensor<2xi32>
      %jj = arith.index_cast %j : index to i32
      %inlen = arith.cmpi slt, %jj, %n : i32
      %causal = arith.cmpi ule, %j, %i : index
      %keep = arith.andi %inlen, %causal : i1
      kiln.yield %keep : i1
    }
  return %out, %dq, %dk, %dv, %dslope : tensor<2x4x37x80xf32>, tensor<2x4x37x80xf32>, tensor<2x2x53x80xf32>, tensor<2x2x53x80xf32>, tensor<4xf32>
}

func.func @attention_f32_d96(%q: tensor<2x4x37x96xf32>, %k: tensor<2x2x53x96xf32>, %v: tensor<2x2x53x96xf32>, %dout: tensor<2x4x37x96xf32>,
    %slope: tensor<4xf32>, %len: tensor<2xi32>) -> (tensor<2x4x37x96xf32>, tensor<2x4x37x96xf32>, tensor<2x2x53x96xf32>, tensor<2x2x53x96xf32>, tensor<4xf32>) {
  %out, %lse = kiln.attention %q, %k, %v captures(%slope, %len) {scale = 0.125 : f32}
      : (tensor<2x4x37x96xf32>, tensor<2x2x53x96xf32>, tensor<2x2x53x96xf32>, tensor<4xf32>, tensor<2xi32>) -> (tensor<2x4x37x96xf32>, tensor<2x4x37xf32>)
    score(%s: f32, %b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %sl = tensor.extract %c0[%h] : tensor<4xf32>
      %ii = arith.index_cast %i : index to i64
      %jj = arith.index_cast %j : index to i64
      %dij = arith.subi %ii, %jj : i64
      %df = arith.sitofp %dij : i64 to f32
      %ad = math.absf %df : f32
      %pen = arith.mulf %sl, %ad : f32
      %r = arith.subf %s, %pen : f32
      kiln.yield %r : f32
    }
    mask(%b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %n = tensor.extract %c1[%b] : tensor<2xi32>
      %jj = arith.index_cast %j : index to i32
      %inlen = arith.cmpi slt, %jj, %n : i32
      %causal = arith.cmpi ule, %j, %i : index
      %keep = arith.andi %inlen, %causal : i1
      kiln.yield %keep : i1
    }
  %dq, %dk, %dv, %dslope = kiln.attention_grad %q, %k, %v, %out, %lse, %dout captures(%slope, %len) {scale = 0.125 : f32}
      : (tensor<2x4x37x96xf32>, tensor<2x2x53x96xf32>, tensor<2x2x53x96xf32>, tensor<2x4x37x96xf32>, tensor<2x4x37xf32>, tensor<2x4x37x96xf32>, tensor<4xf32>, tensor<2xi32>) -> (tensor<2x4x37x96xf32>, tensor<2x2x53x96xf32>, tensor<2x2x53x96xf32>, tensor<4xf32>)
    score(%s: f32, %b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %sl = tensor.extract %c0[%h] : tensor<4xf32>
      %ii = arith.index_cast %i : index to i64
      %jj = arith.index_cast %j : index to i64
      %dij = arith.subi %ii, %jj : i64
      %df = arith.sitofp %dij : i64 to f32
      %ad = math.absf %df : f32
      %pen = arith.mulf %sl, %ad : f32
      %r = arith.subf %s, %pen : f32
      kiln.yield %r : f32
    }
    mask(%b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %n = tensor.extract %c1[%b] : tensor<2xi32>
      %jj = arith.index_cast %j : index to i32
      %inlen = arith.cmpi slt, %jj, %n : i32
      %causal = arith.cmpi ule, %j, %i : index
      %keep = arith.andi %inlen, %causal : i1
      kiln.yield %keep : i1
    }
  return %out, %dq, %dk, %dv, %dslope : tensor<2x4x37x96xf32>, tensor<2x4x37x96xf32>, tensor<2x2x53x96xf32>, tensor<2x2x53x96xf32>, tensor<4xf32>
}

func.func @attention_f32_d128(%q: tensor<2x4x37x128xf32>, %k: tensor<2x2x53x128xf32>, %v: tensor<2x2x53x128xf32>, %dout: tensor<2x4x37x128xf32>,
    %slope: tensor<4xf32>, %len: tensor<2xi32>) -> (tensor<2x4x37x128xf32>, tensor<2x4x37x128xf32>, tensor<2x2x53x128xf32>, tensor<2x2x53x128xf32>, tensor<4xf32>) {
  %out, %lse = kiln.attention %q, %k, %v captures(%slope, %len) {scale = 0.125 : f32}
      : (tensor<2x4x37x128xf32>, tensor<2x2x53x128xf32>, tensor<2x2x53x128xf32>, tensor<4xf32>, tensor<2xi32>) -> (tensor<2x4x37x128xf32>, tensor<2x4x37xf32>)
    score(%s: f32, %b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %sl = tensor.extract %c0[%h] : tensor<4xf32>
      %ii = arith.index_cast %i : index to i64
      %jj = arith.index_cast %j : index to i64
      %dij = arith.subi %ii, %jj : i64
      %df = arith.sitofp %dij : i64 to f32
      %ad = math.absf %df : f32
      %pen = arith.mulf %sl, %ad : f32
      %r = arith.subf %s, %pen : f32
      kiln.yield %r : f32
    }
    mask(%b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %n = tensor.extract %c1[%b] : tensor<2xi32>
      %jj = arith.index_cast %j : index to i32
      %inlen = arith.cmpi slt, %jj, %n : i32
      %causal = arith.cmpi ule, %j, %i : index
      %keep = arith.andi %inlen, %causal : i1
      kiln.yield %keep : i1
    }
  %dq, %dk, %dv, %dslope = kiln.attention_grad %q, %k, %v, %out, %lse, %dout captures(%slope, %len) {scale = 0.125 : f32}
      : (tensor<2x4x37x128xf32>, tensor<2x2x53x128xf32>, tensor<2x2x53x128xf32>, tensor<2x4x37x128xf32>, tensor<2x4x37xf32>, tensor<2x4x37x128xf32>, tensor<4xf32>, tensor<2xi32>) -> (tensor<2x4x37x128xf32>, tensor<2x2x53x128xf32>, tensor<2x2x53x128xf32>, tensor<4xf32>)
    score(%s: f32, %b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %sl = tensor.extract %c0[%h] : tensor<4xf32>
      %ii = arith.index_cast %i : index to i64
      %jj = arith.index_cast %j : index to i64
      %dij = arith.subi %ii, %jj : i64
      %df = arith.sitofp %dij : i64 to f32
      %ad = math.absf %df : f32
      %pen = arith.mulf %sl, %ad : f32
      %r = arith.subf %s, %pen : f32
      kiln.yield %r : f32
    }
    mask(%b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %n = tensor.extract %c1[%b] : tensor<2xi32>
      %jj = arith.index_cast %j : index to i32
      %inlen = arith.cmpi slt, %jj, %n : i32
      %causal = arith.cmpi ule, %j, %i : index
      %keep = arith.andi %inlen, %causal : i1
      kiln.yield %keep : i1
    }
  return %out, %dq, %dk, %dv, %dslope : tensor<2x4x37x128xf32>, tensor<2x4x37x128xf32>, tensor<2x2x53x128xf32>, tensor<2x2x53x128xf32>, tensor<4xf32>
}

func.func @attention_f32_d192(%q: tensor<2x4x37x192xf32>, %k: tensor<2x2x53x192xf32>, %v: tensor<2x2x53x192xf32>, %dout: tensor<2x4x37x192xf32>,
    %slope: tensor<4xf32>, %len: tensor<2xi32>) -> (tensor<2x4x37x192xf32>, tensor<2x4x37x192xf32>, tensor<2x2x53x192xf32>, tensor<2x2x53x192xf32>, tensor<4xf32>) {
  %out, %lse = kiln.attention %q, %k, %v captures(%slope, %len) {scale = 0.125 : f32}
      : (tensor<2x4x37x192xf32>, tensor<2x2x53x192xf32>, tensor<2x2x53x192xf32>, tensor<4xf32>, tensor<2xi32>) -> (tensor<2x4x37x192xf32>, tensor<2x4x37xf32>)
    score(%s: f32, %b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %sl = tensor.extract %c0[%h] : tensor<4xf32>
      %ii = arith.index_cast %i : index to i64
      %jj = arith.index_cast %j : index to i64
      %dij = arith.subi %ii, %jj : i64
      %df = arith.sitofp %dij : i64 to f32
      %ad = math.absf %df : f32
      %pen = arith.mulf %sl, %ad : f32
      %r = arith.subf %s, %pen : f32
      kiln.yield %r : f32
    }
    mask(%b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %n = tensor.extract %c1[%b] : tensor<2xi32>
      %jj = arith.index_cast %j : index to i32
      %inlen = arith.cmpi slt, %jj, %n : i32
      %causal = arith.cmpi ule, %j, %i : index
      %keep = arith.andi %inlen, %causal : i1
      kiln.yield %keep : i1
    }
  %dq, %dk, %dv, %dslope = kiln.attention_grad %q, %k, %v, %out, %lse, %dout captures(%slope, %len) {scale = 0.125 : f32}
      : (tensor<2x4x37x192xf32>, tensor<2x2x53x192xf32>, tensor<2x2x53x192xf32>, tensor<2x4x37x192xf32>, tensor<2x4x37xf32>, tensor<2x4x37x192xf32>, tensor<4xf32>, tensor<2xi32>) -> (tensor<2x4x37x192xf32>, tensor<2x2x53x192xf32>, tensor<2x2x53x192xf32>, tensor<4xf32>)
    score(%s: f32, %b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %sl = tensor.extract %c0[%h] : tensor<4xf32>
      %ii = arith.index_cast %i : index to i64
      %jj = arith.index_cast %j : index to i64
      %dij = arith.subi %ii, %jj : i64
      %df = arith.sitofp %dij : i64 to f32
      %ad = math.absf %df : f32
      %pen = arith.mulf %sl, %ad : f32
      %r = arith.subf %s, %pen : f32
      kiln.yield %r : f32
    }
    mask(%b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %n = tensor.extract %c1[%b] : tensor<2xi32>
      %jj = arith.index_cast %j : index to i32
      %inlen = arith.cmpi slt, %jj, %n : i32
      %causal = arith.cmpi ule, %j, %i : index
      %keep = arith.andi %inlen, %causal : i1
      kiln.yield %keep : i1
    }
  return %out, %dq, %dk, %dv, %dslope : tensor<2x4x37x192xf32>, tensor<2x4x37x192xf32>, tensor<2x2x53x192xf32>, tensor<2x2x53x192xf32>, tensor<4xf32>
}

func.func @attention_f32_d256(%q: tensor<2x4x37x256xf32>, %k: tensor<2x2x53x256xf32>, %v: tensor<2x2x53x256xf32>, %dout: tensor<2x4x37x256xf32>,
    %slope: tensor<4xf32>, %len: tensor<2xi32>) -> (tensor<2x4x37x256xf32>, tensor<2x4x37x256xf32>, tensor<2x2x53x256xf32>, tensor<2x2x53x256xf32>, tensor<4xf32>) {
  %out, %lse = kiln.attention %q, %k, %v captures(%slope, %len) {scale = 0.125 : f32}
      : (tensor<2x4x37x256xf32>, tensor<2x2x53x256xf32>, tensor<2x2x53x256xf32>, tensor<4xf32>, tensor<2xi32>) -> (tensor<2x4x37x256xf32>, tensor<2x4x37xf32>)
    score(%s: f32, %b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %sl = tensor.extract %c0[%h] : tensor<4xf32>
      %ii = arith.index_cast %i : index to i64
      %jj = arith.index_cast %j : index to i64
      %dij = arith.subi %ii, %jj : i64
      %df = arith.sitofp %dij : i64 to f32
      %ad = math.absf %df : f32
      %pen = arith.mulf %sl, %ad : f32
      %r = arith.subf %s, %pen : f32
      kiln.yield %r : f32
    }
    mask(%b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %n = tensor.extract %c1[%b] : tensor<2xi32>
      %jj = arith.index_cast %j : index to i32
      %inlen = arith.cmpi slt, %jj, %n : i32
      %causal = arith.cmpi ule, %j, %i : index
      %keep = arith.andi %inlen, %causal : i1
      kiln.yield %keep : i1
    }
  %dq, %dk, %dv, %dslope = kiln.attention_grad %q, %k, %v, %out, %lse, %dout captures(%slope, %len) {scale = 0.125 : f32}
      : (tensor<2x4x37x256xf32>, tensor<2x2x53x256xf32>, tensor<2x2x53x256xf32>, tensor<2x4x37x256xf32>, tensor<2x4x37xf32>, tensor<2x4x37x256xf32>, tensor<4xf32>, tensor<2xi32>) -> (tensor<2x4x37x256xf32>, tensor<2x2x53x256xf32>, tensor<2x2x53x256xf32>, tensor<4xf32>)
    score(%s: f32, %b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %sl = tensor.extract %c0[%h] : tensor<4xf32>
      %ii = arith.index_cast %i : index to i64
      %jj = arith.index_cast %j : index to i64
      %dij = arith.subi %ii, %jj : i64
      %df = arith.sitofp %dij : i64 to f32
      %ad = math.absf %df : f32
      %pen = arith.mulf %sl, %ad : f32
      %r = arith.subf %s, %pen : f32
      kiln.yield %r : f32
    }
    mask(%b: index, %h: index, %i: index, %j: index, %c0: tensor<4xf32>, %c1: tensor<2xi32>) {
      %n = tensor.extract %c1[%b] : tensor<2xi32>
      %jj = arith.index_cast %j : index to i32
      %inlen = arith.cmpi slt, %jj, %n : i32
      %causal = arith.cmpi ule, %j, %i : index
      %keep = arith.andi %inlen, %causal : i1
      kiln.yield %keep : i1
    }
  return %out, %dq, %dk, %dv, %dslope : tensor<2x4x37x256xf32>, tensor<2x4x37x256xf32>, tensor<2x2x53x256xf32>, tensor<2x2x53x256xf32>, tensor<4xf32>
}

func.func @plain_bf16(%q: tensor<1x8x100x128xbf16>, %k: tensor<1x8x100x128xbf16>, %v: tensor<1x8x100x64xbf16>, %dout: tensor<1x8x100x64xbf16>) -> (tensor<1x8x100x64xbf16>, tensor<1x8x100x128xbf16>, tensor<1x8x100x128xbf16>, tensor<1x8x100x64xbf16>) {
  %out, %lse = kiln.attention %q, %k, %v {scale = 0.088 : f32} : (tensor<1x8x100x128xbf16>, tensor<1x8x100x128xbf16>, tensor<1x8x100x64xbf16>) -> (tensor<1x8x100x64xbf16>, tensor<1x8x100xf32>)
  %dq, %dk, %dv = kiln.attention_grad %q, %k, %v, %out, %lse, %dout {scale = 0.088 : f32}
      : (tensor<1x8x100x128xbf16>, tensor<1x8x100x128xbf16>, tensor<1x8x100x64xbf16>, tensor<1x8x100x64xbf16>, tensor<1x8x100xf32>, tensor<1x8x100x64xbf16>) -> (tensor<1x8x100x128xbf16>, tensor<1x8x100x128xbf16>, tensor<1x8x100x64xbf16>)
  return %out, %dq, %dk, %dv : tensor<1x8x100x64xbf16>, tensor<1x8x100x128xbf16>, tensor<1x8x100x128xbf16>, tensor<1x8x100x64xbf16>
}
