// A kernel with 64 values live at once: under --maxrregcount=16 ptxas must
// spill some of them to local memory (nvrtc_check's spill test).
extern "C" __global__ void k_spills(float* __restrict__ out, const float* __restrict__ in) {
  float v[64];
#pragma unroll
  for (int j = 0; j < 64; ++j)
    v[j] = in[threadIdx.x + 32 * j];
  float s = 0.0f;
#pragma unroll
  for (int j = 0; j < 64; ++j)
    s += v[j] * v[63 - j];
#pragma unroll
  for (int j = 0; j < 64; ++j)
    out[threadIdx.x + 32 * j] = v[j] * s;
}
