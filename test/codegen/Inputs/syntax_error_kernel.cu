// Not valid CUDA: nvrtc_check must print NVRTC's log and fail.
extern "C" __global__ void k_broken(float* out) {
  out[0] = undeclared_name;
}
