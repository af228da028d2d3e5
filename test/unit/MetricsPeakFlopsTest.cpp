//===- MetricsPeakFlopsTest.cpp - Peak FLOP/s lookup, MFU, peak RSS -------===//

#include "runtime/metrics/PeakFlops.h"
#include "runtime/metrics/PeakMemory.h"

#include <cstring>
#include <gtest/gtest.h>
#include <string>
#include <vector>

namespace kiln::rt::test {
namespace {

std::string modelOf(const char *cudaName) {
  const GpuPeakFlops *peak = findGpuPeakFlops(cudaName);
  return peak ? peak->model : "(none)";
}

// Device names as cudaGetDeviceProperties / nvidia-smi report them.
TEST(PeakFlopsTest, LooksUpRealDeviceNames) {
  EXPECT_EQ(modelOf("NVIDIA A100-SXM4-40GB"), "A100 SXM 40GB");
  EXPECT_EQ(modelOf("NVIDIA A100-SXM4-80GB"), "A100 SXM 80GB");
  EXPECT_EQ(modelOf("NVIDIA A100-PCIE-40GB"), "A100 PCIe 40GB");
  EXPECT_EQ(modelOf("NVIDIA A100 80GB PCIe"), "A100 PCIe 80GB");
  EXPECT_EQ(modelOf("NVIDIA H100 80GB HBM3"), "H100 SXM");
  EXPECT_EQ(modelOf("NVIDIA H100 PCIe"), "H100 PCIe");
  EXPECT_EQ(modelOf("NVIDIA H100 NVL"), "H100 NVL");
  EXPECT_EQ(modelOf("NVIDIA H200"), "H200 SXM");
  EXPECT_EQ(modelOf("NVIDIA H200 NVL"), "H200 NVL");
  EXPECT_EQ(modelOf("NVIDIA L4"), "L4");
  EXPECT_EQ(modelOf("NVIDIA GeForce RTX 4090"), "RTX 4090");
}

TEST(PeakFlopsTest, DoesNotGuessOtherModels) {
  for (const char *name :
       {"NVIDIA L40S", "NVIDIA L40", "NVIDIA GeForce RTX 4090 Laptop GPU",
        "NVIDIA GeForce RTX 4090 D", "NVIDIA GeForce RTX 4080",
        "Tesla V100-SXM2-16GB", "NVIDIA A10", "", "cpu"})
    EXPECT_EQ(findGpuPeakFlops(name), nullptr) << name;
}

TEST(PeakFlopsTest, DatasheetValuesPerPrecision) {
  const GpuPeakFlops *h100 = findGpuPeakFlops("NVIDIA H100 80GB HBM3");
  ASSERT_NE(h100, nullptr);
  EXPECT_EQ(h100->forPrecision(ComputePrecision::kBf16), 989.5e12);
  EXPECT_EQ(h100->forPrecision(ComputePrecision::kFp16), 989.5e12);
  EXPECT_EQ(h100->forPrecision(ComputePrecision::kTf32), 494.5e12);
  EXPECT_EQ(h100->forPrecision(ComputePrecision::kFp32), 67e12);
  const GpuPeakFlops *a100 = findGpuPeakFlops("NVIDIA A100-SXM4-80GB");
  ASSERT_NE(a100, nullptr);
  EXPECT_EQ(a100->bf16, 312e12);
  EXPECT_EQ(a100->tf32, 156e12);
  EXPECT_EQ(a100->fp32, 19.5e12);
  // Every entry: tensor-core rates at least the CUDA-core FP32 rate.
  for (const char *name : {"NVIDIA A100-PCIE-40GB", "NVIDIA H100 PCIe",
                           "NVIDIA H100 NVL", "NVIDIA H200", "NVIDIA H200 NVL",
                           "NVIDIA L4", "NVIDIA GeForce RTX 4090"}) {
    const GpuPeakFlops *p = findGpuPeakFlops(name);
    ASSERT_NE(p, nullptr) << name;
    EXPECT_GE(p->bf16, p->tf32) << name;
    EXPECT_GE(p->tf32, p->fp32) << name;
    EXPECT_GT(p->fp32, 1e13) << name;
  }
}

TEST(PeakFlopsTest, MemoryBandwidthFromDatasheetsOrTheUser) {
  EXPECT_EQ(resolvePeakMemoryBandwidth(std::nullopt, "NVIDIA H100 80GB HBM3"), 3350e9);
  EXPECT_EQ(resolvePeakMemoryBandwidth(std::nullopt, "NVIDIA H200"), 4800e9);
  EXPECT_EQ(resolvePeakMemoryBandwidth(std::nullopt, "NVIDIA A100-SXM4-80GB"), 2039e9);
  EXPECT_EQ(resolvePeakMemoryBandwidth(std::nullopt, "NVIDIA A100-SXM4-40GB"), 1555e9);
  EXPECT_EQ(resolvePeakMemoryBandwidth(std::nullopt, "NVIDIA A100 80GB PCIe"), 1935e9);
  EXPECT_EQ(resolvePeakMemoryBandwidth(std::nullopt, "NVIDIA L4"), 300e9);
  EXPECT_EQ(resolvePeakMemoryBandwidth(40.0, "NVIDIA H100 80GB HBM3"), 40e9); // --peak-gbps wins
  EXPECT_EQ(resolvePeakMemoryBandwidth(25.0, std::nullopt), 25e9);           // a CPU's
  EXPECT_FALSE(resolvePeakMemoryBandwidth(std::nullopt, std::nullopt));
  EXPECT_FALSE(resolvePeakMemoryBandwidth(std::nullopt, "Some Future GPU"));
}

TEST(PeakFlopsTest, PrecisionNames) {
  EXPECT_EQ(computePrecisionFromName("bf16"), ComputePrecision::kBf16);
  EXPECT_EQ(computePrecisionFromName("f16"), ComputePrecision::kFp16);
  EXPECT_EQ(computePrecisionFromName("tf32"), ComputePrecision::kTf32);
  EXPECT_EQ(computePrecisionFromName("f32"), ComputePrecision::kFp32);
  EXPECT_FALSE(computePrecisionFromName("int8"));
}

TEST(PeakFlopsTest, ResolveAndMfu) {
  // CPU backend: no device name, no table entry; only the user's peak.
  EXPECT_FALSE(resolvePeakFlopsPerSecond(std::nullopt, std::nullopt,
                                         ComputePrecision::kFp32));
  EXPECT_EQ(
      resolvePeakFlopsPerSecond(2.5, std::nullopt, ComputePrecision::kFp32),
      2.5e12);
  // The user's value wins over the table.
  EXPECT_EQ(resolvePeakFlopsPerSecond(100.0, "NVIDIA H100 80GB HBM3",
                                      ComputePrecision::kBf16),
            100e12);
  EXPECT_EQ(resolvePeakFlopsPerSecond(std::nullopt, "NVIDIA H100 PCIe",
                                      ComputePrecision::kBf16),
            756.5e12);
  EXPECT_FALSE(resolvePeakFlopsPerSecond(std::nullopt, "Some Future GPU",
                                         ComputePrecision::kBf16));

  // 312e12 * 0.25 s * 0.5 FLOPs in a quarter second at half of the peak.
  // Exact in binary (all powers of two times 312e12).
  auto mfu = modelFlopsUtilization(312e12 * 0.25 * 0.5, 0.25, 312e12);
  ASSERT_TRUE(mfu);
  EXPECT_EQ(*mfu, 0.5);
  EXPECT_FALSE(modelFlopsUtilization(1e12, 0.25, std::nullopt));
  EXPECT_FALSE(modelFlopsUtilization(1e12, 0.0, 312e12));
  EXPECT_FALSE(modelFlopsUtilization(1e12, 0.25, 0.0));
}

TEST(PeakMemoryTest, GrowsWithTouchedMemory) {
  int64_t before = peakResidentBytes();
  EXPECT_GT(before, 1 << 20); // any process holds more than 1 MiB
  // Touch 64 MiB more than the peak so far; the high-water mark follows.
  size_t bytes = static_cast<size_t>(before) + (64u << 20);
  std::vector<char> block(bytes);
  std::memset(block.data(), 1, block.size());
  volatile char sink = block[bytes / 2];
  (void)sink;
  EXPECT_GE(peakResidentBytes(), static_cast<int64_t>(bytes));
}

} // namespace
} // namespace kiln::rt::test
