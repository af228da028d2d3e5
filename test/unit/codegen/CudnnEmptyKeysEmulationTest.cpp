//===- CudnnEmptyKeysEmulationTest.cpp - cuDNN's empty-sample fix-up -------===//
//
// The runtime's fix-up kernels (runtime/cuda/CudnnEmptyKeys.h), compiled for
// the host with CudaHostEmulation.h and launched as the CUDA backend does
// (emptyKeysFills, emptyKeysGrid, kEmptyKeysBlock): after a cuDNN attention
// call with key lengths, exactly the samples with length <= 0 get Kiln's
// result (out 0, lse -inf; dq, dk, dv 0), dk / dv are also zeroed at the
// masked keys j >= len[b] of every sample, and every other element keeps
// its value bit for bit. What only a GPU can confirm: that cuDNN itself runs
// with a zero seq_len_kv without faulting, and the launch on a real stream.
//
//===----------------------------------------------------------------------===//

#include "KernelRunner.h"

#include "runtime/cuda/CudnnEmptyKeys.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cmath>
#include <cstring>

namespace kiln::test {
namespace {

using rt::cuda::EmptyKeysFill;

// Wrappers with the emulation's one-table signature around the real entries.
constexpr const char *kWrappers = R"cpp(
extern "C" void wrap_bf16(void *const *b) {
  kiln_cudnn_empty_keys_bf16((const int *)b[0], (unsigned short *)b[1],
                             *(const long long *)b[2], *(const long long *)b[3],
                             *(const long long *)b[4], *(const long long *)b[5]);
}
extern "C" void wrap_f32(void *const *b) {
  kiln_cudnn_empty_keys_f32((const int *)b[0], (float *)b[1], *(const long long *)b[2],
                            *(const long long *)b[3], *(const long long *)b[4],
                            *(const long long *)b[5], *(const float *)b[6]);
}
extern "C" void wrap_clamp(void *const *b) {
  kiln_cudnn_clamp_lengths((const int *)b[0], (int *)b[1], *(const long long *)b[2],
                           *(const int *)b[3]);
}
)cpp";

using Kernel = void (*)(void *const *);
using Launch = void (*)(Kernel, void *const *, unsigned, unsigned);

class EmptyKeysTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string error;
    handle = compileKernels({rt::cuda::cudnnEmptyKeysSource(), kWrappers}, error,
                            KernelBackend::CudaEmulated);
    ASSERT_NE(handle, nullptr) << error;
    launch = reinterpret_cast<Launch>(dlsym(handle, "kiln_emulate_launch"));
    bf16 = reinterpret_cast<Kernel>(dlsym(handle, "wrap_bf16"));
    f32 = reinterpret_cast<Kernel>(dlsym(handle, "wrap_f32"));
    clamp = reinterpret_cast<Kernel>(dlsym(handle, "wrap_clamp"));
    ASSERT_TRUE(launch && bf16 && f32 && clamp);
  }
  void TearDown() override {
    if (handle)
      dlclose(handle);
  }

  // Runs `fill` on `x` (bf16 bits or floats) as the backend launches it, or
  // with `grid` blocks when nonzero (to exercise the grid-stride loop).
  void run(const EmptyKeysFill &fill, std::vector<int32_t> &lengths, void *x,
           unsigned grid = 0) {
    long long perSample = fill.perSample, inner = fill.inner, rows = fill.rows,
              total = fill.total;
    float value = -INFINITY;
    void *table[] = {lengths.data(), x, &perSample, &inner, &rows, &total, &value};
    launch(fill.f32 ? f32 : bf16, table, grid ? grid : rt::cuda::emptyKeysGrid(fill.total),
           rt::cuda::kEmptyKeysBlock);
  }

  void *handle = nullptr;
  Launch launch = nullptr;
  Kernel bf16 = nullptr, f32 = nullptr, clamp = nullptr;
};

// cuDNN's seq_len_kv is a copy of Kiln's lengths clamped to [0, S] (a GEMM
// size must lie within the tensor); the original stays untouched.
TEST_F(EmptyKeysTest, ClampsLengthsIntoTheKeyRange) {
  std::vector<int32_t> lengths = {3, 0, -2, 99, 5, 6};
  const std::vector<int32_t> original = lengths;
  std::vector<int32_t> clamped(lengths.size(), 12345);
  long long batch = static_cast<long long>(lengths.size());
  int kvLen = 5;
  void *table[] = {lengths.data(), clamped.data(), &batch, &kvLen};
  launch(clamp, table, rt::cuda::emptyKeysGrid(batch), rt::cuda::kEmptyKeysBlock);
  EXPECT_EQ(clamped, (std::vector<int32_t>{3, 0, 0, 5, 5, 5}));
  EXPECT_EQ(lengths, original);
}

TEST_F(EmptyKeysTest, FillsSizeEveryOutputBySample) {
  // B=3, H=4, KVH=2, T=5, S=7, D=8, Dv=16.
  auto forward = rt::cuda::emptyKeysFills(false, 3, 4, 2, 5, 7, 8, 16);
  ASSERT_EQ(forward.size(), 2u);
  EXPECT_EQ(forward[0].output, EmptyKeysFill::Output::kOut);
  EXPECT_EQ(forward[0].perSample, 4 * 5 * 16);
  EXPECT_FALSE(forward[0].f32);
  EXPECT_EQ(forward[1].output, EmptyKeysFill::Output::kLse);
  EXPECT_EQ(forward[1].perSample, 4 * 5);
  EXPECT_TRUE(forward[1].f32);
  auto backward = rt::cuda::emptyKeysFills(true, 3, 4, 2, 5, 7, 8, 16);
  ASSERT_EQ(backward.size(), 3u);
  EXPECT_EQ(backward[0].perSample, 4 * 5 * 8);  // dq: whole samples only
  EXPECT_EQ(backward[0].inner, 0);
  EXPECT_EQ(backward[1].perSample, 2 * 7 * 8);  // dk: key rows of D
  EXPECT_EQ(backward[1].inner, 8);
  EXPECT_EQ(backward[1].rows, 7);
  EXPECT_EQ(backward[2].perSample, 2 * 7 * 16); // dv: key rows of Dv
  EXPECT_EQ(backward[2].inner, 16);
  EXPECT_EQ(backward[2].rows, 7);
  EXPECT_EQ(forward[0].inner, 0);
  EXPECT_EQ(forward[1].inner, 0);
  for (const EmptyKeysFill &fill : backward)
    EXPECT_EQ(fill.total, 3 * fill.perSample);
  EXPECT_EQ(rt::cuda::emptyKeysGrid(1), 1u);
  EXPECT_EQ(rt::cuda::emptyKeysGrid(257), 2u);
  EXPECT_EQ(rt::cuda::emptyKeysGrid(int64_t(1) << 40), 1024u);
}

// Layout bthd: dk [B, S, KVH, D], so key row j of a sample is its KVH * D
// elements at [j * KVH * D, (j + 1) * KVH * D): inner KVH * D, rows S; the
// whole-sample fills keep their sizes (a sample is contiguous either way).
TEST_F(EmptyKeysTest, TokensMajorKeyRowsSpanEveryKvHead) {
  auto plain = rt::cuda::emptyKeysFills(true, 3, 4, 2, 5, 7, 8, 16);
  auto fills = rt::cuda::emptyKeysFills(true, 3, 4, 2, 5, 7, 8, 16, true);
  ASSERT_EQ(fills.size(), 3u);
  EXPECT_EQ(fills[1].inner, 2 * 8);
  EXPECT_EQ(fills[2].inner, 2 * 16);
  for (size_t f = 0; f < 3; ++f) {
    EXPECT_EQ(fills[f].perSample, plain[f].perSample);
    EXPECT_EQ(fills[f].rows, plain[f].rows);
  }
  EXPECT_EQ(fills[0].inner, 0);
  // Element (b, j, kvh, d) of dk is in key row j: (i / inner) % rows.
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t j = 0; j < 7; ++j)
      for (int64_t kvh = 0; kvh < 2; ++kvh)
        for (int64_t d = 0; d < 8; ++d) {
          int64_t i = ((b * 7 + j) * 2 + kvh) * 8 + d;
          EXPECT_EQ(i / fills[1].inner % fills[1].rows, j);
          EXPECT_EQ(i / fills[1].perSample, b);
        }
}

// Whether element i of `fill`'s output is Kiln's fixed value: a sample
// without keys, or a dk / dv row of a masked key.
bool absent(const EmptyKeysFill &fill, const std::vector<int32_t> &lengths, size_t i) {
  int64_t len = lengths[i / fill.perSample];
  if (len <= 0)
    return true;
  return fill.inner > 0 && static_cast<int64_t>(i / fill.inner) % fill.rows >= len;
}

TEST_F(EmptyKeysTest, RewritesExactlyTheSamplesWithoutKeys) {
  // S = 5 keys. Sample 0 keeps 3 (dk / dv rows 3, 4 zeroed), 1 none, 2 a
  // negative length (none either), 3 more than S (all of them).
  std::vector<int32_t> lengths = {3, 0, -2, 99};
  const int B = 4;
  for (bool backward : {false, true})
    for (const EmptyKeysFill &fill :
         rt::cuda::emptyKeysFills(backward, B, 2, 1, 3, 5, 8, 16)) {
      SCOPED_TRACE(::testing::Message() << "backward " << backward << ", output "
                                        << static_cast<int>(fill.output));
      for (unsigned grid : {0u, 1u}) { // the backend's grid, and one block
        if (fill.f32) {
          std::vector<float> x(fill.total);
          for (size_t i = 0; i < x.size(); ++i)
            x[i] = 0.25f * static_cast<float>(i) - 7.0f;
          std::vector<float> before = x;
          run(fill, lengths, x.data(), grid);
          for (size_t i = 0; i < x.size(); ++i) {
            if (absent(fill, lengths, i))
              EXPECT_TRUE(std::isinf(x[i]) && x[i] < 0) << i;
            else
              EXPECT_EQ(std::memcmp(&x[i], &before[i], 4), 0) << i;
          }
        } else {
          std::vector<uint16_t> x(fill.total);
          for (size_t i = 0; i < x.size(); ++i)
            x[i] = static_cast<uint16_t>(0x3f80 + i); // nonzero bf16 bits
          std::vector<uint16_t> before = x;
          run(fill, lengths, x.data(), grid);
          size_t zeroed = 0;
          for (size_t i = 0; i < x.size(); ++i) {
            EXPECT_EQ(x[i], absent(fill, lengths, i) ? 0 : before[i]) << i;
            zeroed += x[i] == 0;
          }
          // Samples 1 and 2 whole; for dk / dv also 2 of sample 0's 5 rows.
          int64_t rowElements = fill.inner ? fill.perSample / fill.rows : 0;
          EXPECT_EQ(static_cast<int64_t>(zeroed), 2 * fill.perSample + 2 * rowElements);
        }
      }
    }
}

} // namespace
} // namespace kiln::test
