//===- CudaLayoutTest.cpp - The CUDA backend's host-side decisions --------===//
//
// What the CUDA backend decides without a GPU, checked on the CPU: the
// column-major view of row-major GEMMs handed to cuBLASLt (evaluated here
// with a reference column-major GEMM that honours the descriptors exactly as
// cuBLASLt defines them), the device arena layout, the fits-in-memory
// message, and a CUDA artifact on a machine without a driver.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/DeviceLayout.h"
#include "runtime/cuda/GemmLayout.h"

#include "TestArtifact.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <dlfcn.h>
#include <fstream>
#include <random>
#include <sys/wait.h>

namespace kiln::rt::cuda {
namespace {

using ::testing::HasSubstr;

// Element (r, c) of op(M) for a column-major stored matrix.
float opAt(const std::vector<float> &data, const ColumnMajorMatrix &m,
           bool trans, int64_t batch, uint64_t r, uint64_t c) {
  uint64_t row = trans ? c : r, col = trans ? r : c;
  EXPECT_LT(row, m.rows);
  EXPECT_LT(col, m.cols);
  return data[batch * m.stride + row + col * m.ld];
}

// D = op(first) op(second), column-major, as cuBLASLt computes it.
void referenceColumnMajor(const ColumnMajorGemm &g,
                          const std::vector<std::vector<float>> &buffers,
                          std::vector<float> &out) {
  for (int64_t b = 0; b < g.batch; ++b)
    for (uint64_t i = 0; i < g.m; ++i)
      for (uint64_t j = 0; j < g.n; ++j) {
        double sum = 0;
        for (uint64_t p = 0; p < g.k; ++p)
          sum += double(opAt(buffers[g.first.buffer], g.first, g.transFirst, b, i, p)) *
                 opAt(buffers[g.second.buffer], g.second, g.transSecond, b, p, j);
        out[b * g.result.stride + i + j * g.result.ld] = float(sum);
      }
}

struct GemmCase {
  int64_t m, n, k, batch;
  bool transA, transB;
  bool sharedB; // stride_b = 0: one B for every batch entry
};

class GemmLayoutTest : public ::testing::TestWithParam<GemmCase> {};

// The row-major product, computed directly, must equal the column-major
// call's result read back row-major. Sums of <= 7 products of values in
// [-1, 1] accumulated in double: exact to float rounding (tolerance 1e-5).
TEST_P(GemmLayoutTest, ColumnMajorViewComputesTheRowMajorProduct) {
  GemmCase t = GetParam();
  int64_t sizeA = t.m * t.k, sizeB = t.k * t.n, sizeC = t.m * t.n;
  std::vector<std::vector<float>> buffers(3);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  buffers[0].resize(sizeA * t.batch);
  buffers[1].resize(sizeB * (t.sharedB ? 1 : t.batch));
  buffers[2].assign(sizeC * t.batch, 0);
  for (int i = 0; i < 2; ++i)
    for (float &v : buffers[i])
      v = dist(rng);

  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(schema::CreateGemmCall(fbb, 0, 1, 2, t.m, t.n, t.k, t.batch,
                                    t.transA, t.transB, sizeA,
                                    t.sharedB ? 0 : sizeB, sizeC));
  const auto *call = flatbuffers::GetRoot<schema::GemmCall>(fbb.GetBufferPointer());
  ColumnMajorGemm cm = toColumnMajor(*call);
  EXPECT_EQ(cm.first.buffer, 1u); // B first, A second
  EXPECT_EQ(cm.second.buffer, 0u);
  std::vector<float> got(sizeC * t.batch, 0);
  referenceColumnMajor(cm, buffers, got);

  for (int64_t b = 0; b < t.batch; ++b)
    for (int64_t i = 0; i < t.m; ++i)
      for (int64_t j = 0; j < t.n; ++j) {
        const float *A = buffers[0].data() + b * sizeA;
        const float *B = buffers[1].data() + (t.sharedB ? 0 : b * sizeB);
        double want = 0;
        for (int64_t p = 0; p < t.k; ++p)
          want += double(t.transA ? A[p * t.m + i] : A[i * t.k + p]) *
                  (t.transB ? B[j * t.k + p] : B[p * t.n + j]);
        EXPECT_NEAR(got[b * sizeC + i * t.n + j], want, 1e-5)
            << "batch " << b << " C[" << i << "][" << j << "]";
      }
}

INSTANTIATE_TEST_SUITE_P(
    AllTransposes, GemmLayoutTest,
    ::testing::Values(GemmCase{3, 5, 7, 1, false, false, false},
                      GemmCase{3, 5, 7, 1, true, false, false},
                      GemmCase{3, 5, 7, 1, false, true, false},
                      GemmCase{3, 5, 7, 1, true, true, false},
                      GemmCase{4, 2, 3, 3, false, true, false},
                      GemmCase{2, 6, 4, 2, true, false, true}));

test::ArtifactSpec layoutSpec() {
  test::ArtifactSpec spec = test::minimalArtifact();
  using R = schema::BufferRole;
  spec.buffers.push_back({"w", R::BufferRole_Parameter, schema::DType_F32, {10, 10},
                          schema::InitKind_Normal, 0.02f});                  // 1
  spec.buffers.push_back({"w", R::BufferRole_Gradient, schema::DType_F32, {10, 10}}); // 2
  spec.buffers.push_back({"h", R::BufferRole_Activation, schema::DType_F32, {3}});    // 3
  test::BufferSpec view{"h2", R::BufferRole_Activation, schema::DType_F32, {1, 3}};
  view.aliasOf = 3;
  spec.buffers.push_back(view);                                                       // 4
  return spec;
}

// The device arena is the static memory plan: every buffer at its planned
// offset (a view at its storage's), the plan's arena size and breakdown.
TEST(DeviceLayoutTest, IsTheMemoryPlan) {
  auto artifact = Artifact::loadBytes(test::serializeArtifact(layoutSpec()), "t");
  ASSERT_TRUE(artifact.ok()) << artifact.status().message();
  DeviceLayout layout = deviceLayout(**artifact);
  ASSERT_EQ(layout.offsets.size(), 5u);
  EXPECT_EQ(layout.offsets[0], 0);     // loss: 4 bytes -> 256
  EXPECT_EQ(layout.offsets[1], 256);   // w: 400 bytes -> 512
  EXPECT_EQ(layout.offsets[2], 768);   // dw
  EXPECT_EQ(layout.offsets[3], 1280);  // h
  EXPECT_EQ(layout.offsets[4], 1280);  // the view shares h's storage
  EXPECT_EQ(layout.arenaBytes, (*artifact)->arenaBytes());
  EXPECT_EQ(layout.arenaBytes, 1536);
  // The test artifact's plan counts every byte as "other".
  const schema::MemoryPlan *plan = (*artifact)->root().memory_plan();
  ASSERT_NE(plan, nullptr);
  EXPECT_EQ(layout.parameterBytes, plan->parameters());
  EXPECT_EQ(layout.otherBytes, plan->other() + plan->workspace());
  EXPECT_EQ(layout.otherBytes, 1536);
  for (int64_t offset : layout.offsets)
    EXPECT_EQ(offset % kDeviceAlignment, 0);
}

TEST(DeviceLayoutTest, TooBigSaysWhatDoesNotFit) {
  auto artifact = Artifact::loadBytes(test::serializeArtifact(layoutSpec()), "t");
  ASSERT_TRUE(artifact.ok());
  DeviceLayout layout = deviceLayout(**artifact);
  EXPECT_TRUE(checkDeviceFits(layout, 512, 2048, "GPU").ok());
  Status status = checkDeviceFits(layout, 512, 2047, "NVIDIA H100");
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("NVIDIA H100 has 0.0 MiB free"));
  EXPECT_THAT(status.message(), HasSubstr("parameters 0.0 MiB"));
  EXPECT_THAT(status.message(), HasSubstr("cuBLASLt workspace and launch tables"));
  // The size to give kilnc is what is free less what lies beside the arena.
  Status big = checkDeviceFits(layout, int64_t(3) << 20, int64_t(10) << 30, "GPU");
  ASSERT_TRUE(big.ok());
  layout.arenaBytes = int64_t(11) << 30;
  Status over = checkDeviceFits(layout, int64_t(3) << 20, int64_t(10) << 30, "GPU");
  EXPECT_THAT(over.message(), HasSubstr("kilnc --largest-batch=10237MiB"));
}

// On a machine without the NVIDIA driver a CUDA artifact is a one-line
// error and exit 1, never a crash. (Where a driver exists this is the GPU
// suite's business, so the test skips.)
TEST(CudaBackendTest, NoDriverIsAClearError) {
  if (void *driver = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
    ::dlclose(driver);
    GTEST_SKIP() << "this machine has a CUDA driver";
  }
  std::string dir = test::makeTempDir();
  test::ArtifactSpec spec = test::minimalArtifact();
  spec.target = "cuda";
  spec.archs = {"sm_80"};
  spec.kernels[0].launch = schema::KernelLaunch(1, 1, 0);
  std::string path = dir + "/model.kart";
  test::writeFile(path, test::serializeArtifact(spec));
  std::string log = dir + "/out.log";
  std::string cmd = std::string(KILN_RUN_PATH) + " " + path +
                    " --steps 1 >" + log + " 2>&1";
  int status = std::system(cmd.c_str());
  std::ifstream in(log);
  std::string output((std::istreambuf_iterator<char>(in)), {});
  ASSERT_TRUE(WIFEXITED(status)) << output;
  EXPECT_EQ(WEXITSTATUS(status), 1) << output;
  EXPECT_THAT(output, HasSubstr("kiln-run: error: " + path +
                                ": this artifact targets CUDA, but no NVIDIA "
                                "driver is installed on this machine"));
  EXPECT_THAT(output, HasSubstr("libcuda.so.1"));
}

} // namespace
} // namespace kiln::rt::cuda
