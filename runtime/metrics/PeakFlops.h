//===- PeakFlops.h - Peak FLOP/s per GPU model, for MFU -------------------===//
//
// Model FLOPs utilization is the useful work of a step (the artifact's
// flops_per_step, counted from the model, not from what the kernels happen
// to execute) divided by what the device could do in that time:
//
//   mfu = flops_per_step / step_seconds / peak_flops_per_second
//
// The peak depends on the GPU and on the precision of the matmuls, so this
// file keeps a table of dense (no 2:4 sparsity) tensor-core peaks from
// NVIDIA's datasheets, looked up by the device name CUDA reports
// (cudaDeviceProp::name / cuDeviceGetName, e.g. "NVIDIA H100 80GB HBM3").
// A CPU, or a GPU missing from the table, has no entry: MFU is then reported
// only when the user gives the peak (--peak-tflops).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_METRICS_PEAKFLOPS_H
#define KILN_RUNTIME_METRICS_PEAKFLOPS_H

#include <optional>
#include <string_view>

namespace kiln::rt {

// The precision the step's matmuls run in (bf16 and fp16 use the same
// tensor-core rate on every listed GPU but are kept apart for clarity).
enum class ComputePrecision { kBf16, kFp16, kTf32, kFp32 };

// "bf16", "fp16", "tf32", "fp32" (also "f32", "f16"); nullopt otherwise.
std::optional<ComputePrecision> computePrecisionFromName(std::string_view name);

// Dense peak FLOP/s of one GPU model, and its memory bandwidth (the
// roofline's other roof, for kiln-run --profile).
struct GpuPeakFlops {
  const char *model; // "H100 SXM"
  double bf16;       // tensor core, FP32 accumulate
  double fp16;       // tensor core, FP32 accumulate
  double tf32;       // tensor core
  double fp32;       // CUDA cores, no tensor cores
  double memoryBandwidth; // bytes/s of device memory (HBM or GDDR)
  double forPrecision(ComputePrecision precision) const;
};

// The table entry for a CUDA device name, or null when the model is not
// listed. Matching is by whole words of the name, case-insensitive, so
// "NVIDIA L40S" is not taken for an L4 nor a 4090 laptop part for an RTX 4090.
const GpuPeakFlops *findGpuPeakFlops(std::string_view cudaDeviceName);

// The peak to divide by: the user's --peak-tflops when given (it wins, so a
// user can correct the table or set a CPU's peak), else the table entry for
// `cudaDeviceName` (nullopt for the CPU backend), else nullopt.
std::optional<double>
resolvePeakFlopsPerSecond(std::optional<double> userPeakTflops,
                          std::optional<std::string_view> cudaDeviceName,
                          ComputePrecision precision);

// Bytes/s of device memory: the user's --peak-gbps when given, else the
// table's for `cudaDeviceName`, else nullopt (the CPU backend included).
std::optional<double>
resolvePeakMemoryBandwidth(std::optional<double> userPeakGbps,
                           std::optional<std::string_view> cudaDeviceName);

// flopsPerStep / stepSeconds / peak; nullopt when the peak is unknown or a
// time or peak is not positive.
std::optional<double> modelFlopsUtilization(double flopsPerStep,
                                            double stepSeconds,
                                            std::optional<double> peakFlops);

} // namespace kiln::rt

#endif // KILN_RUNTIME_METRICS_PEAKFLOPS_H
