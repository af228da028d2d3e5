//===- SimCublasLtTest.cpp - The simulator's cuBLASLt against a reference -===//
//
// Test-only. Loads the device simulator's libcuda.so.1 and libcublasLt.so.13
// from $KILN_SIM_LIB_DIR (dlopen, as kiln-run does) and checks
// cublasLtMatmul against a naive row-major reference computed here: every
// epilogue Kiln uses, both transposes, strided batches, bf16 in / fp32 out,
// a bf16 D (rounded to nearest even), TF32 input rounding; then what the
// heuristic refuses, attribute size checks, host memory passed as device
// memory, and that a matmul runs when its stream does.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CublasLt.h"

#include <cublasLt.h>
#include <cuda.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

#define KILN_STRINGIZE_EXPANDED(x) KILN_STRINGIZE(x)
#define KILN_STRINGIZE(x) #x

#define KILN_SIM_CUDA_FUNCTIONS(X)                                             \
  X(cuInit)                                                                    \
  X(cuDeviceGet)                                                               \
  X(cuDevicePrimaryCtxRetain)                                                  \
  X(cuCtxSetCurrent)                                                           \
  X(cuMemAlloc)                                                                \
  X(cuMemFree)                                                                 \
  X(cuMemcpyHtoD)                                                              \
  X(cuMemcpyDtoH)                                                              \
  X(cuStreamCreate)                                                            \
  X(cuStreamSynchronize)                                                       \
  X(cuStreamDestroy)

// The two libraries' entry points, resolved by their macro-expanded names
// (cuBLASLt's are kiln-run's own list, KILN_CUBLASLT_FUNCTIONS of
// runtime/cuda/CublasLt.h).
struct Api {
#define KILN_DECLARE(name) decltype(&::name) name = nullptr;
  KILN_SIM_CUDA_FUNCTIONS(KILN_DECLARE)
  KILN_CUBLASLT_FUNCTIONS(KILN_DECLARE)
#undef KILN_DECLARE
  cublasLtHandle_t handle = nullptr;
  std::string error;
};

// Loads once; `error` says what failed.
Api &api() {
  static Api a = [] {
    Api a;
    const char *dir = std::getenv("KILN_SIM_LIB_DIR");
    if (!dir) {
      a.error = "KILN_SIM_LIB_DIR is not set (the simulator's library folder)";
      return a;
    }
    // libcuda first, by path: libcublasLt's own dependency on it then
    // resolves to this copy (same soname), so both share one device.
    void *cuda = dlopen((std::string(dir) + "/libcuda.so.1").c_str(),
                        RTLD_NOW | RTLD_GLOBAL);
    void *lt = cuda ? dlopen((std::string(dir) + "/libcublasLt.so.13").c_str(),
                             RTLD_NOW)
                    : nullptr;
    if (!cuda || !lt) {
      a.error = dlerror();
      return a;
    }
#define KILN_RESOLVE(lib, name)                                                \
  a.name = reinterpret_cast<decltype(a.name)>(                                 \
      dlsym(lib, KILN_STRINGIZE_EXPANDED(name)));                              \
  if (!a.name)                                                                 \
    a.error += std::string(" ") + KILN_STRINGIZE_EXPANDED(name);
#define KILN_RESOLVE_CUDA(name) KILN_RESOLVE(cuda, name)
#define KILN_RESOLVE_LT(name) KILN_RESOLVE(lt, name)
    KILN_SIM_CUDA_FUNCTIONS(KILN_RESOLVE_CUDA)
    KILN_CUBLASLT_FUNCTIONS(KILN_RESOLVE_LT)
#undef KILN_RESOLVE_LT
#undef KILN_RESOLVE_CUDA
#undef KILN_RESOLVE
    if (!a.error.empty()) {
      a.error = "unresolved:" + a.error;
      return a;
    }
    CUdevice device;
    CUcontext context;
    if (a.cuInit(0) || a.cuDeviceGet(&device, 0) ||
        a.cuDevicePrimaryCtxRetain(&context, device) ||
        a.cuCtxSetCurrent(context) || a.cublasLtCreate(&a.handle))
      a.error = "device or cuBLASLt handle setup failed";
    return a;
  }();
  return a;
}

class SimCublasLtTest : public ::testing::Test {
protected:
  void SetUp() override { ASSERT_TRUE(api().error.empty()) << api().error; }
};

// Independent of the library: keep `bits` explicit mantissa bits, ties to
// even (the default rounding mode).
float roundMantissa(float x, int bits) {
  if (x == 0 || !std::isfinite(x))
    return x;
  int e;
  std::frexp(x, &e);
  const double scale = std::ldexp(1.0, bits + 1 - e);
  return float(std::nearbyint(double(x) * scale) / scale);
}
float toBf16(float x) { return roundMantissa(x, 7); }
float toTf32(float x) { return roundMantissa(x, 10); }
double gelu(double x) {
  return 0.5 * x *
         (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}
double geluGrad(double x) { return (gelu(x + 1e-4) - gelu(x - 1e-4)) / 2e-4; }

// A column-major strided batch of fp32 or bf16 values, on the host and in
// device memory.
struct Matrix {
  cudaDataType type = CUDA_R_32F;
  int64_t rows = 0, cols = 0, ld = 0, stride = 0;
  int batch = 1;
  std::vector<float> host; // [batch * stride or ld * cols], column-major
  CUdeviceptr device = 0;
  cublasLtMatrixLayout_t layout = nullptr;

  Matrix(cudaDataType t, int64_t r, int64_t c, int64_t ldPad = 0, int b = 1)
      : type(t), rows(r), cols(c), ld(r + ldPad), batch(b) {
    stride = b > 1 ? ld * cols + 5 : 0;
    host.assign(size_t(b > 1 ? (b - 1) * stride + ld * cols : ld * cols), 0.0f);
  }
  Matrix(const Matrix &) = delete;
  Matrix &operator=(const Matrix &) = delete;
  ~Matrix() {
    if (layout)
      api().cublasLtMatrixLayoutDestroy(layout);
    if (device)
      api().cuMemFree(device);
  }
  size_t index(int b, int64_t r, int64_t c) const {
    return size_t(b * stride + r + c * ld);
  }
  float at(int b, int64_t r, int64_t c) const { return host[index(b, r, c)]; }
  size_t elementBytes() const { return type == CUDA_R_16BF ? 2 : 4; }
  void fill(std::mt19937 &rng) {
    std::uniform_real_distribution<float> d(-2, 2);
    for (float &x : host)
      x = type == CUDA_R_16BF ? toBf16(d(rng)) : d(rng);
  }
  // Host values -> device bytes (bf16: the upper halves), and the layout.
  void upload() {
    std::vector<unsigned char> bytes(host.size() * elementBytes());
    for (size_t i = 0; i < host.size(); ++i)
      std::memcpy(&bytes[i * elementBytes()],
                  reinterpret_cast<const char *>(&host[i]) +
                      (type == CUDA_R_16BF ? 2 : 0),
                  elementBytes());
    if (!device) {
      ASSERT_EQ(api().cuMemAlloc(&device, bytes.size()), CUDA_SUCCESS);
    }
    ASSERT_EQ(api().cuMemcpyHtoD(device, bytes.data(), bytes.size()),
              CUDA_SUCCESS);
    if (!layout) {
      ASSERT_EQ(api().cublasLtMatrixLayoutCreate(&layout, type, uint64_t(rows),
                                                 uint64_t(cols), ld),
                0);
      if (batch > 1) {
        int32_t count = batch;
        ASSERT_EQ(api().cublasLtMatrixLayoutSetAttribute(
                      layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                      sizeof(count)),
                  0);
        ASSERT_EQ(api().cublasLtMatrixLayoutSetAttribute(
                      layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                      &stride, sizeof(stride)),
                  0);
      }
    }
  }
  void download() {
    std::vector<unsigned char> bytes(host.size() * elementBytes());
    ASSERT_EQ(api().cuMemcpyDtoH(bytes.data(), device, bytes.size()),
              CUDA_SUCCESS);
    for (size_t i = 0; i < host.size(); ++i) {
      uint32_t bits = 0;
      if (type == CUDA_R_16BF) {
        uint16_t h;
        std::memcpy(&h, &bytes[i * 2], 2);
        bits = uint32_t(h) << 16;
      } else {
        std::memcpy(&bits, &bytes[i * 4], 4);
      }
      std::memcpy(&host[i], &bits, 4);
    }
  }
};

// A matmul descriptor with the attributes the tests set.
struct Desc {
  cublasLtMatmulDesc_t desc = nullptr;
  explicit Desc(bool tf32 = false) {
    api().cublasLtMatmulDescCreate(
        &desc, tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
        CUDA_R_32F);
  }
  ~Desc() { api().cublasLtMatmulDescDestroy(desc); }
  template <typename T>
  cublasStatus_t set(cublasLtMatmulDescAttributes_t attr, T value) {
    return api().cublasLtMatmulDescSetAttribute(desc, attr, &value,
                                                sizeof(value));
  }
};

// The heuristic's status and algorithm count for desc / a, b, d (C = D).
std::pair<cublasStatus_t, int> heuristic(Desc &desc, Matrix &a, Matrix &b,
                                         Matrix &d) {
  cublasLtMatmulPreference_t pref;
  api().cublasLtMatmulPreferenceCreate(&pref);
  uint64_t workspace = 1 << 20;
  api().cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
      sizeof(workspace));
  cublasLtMatmulHeuristicResult_t result{};
  int found = -1;
  cublasStatus_t status = api().cublasLtMatmulAlgoGetHeuristic(
      api().handle, desc.desc, a.layout, b.layout, d.layout, d.layout, pref, 1,
      &result, &found);
  api().cublasLtMatmulPreferenceDestroy(pref);
  if (status == CUBLAS_STATUS_SUCCESS && found == 1) {
    EXPECT_EQ(result.state, CUBLAS_STATUS_SUCCESS);
  }
  return {status, found};
}

struct Case {
  cudaDataType ab = CUDA_R_32F, cd = CUDA_R_32F;
  bool tf32 = false, transA = false, transB = false;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  int64_t m = 6, n = 5, k = 7;
  int batch = 1;
  float alpha = 1, beta = 0;
};

std::string describe(const Case &c) {
  return "epilogue " + std::to_string(c.epilogue) + " A/B " +
         std::to_string(c.ab) + " C/D " + std::to_string(c.cd) +
         (c.tf32 ? " tf32" : "") + (c.transA ? " transA" : "") +
         (c.transB ? " transB" : "") + " batch " + std::to_string(c.batch);
}

// Runs `c` on the simulated device and compares D (and bias / aux) with the
// row-major reference: opA [m, k], opB [k, n], D [m, n] per batch entry.
void checkCase(const Case &c) {
  SCOPED_TRACE(describe(c));
  std::mt19937 rng(7);
  const int64_t m = c.m, n = c.n, k = c.k;
  Matrix a(c.ab, c.transA ? k : m, c.transA ? m : k, 1, c.batch);
  Matrix b(c.ab, c.transB ? n : k, c.transB ? k : n, 2, c.batch);
  Matrix d(c.cd, m, n, 3, c.batch);
  a.fill(rng);
  b.fill(rng);
  d.fill(rng); // C = D, in place, as Kiln calls it
  const cublasLtEpilogue_t e = c.epilogue;
  const bool biasIn = e == CUBLASLT_EPILOGUE_BIAS ||
                      e == CUBLASLT_EPILOGUE_GELU_BIAS ||
                      e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  const bool applyGelu =
      biasIn ? e != CUBLASLT_EPILOGUE_BIAS
             : e == CUBLASLT_EPILOGUE_GELU || e == CUBLASLT_EPILOGUE_GELU_AUX;
  const bool auxOut =
      e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  const bool auxIn =
      e == CUBLASLT_EPILOGUE_DGELU || e == CUBLASLT_EPILOGUE_DGELU_BGRAD;
  const bool bgrad = e == CUBLASLT_EPILOGUE_DGELU_BGRAD ||
                     e == CUBLASLT_EPILOGUE_BGRADA ||
                     e == CUBLASLT_EPILOGUE_BGRADB;
  Matrix bias(c.cd, e == CUBLASLT_EPILOGUE_BGRADB ? n : m, 1);
  Matrix aux(c.cd, m, n, (m + 7) / 8 * 8 - m); // ld: a multiple of 8
  bias.fill(rng);
  aux.fill(rng);
  const std::vector<float> c0 = d.host, aux0 = aux.host; // before the run
  a.upload();
  b.upload();
  d.upload();
  bias.upload();
  aux.upload();

  Desc desc(c.tf32);
  ASSERT_EQ(desc.set(CUBLASLT_MATMUL_DESC_TRANSA,
                     int32_t(c.transA ? CUBLAS_OP_T : CUBLAS_OP_N)),
            0);
  ASSERT_EQ(desc.set(CUBLASLT_MATMUL_DESC_TRANSB,
                     int32_t(c.transB ? CUBLAS_OP_T : CUBLAS_OP_N)),
            0);
  ASSERT_EQ(desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE, uint32_t(e)), 0);
  if (biasIn || bgrad) {
    ASSERT_EQ(desc.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                       reinterpret_cast<void *>(bias.device)),
              0);
    ASSERT_EQ(desc.set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, int32_t(c.cd)), 0);
  }
  if (auxIn || auxOut) {
    ASSERT_EQ(desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                       reinterpret_cast<void *>(aux.device)),
              0);
    ASSERT_EQ(desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, aux.ld), 0);
  }
  ASSERT_EQ(heuristic(desc, a, b, d), std::make_pair(CUBLAS_STATUS_SUCCESS, 1));
  ASSERT_EQ(api().cublasLtMatmul(api().handle, desc.desc, &c.alpha,
                                 reinterpret_cast<void *>(a.device), a.layout,
                                 reinterpret_cast<void *>(b.device), b.layout,
                                 &c.beta, reinterpret_cast<void *>(d.device),
                                 d.layout, reinterpret_cast<void *>(d.device),
                                 d.layout, nullptr, nullptr, 0, nullptr),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(api().cuStreamSynchronize(nullptr), CUDA_SUCCESS);
  d.download();
  bias.download();
  aux.download();

  auto opA = [&](int t, int64_t i, int64_t p) {
    return c.transA ? a.at(t, p, i) : a.at(t, i, p);
  };
  auto opB = [&](int t, int64_t p, int64_t j) {
    return c.transB ? b.at(t, j, p) : b.at(t, p, j);
  };
  auto asD = [&](double v) {
    return c.cd == CUDA_R_16BF ? double(toBf16(float(v))) : v;
  };
  auto tolerance = [&](double v) {
    return c.cd == CUDA_R_16BF ? std::fabs(v) / 128 + 1e-6
                               : 1e-5 * (1 + std::fabs(v));
  };
  for (int t = 0; t < c.batch; ++t) {
    std::vector<double> rowSums(size_t(m), 0.0);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p)
          acc += c.tf32 ? double(toTf32(opA(t, i, p))) * toTf32(opB(t, p, j))
                        : double(opA(t, i, p)) * opB(t, p, j);
        float x =
            float(c.alpha * acc +
                  (c.beta != 0 ? c.beta * double(c0[d.index(t, i, j)]) : 0.0));
        if (biasIn)
          x += bias.at(0, i,
                       0); // bias[i] along row i of D (an input: unchanged)
        if (auxOut) {
          EXPECT_NEAR(aux.at(0, i, j), asD(x), tolerance(x))
              << "aux " << i << "," << j;
        }
        double want = x;
        if (applyGelu)
          want = gelu(x);
        if (auxIn)
          want = geluGrad(aux0[aux.index(0, i, j)]) * x;
        rowSums[size_t(i)] += want;
        EXPECT_NEAR(d.at(t, i, j), asD(want), tolerance(want))
            << "D " << t << "," << i << "," << j;
      }
    for (int64_t r = 0; bgrad && r < bias.rows; ++r) {
      double want = 0; // DGELU_BGRAD: row sums of D; BGRADA/B: sums over k
      for (int64_t p = 0; e != CUBLASLT_EPILOGUE_DGELU_BGRAD && p < k; ++p)
        want += e == CUBLASLT_EPILOGUE_BGRADA ? opA(t, r, p) : opB(t, p, r);
      if (e == CUBLASLT_EPILOGUE_DGELU_BGRAD)
        want = rowSums[size_t(r)];
      EXPECT_NEAR(bias.at(0, r, 0), asD(want), tolerance(want) + 1e-4)
          << "bias " << r;
    }
  }
}

const cublasLtEpilogue_t kEpilogues[] = {
    CUBLASLT_EPILOGUE_DEFAULT,   CUBLASLT_EPILOGUE_BIAS,
    CUBLASLT_EPILOGUE_GELU,      CUBLASLT_EPILOGUE_GELU_AUX,
    CUBLASLT_EPILOGUE_GELU_BIAS, CUBLASLT_EPILOGUE_GELU_AUX_BIAS,
    CUBLASLT_EPILOGUE_DGELU,     CUBLASLT_EPILOGUE_DGELU_BGRAD,
    CUBLASLT_EPILOGUE_BGRADA,    CUBLASLT_EPILOGUE_BGRADB};

// Tests that every epilogue, in every supported type combination and with
// either operand transposed, matches the reference.
TEST_F(SimCublasLtTest, EpiloguesMatchReference) {
  struct Types {
    cudaDataType ab, cd;
    bool tf32;
  } types[] = {{CUDA_R_32F, CUDA_R_32F, false},
               {CUDA_R_16BF, CUDA_R_32F, false},
               {CUDA_R_16BF, CUDA_R_16BF, false},
               {CUDA_R_32F, CUDA_R_32F, true}};
  for (cublasLtEpilogue_t e : kEpilogues)
    for (const Types &t : types)
      for (int trans = 0; trans < 4; ++trans) {
        Case c;
        c.epilogue = e;
        c.ab = t.ab;
        c.cd = t.cd;
        c.tf32 = t.tf32;
        c.transA = trans & 1;
        c.transB = trans & 2;
        checkCase(c);
      }
}

// Tests strided batches with alpha and beta (C read back from D in place).
TEST_F(SimCublasLtTest, StridedBatchWithAlphaBeta) {
  for (bool transA : {false, true}) {
    Case c;
    c.batch = 3;
    c.alpha = 0.5f;
    c.beta = 2.0f;
    c.transA = transA;
    c.m = 9;
    c.n = 4;
    c.k = 33;
    checkCase(c);
    c.ab = c.cd = CUDA_R_16BF;
    checkCase(c);
  }
}

// Tests that TF32 drops input mantissa bits below 2^-10 (rounding to
// nearest even) and that a bf16 D rounds to nearest even.
TEST_F(SimCublasLtTest, Tf32AndBf16Rounding) {
  for (bool tf32 : {false, true}) {
    Matrix a(CUDA_R_32F, 1, 1), b(CUDA_R_32F, 1, 1), d(CUDA_R_32F, 1, 1);
    a.host = {1.0f + 1.0f / 4096}; // not a TF32 value: rounds to 1
    b.host = {1.0f + 3.0f / 4096}; // rounds up to 1 + 2^-10
    a.upload();
    b.upload();
    d.upload();
    Desc desc(tf32);
    const float one = 1, zero = 0;
    ASSERT_EQ(api().cublasLtMatmul(api().handle, desc.desc, &one,
                                   reinterpret_cast<void *>(a.device), a.layout,
                                   reinterpret_cast<void *>(b.device), b.layout,
                                   &zero, reinterpret_cast<void *>(d.device),
                                   d.layout, reinterpret_cast<void *>(d.device),
                                   d.layout, nullptr, nullptr, 0, nullptr),
              CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(api().cuStreamSynchronize(nullptr), CUDA_SUCCESS);
    d.download();
    EXPECT_EQ(d.host[0],
              tf32 ? 1.0f + 1.0f / 1024 : float(double(a.host[0]) * b.host[0]));
  }
  // bf16: alpha * 1 * 1 stored to a bf16 D.
  Matrix a(CUDA_R_16BF, 1, 1), b(CUDA_R_16BF, 1, 1), d(CUDA_R_16BF, 1, 1);
  a.host = b.host = {1.0f};
  a.upload();
  b.upload();
  d.upload();
  Desc desc;
  for (float alpha :
       {1.0f + 1.0f / 256, 1.0f + 3.0f / 256, -(1.0f + 5.0f / 256), NAN}) {
    const float zero = 0;
    ASSERT_EQ(api().cublasLtMatmul(api().handle, desc.desc, &alpha,
                                   reinterpret_cast<void *>(a.device), a.layout,
                                   reinterpret_cast<void *>(b.device), b.layout,
                                   &zero, reinterpret_cast<void *>(d.device),
                                   d.layout, reinterpret_cast<void *>(d.device),
                                   d.layout, nullptr, nullptr, 0, nullptr),
              CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(api().cuStreamSynchronize(nullptr), CUDA_SUCCESS);
    d.download();
    if (std::isnan(alpha)) {
      EXPECT_TRUE(std::isnan(d.host[0]));
    } else {
      EXPECT_EQ(d.host[0], toBf16(alpha))
          << alpha; // ties go to the even neighbour
    }
  }
}

// Tests that the heuristic finds no algorithm (NOT_SUPPORTED, count 0) for
// what cublasLtMatmul's datatypes table and the descriptor attributes'
// documentation rule out, and one for the rest.
TEST_F(SimCublasLtTest, HeuristicRefusesUndocumentedCombinations) {
  const auto F = CUDA_R_32F, H = CUDA_R_16BF;
  const auto supported = std::make_pair(CUBLAS_STATUS_SUCCESS, 1);
  const auto refused = std::make_pair(CUBLAS_STATUS_NOT_SUPPORTED, 0);
  auto check = [&](cudaDataType ab, cudaDataType cd, bool tf32,
                   cublasLtEpilogue_t e, int32_t biasType, int64_t auxLd,
                   std::pair<cublasStatus_t, int> want) {
    SCOPED_TRACE("A/B " + std::to_string(ab) + " D " + std::to_string(cd) +
                 " epilogue " + std::to_string(e) + " bias " +
                 std::to_string(biasType) + " auxLd " + std::to_string(auxLd));
    Matrix a(ab, 16, 4), b(ab, 4, 8), d(cd, 16, 8);
    a.upload();
    b.upload();
    d.upload();
    Desc desc(tf32);
    desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE, uint32_t(e));
    if (biasType != -1)
      desc.set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, biasType);
    desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, auxLd);
    EXPECT_EQ(heuristic(desc, a, b, d), want);
  };
  // The datatypes table: 32F compute takes bf16 A/B with a bf16 or fp32 D
  // and fp32 A/B with an fp32 D; FAST_TF32 only fp32.
  check(F, F, false, CUBLASLT_EPILOGUE_DEFAULT, -1, 0, supported);
  check(H, F, false, CUBLASLT_EPILOGUE_DEFAULT, -1, 0, supported);
  check(H, H, false, CUBLASLT_EPILOGUE_DEFAULT, -1, 0, supported);
  check(F, F, true, CUBLASLT_EPILOGUE_DEFAULT, -1, 0, supported);
  check(F, H, false, CUBLASLT_EPILOGUE_DEFAULT, -1, 0, refused);
  check(H, H, true, CUBLASLT_EPILOGUE_DEFAULT, -1, 0, refused);
  check(H, F, true, CUBLASLT_EPILOGUE_DEFAULT, -1, 0, refused);
  // Bias (and bias gradient) elements have D's type.
  check(H, H, false, CUBLASLT_EPILOGUE_BIAS, H, 0, supported);
  check(H, H, false, CUBLASLT_EPILOGUE_BIAS, F, 0, refused);
  check(F, F, false, CUBLASLT_EPILOGUE_GELU_BIAS, H, 0, refused);
  check(H, F, false, CUBLASLT_EPILOGUE_BGRADB, H, 0, refused);
  // The GELU aux ld: a multiple of 8, no less than D's rows (16).
  check(F, F, false, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, -1, 16, supported);
  check(F, F, false, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, -1, 20, refused);
  check(F, F, false, CUBLASLT_EPILOGUE_DGELU, -1, 8, refused);
  // ReLU epilogues are outside the simulator.
  check(F, F, false, CUBLASLT_EPILOGUE_RELU, -1, 0, refused);
}

// Tests that attribute values of the wrong size or unknown attributes are
// CUBLAS_STATUS_INVALID_VALUE, and a GEMM whose shapes disagree too.
TEST_F(SimCublasLtTest, RejectsInvalidValues) {
  Desc desc;
  EXPECT_EQ(desc.set(CUBLASLT_MATMUL_DESC_TRANSA, int64_t(1)),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, int32_t(8)),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(desc.set(cublasLtMatmulDescAttributes_t(9), int32_t(0)),
            CUBLAS_STATUS_INVALID_VALUE);
  Matrix a(CUDA_R_32F, 4, 4), b(CUDA_R_32F, 5, 4), d(CUDA_R_32F, 4, 4);
  a.upload();
  b.upload();
  d.upload();
  EXPECT_EQ(
      api().cublasLtMatrixLayoutSetAttribute(
          a.layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &a.ld, sizeof(a.ld)),
      CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(heuristic(desc, a, b, d).first,
            CUBLAS_STATUS_INVALID_VALUE); // k 4 vs 5
}

// Tests that host memory passed as an operand is refused before anything is
// queued.
TEST_F(SimCublasLtTest, RefusesHostMemory) {
  Matrix a(CUDA_R_32F, 4, 4), d(CUDA_R_32F, 4, 4);
  a.upload();
  d.upload();
  std::vector<float> host(16, 1.0f);
  Desc desc;
  const float one = 1, zero = 0;
  EXPECT_EQ(api().cublasLtMatmul(api().handle, desc.desc, &one,
                                 reinterpret_cast<void *>(a.device), a.layout,
                                 host.data(), a.layout, &zero,
                                 reinterpret_cast<void *>(d.device), d.layout,
                                 reinterpret_cast<void *>(d.device), d.layout,
                                 nullptr, nullptr, 0, nullptr),
            CUBLAS_STATUS_INVALID_VALUE);
}

// Tests that the matmul is an operation on its stream: D changes when the
// stream runs, with the alpha of the call.
TEST_F(SimCublasLtTest, RunsWhenItsStreamRuns) {
  Matrix a(CUDA_R_32F, 4, 4), d(CUDA_R_32F, 4, 4);
  a.host.assign(16, 1.0f);
  d.host.assign(16, -1.0f);
  a.upload();
  d.upload();
  CUstream stream;
  ASSERT_EQ(api().cuStreamCreate(&stream, 0), CUDA_SUCCESS);
  Desc desc;
  float alpha = 3, zero = 0;
  ASSERT_EQ(api().cublasLtMatmul(api().handle, desc.desc, &alpha,
                                 reinterpret_cast<void *>(a.device), a.layout,
                                 reinterpret_cast<void *>(a.device), a.layout,
                                 &zero, reinterpret_cast<void *>(d.device),
                                 d.layout, reinterpret_cast<void *>(d.device),
                                 d.layout, nullptr, nullptr, 0, stream),
            CUBLAS_STATUS_SUCCESS);
  alpha = 100; // read at the call (POINTER_MODE_HOST), not when the stream runs
  // Device pointers are host addresses in the simulator: before the stream
  // runs, D still holds what was uploaded.
  EXPECT_EQ(reinterpret_cast<const float *>(d.device)[0], -1.0f);
  ASSERT_EQ(api().cuStreamSynchronize(stream), CUDA_SUCCESS);
  d.download();
  EXPECT_EQ(d.host[0], 12.0f);
  EXPECT_EQ(d.host[15], 12.0f);
  api().cuStreamDestroy(stream);
}

} // namespace
