//===- PeakFlops.cpp - Peak FLOP/s per GPU model, for MFU -----------------===//
//
// Sources (NVIDIA datasheets list tensor-core rates "with sparsity"; the
// dense rate used here is half of that, as the datasheets' footnotes say):
//  - A100: "NVIDIA A100 Tensor Core GPU" datasheet (SXM and PCIe, 40/80 GB):
//    FP32 19.5, TF32 156, BF16/FP16 312 TFLOPS dense.
//  - H100 SXM / PCIe / NVL: "NVIDIA H100 Tensor Core GPU" datasheet:
//    SXM FP32 67, TF32 989*, BF16/FP16 1,979*; PCIe FP32 51, TF32 756*,
//    BF16/FP16 1,513*; NVL FP32 60, TF32 835*, BF16/FP16 1,671* (* sparse).
//  - H200 SXM / NVL: "NVIDIA H200 Tensor Core GPU" datasheet: SXM FP32 67,
//    TF32 989*, BF16/FP16 1,979*; NVL FP32 60, TF32 835*, BF16/FP16 1,671*.
//  - L4: "NVIDIA L4 Tensor Core GPU" datasheet: FP32 30.3, TF32 120*,
//    BF16/FP16 242*.
//  - RTX 4090: "NVIDIA Ada GPU Architecture" whitepaper, appendix table for
//    the GeForce RTX 4090: FP32 82.6, TF32 82.6, FP16/BF16 with FP32
//    accumulate 165.2 dense (GeForce parts run FP32 accumulation at half the
//    FP16-accumulate rate; training accumulates in FP32).
// Memory bandwidth, from the same datasheets: A100 40GB 1,555 GB/s, A100
// SXM 80GB 2,039, A100 PCIe 80GB 1,935; H100 SXM 3.35 TB/s, PCIe 2 TB/s, NVL
// 3.9 TB/s; H200 SXM and NVL 4.8 TB/s; L4 300 GB/s; RTX 4090 1,008 GB/s.
//
//===----------------------------------------------------------------------===//

#include "runtime/metrics/PeakFlops.h"

#include <cctype>
#include <string>
#include <vector>

namespace kiln::rt {

namespace {

constexpr double kTera = 1e12;

constexpr double kGiga = 1e9;

const GpuPeakFlops kA100Sxm40 = {"A100 SXM 40GB", 312 * kTera, 312 * kTera,
                                 156 * kTera, 19.5 * kTera, 1555 * kGiga};
const GpuPeakFlops kA100Sxm80 = {"A100 SXM 80GB", 312 * kTera, 312 * kTera,
                                 156 * kTera, 19.5 * kTera, 2039 * kGiga};
const GpuPeakFlops kA100Pcie40 = {"A100 PCIe 40GB", 312 * kTera, 312 * kTera,
                                  156 * kTera, 19.5 * kTera, 1555 * kGiga};
const GpuPeakFlops kA100Pcie80 = {"A100 PCIe 80GB", 312 * kTera, 312 * kTera,
                                  156 * kTera, 19.5 * kTera, 1935 * kGiga};
const GpuPeakFlops kH100Sxm = {"H100 SXM", 989.5 * kTera, 989.5 * kTera,
                               494.5 * kTera, 67 * kTera, 3350 * kGiga};
const GpuPeakFlops kH100Pcie = {"H100 PCIe", 756.5 * kTera, 756.5 * kTera,
                                378 * kTera, 51 * kTera, 2000 * kGiga};
const GpuPeakFlops kH100Nvl = {"H100 NVL", 835.5 * kTera, 835.5 * kTera,
                               417.5 * kTera, 60 * kTera, 3900 * kGiga};
const GpuPeakFlops kH200Sxm = {"H200 SXM", 989.5 * kTera, 989.5 * kTera,
                               494.5 * kTera, 67 * kTera, 4800 * kGiga};
const GpuPeakFlops kH200Nvl = {"H200 NVL", 835.5 * kTera, 835.5 * kTera,
                               417.5 * kTera, 60 * kTera, 4800 * kGiga};
const GpuPeakFlops kL4 = {"L4", 121 * kTera, 121 * kTera, 60 * kTera,
                          30.3 * kTera, 300 * kGiga};
const GpuPeakFlops kRtx4090 = {"RTX 4090", 165.2 * kTera, 165.2 * kTera,
                               82.6 * kTera, 82.6 * kTera, 1008 * kGiga};

// Lower-case words of a device name, split at spaces, '-' and '_':
// "NVIDIA A100-SXM4-80GB" -> nvidia a100 sxm4 80gb.
std::vector<std::string> nameWords(std::string_view name) {
  std::vector<std::string> words;
  std::string word;
  for (char c : name) {
    if (c == ' ' || c == '-' || c == '_') {
      if (!word.empty())
        words.push_back(std::move(word));
      word.clear();
      continue;
    }
    word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (!word.empty())
    words.push_back(std::move(word));
  return words;
}

// Rules in order: the first whose required words are all present and whose
// excluded words are all absent names the model. More specific variants
// (PCIe, NVL) come before the family's default (SXM).
struct NameRule {
  std::vector<std::string> required;
  std::vector<std::string> excluded;
  const GpuPeakFlops *peak;
};

const std::vector<NameRule> &nameRules() {
  static const std::vector<NameRule> rules = {
      {{"a100", "pcie", "80gb"}, {}, &kA100Pcie80}, // "A100 80GB PCIe"
      {{"a100", "pcie"}, {}, &kA100Pcie40},         // "A100-PCIE-40GB"
      {{"a100", "80gb"}, {}, &kA100Sxm80},          // "A100-SXM4-80GB"
      {{"a100"}, {}, &kA100Sxm40},                  // "A100-SXM4-40GB"
      {{"h100", "pcie"}, {}, &kH100Pcie},
      {{"h100", "nvl"}, {}, &kH100Nvl},
      {{"h100"}, {}, &kH100Sxm}, // "H100 80GB HBM3", "H100 SXM5 80GB"
      {{"h200", "nvl"}, {}, &kH200Nvl},
      {{"h200"}, {}, &kH200Sxm}, // "NVIDIA H200"
      {{"l4"}, {}, &kL4},
      // The laptop part and the China-market "4090 D" have fewer SMs.
      {{"rtx", "4090"}, {"laptop", "d"}, &kRtx4090},
  };
  return rules;
}

bool contains(const std::vector<std::string> &words, const std::string &w) {
  for (const std::string &word : words)
    if (word == w)
      return true;
  return false;
}

} // namespace

std::optional<ComputePrecision>
computePrecisionFromName(std::string_view name) {
  if (name == "bf16")
    return ComputePrecision::kBf16;
  if (name == "fp16" || name == "f16")
    return ComputePrecision::kFp16;
  if (name == "tf32")
    return ComputePrecision::kTf32;
  if (name == "fp32" || name == "f32")
    return ComputePrecision::kFp32;
  return std::nullopt;
}

double GpuPeakFlops::forPrecision(ComputePrecision precision) const {
  switch (precision) {
  case ComputePrecision::kBf16:
    return bf16;
  case ComputePrecision::kFp16:
    return fp16;
  case ComputePrecision::kTf32:
    return tf32;
  case ComputePrecision::kFp32:
    return fp32;
  }
  return fp32;
}

const GpuPeakFlops *findGpuPeakFlops(std::string_view cudaDeviceName) {
  std::vector<std::string> words = nameWords(cudaDeviceName);
  for (const NameRule &rule : nameRules()) {
    bool matches = true;
    for (const std::string &w : rule.required)
      matches = matches && contains(words, w);
    for (const std::string &w : rule.excluded)
      matches = matches && !contains(words, w);
    if (matches)
      return rule.peak;
  }
  return nullptr;
}

std::optional<double>
resolvePeakFlopsPerSecond(std::optional<double> userPeakTflops,
                          std::optional<std::string_view> cudaDeviceName,
                          ComputePrecision precision) {
  if (userPeakTflops)
    return *userPeakTflops * kTera;
  if (!cudaDeviceName)
    return std::nullopt;
  if (const GpuPeakFlops *peak = findGpuPeakFlops(*cudaDeviceName))
    return peak->forPrecision(precision);
  return std::nullopt;
}

std::optional<double>
resolvePeakMemoryBandwidth(std::optional<double> userPeakGbps,
                           std::optional<std::string_view> cudaDeviceName) {
  if (userPeakGbps)
    return *userPeakGbps * kGiga;
  if (!cudaDeviceName)
    return std::nullopt;
  if (const GpuPeakFlops *peak = findGpuPeakFlops(*cudaDeviceName))
    return peak->memoryBandwidth;
  return std::nullopt;
}

std::optional<double> modelFlopsUtilization(double flopsPerStep,
                                            double stepSeconds,
                                            std::optional<double> peakFlops) {
  if (!peakFlops || !(*peakFlops > 0) || !(stepSeconds > 0))
    return std::nullopt;
  return flopsPerStep / stepSeconds / *peakFlops;
}

} // namespace kiln::rt
