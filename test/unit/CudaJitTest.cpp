//===- CudaJitTest.cpp - NVRTC, the CUBIN cache and --compile-only --------===//
//
// NVRTC needs no GPU, so everything here runs on CPU-only CI: real CUDA
// sources compiled for sm_80 and sm_90a, the on-disk cache (cold, warm,
// keys, corrupt entries), compile errors with NVRTC's log, ptxas' spill
// report, the library search messages, and kiln-run --compile-only as a
// process. Where NVRTC cannot be loaded (no toolkit) the NVRTC tests skip
// with the loader's message.
//
//===----------------------------------------------------------------------===//

#include "runtime/Artifact.h"
#include "runtime/FileIO.h"
#include "runtime/cuda/DynamicLibrary.h"
#include "runtime/cuda/GemmEpilogueFallback.h"
#include "runtime/cuda/JitCache.h"
#include "runtime/cuda/Nvrtc.h"

#include "TestArtifact.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <utility>
#include <sys/wait.h>

namespace kiln::rt::cuda {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The agreed entry signature; `scale` changes the source (and the key).
std::string doublingKernel(const std::string &name, float scale = 2.0f) {
  return "extern \"C\" __global__ void " + name +
         "(void* const* __restrict__ buffers) {\n"
         "  float* x = static_cast<float*>(buffers[0]);\n"
         "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
         "  if (i < 1024) x[i] *= " + std::to_string(scale) + "f;\n"
         "}\n";
}

// 96 live accumulators under __launch_bounds__(1024, 2) (at most 32
// registers per thread): ptxas must spill.
const char *kSpillingKernel = R"(
extern "C" __global__ void __launch_bounds__(1024, 2)
spills(void* const* __restrict__ buffers) {
  float* x = static_cast<float*>(buffers[0]);
  float acc[96];
#pragma unroll
  for (int i = 0; i < 96; ++i) acc[i] = x[threadIdx.x + i * 1024];
  for (int r = 0; r < 8; ++r) {
#pragma unroll
    for (int i = 0; i < 96; ++i) acc[i] = acc[i] * acc[(i + r + 1) % 96] + x[i];
  }
  float s = 0;
#pragma unroll
  for (int i = 0; i < 96; ++i) s += acc[i];
  x[threadIdx.x] = s;
}
)";

class CudaJitTest : public ::testing::Test {
protected:
  void SetUp() override {
    auto nvrtc = Nvrtc::load();
    if (!nvrtc.ok())
      GTEST_SKIP() << nvrtc.status().message();
    nvrtc_ = std::move(*nvrtc);
    dir_ = test::makeTempDir();
  }
  std::unique_ptr<Nvrtc> nvrtc_;
  std::string dir_;
};

// A CUBIN is an ELF file whose e_machine is EM_CUDA (190).
void expectCubin(const std::vector<uint8_t> &cubin) {
  ASSERT_GT(cubin.size(), 64u);
  EXPECT_EQ(std::memcmp(cubin.data(), "\x7f" "ELF", 4), 0);
  uint16_t machine = 0;
  std::memcpy(&machine, cubin.data() + 18, 2);
  EXPECT_EQ(machine, 190);
}

TEST_F(CudaJitTest, CompilesForSm80AndSm90a) {
  JitCache cache(*nvrtc_, dir_);
  auto sm80 = cache.compile(doublingKernel("twice"), "t.cu", "sm_80");
  ASSERT_TRUE(sm80.ok()) << sm80.status().message();
  auto sm90a = cache.compile(doublingKernel("twice"), "t.cu", "sm_90a");
  ASSERT_TRUE(sm90a.ok()) << sm90a.status().message();
  expectCubin(sm80->cubin);
  expectCubin(sm90a->cubin);
  EXPECT_NE(sm80->cubin, sm90a->cubin); // different SASS
  for (const JitModule *m : {&*sm80, &*sm90a}) {
    const KernelResources *r = m->resources("twice");
    ASSERT_NE(r, nullptr) << m->arch;
    EXPECT_GT(r->registers, 0);
    EXPECT_FALSE(r->spills());
  }
}

// NVRTC 12.9+ has its own cache (with a GPU driver present, as on the H100
// where this was found): a second compile of the same source came back
// without ptxas' report and --compile-only called every kernel "not an entry
// point". Kiln turns it off; each compile carries the report.
TEST_F(CudaJitTest, EveryCompileCarriesThePtxasReport) {
  int major = 0, minor = 0;
  ASSERT_EQ(std::sscanf(nvrtc_->version().c_str(), "%d.%d", &major, &minor), 2);
  std::vector<std::string> options = nvrtc_->compileOptions("sm_90a");
  bool noCache = std::find(options.begin(), options.end(), "--no-cache") !=
                 options.end();
  EXPECT_EQ(noCache, Nvrtc::hasOwnCache(major, minor)) << nvrtc_->version();
  EXPECT_TRUE(Nvrtc::hasOwnCache(13, 0));
  EXPECT_TRUE(Nvrtc::hasOwnCache(12, 9));
  EXPECT_FALSE(Nvrtc::hasOwnCache(12, 8));
  for (int i = 0; i < 2; ++i) {
    auto out = nvrtc_->compile(doublingKernel("twice"), "t.cu", "sm_90a");
    ASSERT_TRUE(out.ok()) << out.status().message();
    std::vector<KernelResources> report = parsePtxasReport(out->log);
    ASSERT_EQ(report.size(), 1u) << "compile " << i << ", log:\n" << out->log;
    EXPECT_EQ(report[0].entry, "twice");
  }
}

// Kiln's kernels never contract a * b + c into one FMA (Nvrtc::options'
// --fmad=false), so a value's bits do not depend on which kernel fusion or
// recompute put its ops in. The same expression compiled with Kiln's
// options gives the same CUBIN as the product and sum rounded one by one
// (__fmul_rn, __fadd_rn: never contracted), and not the CUBIN of an
// explicit fmaf (which it would be with contraction on, NVRTC's default).
TEST_F(CudaJitTest, KernelsDoNotContractMultiplyAdd) {
  auto kernel = [](const std::string &expression) {
    return "extern \"C\" __global__ void mad(void* const* __restrict__ buffers) {\n"
           "  const float* a = static_cast<const float*>(buffers[0]);\n"
           "  float* d = static_cast<float*>(buffers[1]);\n"
           "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
           "  d[i] = " + expression + ";\n"
           "}\n";
  };
  auto cubin = [&](const std::string &expression) {
    auto out = nvrtc_->compile(kernel(expression), "mad.cu", "sm_90a");
    EXPECT_TRUE(out.ok()) << out.status().message();
    return out.ok() ? out->cubin : std::vector<uint8_t>{};
  };
  std::vector<uint8_t> plain = cubin("a[i] * a[i + 1] + a[i + 2]");
  ASSERT_FALSE(plain.empty());
  EXPECT_EQ(plain, cubin("__fadd_rn(__fmul_rn(a[i], a[i + 1]), a[i + 2])"));
  EXPECT_NE(plain, cubin("fmaf(a[i], a[i + 1], a[i + 2])"));
}

TEST_F(CudaJitTest, SecondLookupIsAWarmCacheHit) {
  JitCache cache(*nvrtc_, dir_);
  std::string source = doublingKernel("twice");
  auto cold = cache.compile(source, "t.cu", "sm_80");
  ASSERT_TRUE(cold.ok()) << cold.status().message();
  EXPECT_FALSE(cold->cacheHit);
  auto warm = cache.compile(source, "t.cu", "sm_80");
  ASSERT_TRUE(warm.ok()) << warm.status().message();
  EXPECT_TRUE(warm->cacheHit);
  EXPECT_EQ(warm->cubin, cold->cubin);
  EXPECT_EQ(warm->cachePath, cold->cachePath);
  // The report survives the cache: registers are known on a warm hit.
  ASSERT_NE(warm->resources("twice"), nullptr);
  EXPECT_EQ(warm->resources("twice")->registers,
            cold->resources("twice")->registers);
  // Reading a few KiB versus running NVRTC and ptxas (>= tens of ms).
  EXPECT_LT(warm->seconds, cold->seconds);
}

TEST_F(CudaJitTest, KeyChangesWithArchAndSource) {
  JitCache cache(*nvrtc_, dir_);
  std::string a = doublingKernel("twice", 2.0f);
  std::string b = doublingKernel("twice", 3.0f);
  EXPECT_EQ(cache.key(a, "sm_80"), cache.key(a, "sm_80"));
  EXPECT_NE(cache.key(a, "sm_80"), cache.key(a, "sm_90a"));
  EXPECT_NE(cache.key(a, "sm_80"), cache.key(b, "sm_80"));
  EXPECT_EQ(cache.entryPath(a, "sm_80"), dir_ + "/" + cache.key(a, "sm_80") + ".cubin");
}

// A torn write (truncation) or a flipped byte must be recompiled, never
// handed to cuModuleLoadData.
TEST_F(CudaJitTest, CorruptEntryIsRecompiled) {
  JitCache cache(*nvrtc_, dir_);
  std::string source = doublingKernel("twice");
  auto cold = cache.compile(source, "t.cu", "sm_80");
  ASSERT_TRUE(cold.ok()) << cold.status().message();
  auto bytes = readFileBytes(cold->cachePath);
  ASSERT_TRUE(bytes.ok());

  std::vector<uint8_t> truncated(bytes->begin(), bytes->begin() + bytes->size() / 2);
  test::writeFile(cold->cachePath, truncated);
  auto again = cache.compile(source, "t.cu", "sm_80");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_FALSE(again->cacheHit);
  EXPECT_TRUE(again->replacedCorruptEntry);
  EXPECT_EQ(again->cubin, cold->cubin);

  std::vector<uint8_t> flipped = *bytes;
  flipped[flipped.size() / 2] ^= 0x40;
  test::writeFile(cold->cachePath, flipped);
  std::vector<uint8_t> cubin;
  std::string log;
  EXPECT_THAT(decodeCacheEntry(flipped, cubin, log).message(),
              HasSubstr("checksum mismatch"));
  auto third = cache.compile(source, "t.cu", "sm_80");
  ASSERT_TRUE(third.ok()) << third.status().message();
  EXPECT_TRUE(third->replacedCorruptEntry);
  // ... and the replaced entry is whole again.
  auto warm = cache.compile(source, "t.cu", "sm_80");
  ASSERT_TRUE(warm.ok());
  EXPECT_TRUE(warm->cacheHit);
}

TEST_F(CudaJitTest, SyntaxErrorCarriesNvrtcLog) {
  JitCache cache(*nvrtc_, dir_);
  std::string source = "extern \"C\" __global__ void broken(void* const* b) {\n"
                       "  float* x = static_cast<float*>(b[0]);\n"
                       "  x[0] = undeclared_name;\n"
                       "}\n";
  auto result = cache.compile(source, "model.cu", "sm_80");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
  const std::string &message = result.status().message();
  EXPECT_THAT(message, HasSubstr("failed to compile model.cu for sm_80"));
  EXPECT_THAT(message, HasSubstr("model.cu(3)")); // NVRTC's own line
  EXPECT_THAT(message, HasSubstr("undeclared_name"));
  EXPECT_THAT(message, HasSubstr("source kept at " + dir_));
  EXPECT_FALSE(fileExists(cache.entryPath(source, "sm_80")));
}

TEST_F(CudaJitTest, SpillingKernelIsDetected) {
  JitCache cache(*nvrtc_, dir_);
  auto result = cache.compile(std::string(kSpillingKernel) + doublingKernel("twice"),
                              "spill.cu", "sm_80");
  ASSERT_TRUE(result.ok()) << result.status().message();
  const KernelResources *spills = result->resources("spills");
  ASSERT_NE(spills, nullptr);
  EXPECT_TRUE(spills->spills());
  EXPECT_GT(spills->spillStoreBytes, 0);
  EXPECT_LE(spills->registers, 32);
  ASSERT_NE(result->resources("twice"), nullptr);
  EXPECT_FALSE(result->resources("twice")->spills());
}

TEST_F(CudaJitTest, UnknownArchIsRefused) {
  auto result = nvrtc_->compile(doublingKernel("twice"), "t.cu", "compute_80");
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(), HasSubstr("not a CUDA architecture"));
}

// Device functions get their own "Function properties" block; their
// frame must not be charged to the entry that was compiled before them.
// A kernel with a WMMA tile, as the bf16 attention kernels have: needs the
// toolkit's <mma.h>, which NVRTC does not carry built in.
const char *kWmmaKernel = R"(
#include <mma.h>
#include <cuda_bf16.h>
extern "C" __global__ void wmma_tile(void* const* __restrict__ buffers) {
  using namespace nvcuda;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  wmma::store_matrix_sync((float*)buffers[0], acc, 16, wmma::mem_row_major);
}
)";

// Sets an environment variable for one scope, restoring it after.
class ScopedEnv {
public:
  ScopedEnv(const char *name, const std::string &value) : name_(name) {
    if (const char *old = std::getenv(name))
      old_ = old, had_ = true;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_)
      ::setenv(name_, old_.c_str(), 1);
    else
      ::unsetenv(name_);
  }

private:
  const char *name_;
  std::string old_;
  bool had_ = false;
};

TEST_F(CudaJitTest, WmmaKernelFindsTheToolkitHeaders) {
  auto result = nvrtc_->compile(kWmmaKernel, "wmma.cu", "sm_80");
  ASSERT_TRUE(result.ok()) << result.status().message();
  expectCubin(result->cubin);
}

// $KILN_CUDA_LIB_DIR=<toolkit>/lib64 makes <toolkit>/include the include
// directory; one without <mma.h> is a clear error naming the header, the
// directory and the variables, not NVRTC's "cannot open source file".
TEST_F(CudaJitTest, MissingToolkitHeaderIsAClearError) {
  std::string toolkit = test::makeTempDir();
  ASSERT_TRUE(createDirectories(toolkit + "/include").ok());
  ASSERT_TRUE(createDirectories(toolkit + "/lib64").ok());
  std::ofstream(toolkit + "/include/cuda_runtime.h") << "// stub\n";
  {
    ScopedEnv lib("KILN_CUDA_LIB_DIR", toolkit + "/lib64/");
    ScopedEnv include("KILN_CUDA_INCLUDE_DIR", "");
    auto result = nvrtc_->compile(kWmmaKernel, "wmma.cu", "sm_80");
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.status().code(), StatusCode::kNotFound);
    EXPECT_THAT(result.status().message(),
                HasSubstr("wmma.cu includes <mma.h>, a CUDA toolkit header"));
    EXPECT_THAT(result.status().message(),
                HasSubstr("'" + toolkit + "/include' does not have it"));
    EXPECT_THAT(result.status().message(), HasSubstr("KILN_CUDA_INCLUDE_DIR"));
  }
  {
    ScopedEnv include("KILN_CUDA_INCLUDE_DIR", toolkit + "/lib64");
    auto result = nvrtc_->compile(kWmmaKernel, "wmma.cu", "sm_80");
    ASSERT_FALSE(result.ok());
    EXPECT_THAT(result.status().message(),
                HasSubstr("'" + toolkit + "/lib64' does not have it"));
  }
}

TEST(PtxasReportTest, AttributesNumbersToTheRightEntry) {
  std::string log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Function properties for helper\n"
      "ptxas         .     64 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\n"
      "ptxas info    : Compiling entry function 'a' for 'sm_80'\n"
      "ptxas info    : Function properties for a\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 12 registers, used 0 barriers, 360 bytes cmem[0]\n"
      "ptxas info    : Compiling entry function 'b' for 'sm_80'\n"
      "ptxas info    : Function properties for b\n"
      "ptxas         .     40 bytes stack frame, 16 bytes spill stores, 24 bytes spill loads\n"
      "ptxas info    : Used 255 registers, used 1 barriers, 32 bytes smem, 360 bytes cmem[0]\n";
  std::vector<KernelResources> r = parsePtxasReport(log);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].entry, "a");
  EXPECT_EQ(r[0].registers, 12);
  EXPECT_FALSE(r[0].spills());
  EXPECT_EQ(r[1].entry, "b");
  EXPECT_EQ(r[1].registers, 255);
  EXPECT_EQ(r[1].stackBytes, 40);
  EXPECT_EQ(r[1].spillStoreBytes, 16);
  EXPECT_EQ(r[1].spillLoadBytes, 24);
  // Static shared memory (what --compile-only adds to the dynamic bytes
  // before comparing with the arch's limit); absent means none.
  EXPECT_EQ(r[0].staticSharedBytes, 0);
  EXPECT_EQ(r[1].staticSharedBytes, 32);
}

TEST(DynamicLibraryTest, MissingLibraryNamesEveryPlaceSearched) {
  std::string dir = test::makeTempDir();
  ::setenv("KILN_CUDA_LIB_DIR", dir.c_str(), 1);
  auto lib = DynamicLibrary::open("libmissing", {"libkiln-no-such-lib.so.7"});
  ::unsetenv("KILN_CUDA_LIB_DIR");
  ASSERT_FALSE(lib.ok());
  const std::string &message = lib.status().message();
  EXPECT_THAT(message, HasSubstr("cannot load libmissing"));
  EXPECT_THAT(message, HasSubstr(dir + "/libkiln-no-such-lib.so.7: no such file"));
  EXPECT_THAT(message, HasSubstr("/lib/libkiln-no-such-lib.so.7"));
  EXPECT_THAT(message, HasSubstr("/../lib/libkiln-no-such-lib.so.7"));
  EXPECT_THAT(message, HasSubstr("/usr/local/cuda/lib64/libkiln-no-such-lib.so.7"));
  EXPECT_THAT(message, HasSubstr("(default loader path)"));
}

TEST(DynamicLibraryTest, MissingSymbolNamesSymbolAndLibrary) {
  auto lib = DynamicLibrary::open("libc", {"libc.so.6"});
  ASSERT_TRUE(lib.ok()) << lib.status().message();
  EXPECT_TRUE((*lib)->symbol("malloc").ok());
  auto missing = (*lib)->symbol("kiln_no_such_symbol");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(),
              HasSubstr("libc (libc.so.6) has no symbol 'kiln_no_such_symbol'"));
}

// --- kiln-run --compile-only, as a process --------------------------------

// A CUDA artifact whose "step" calls its kernels (entry, source) in order on
// one buffer; kernel i is at model.kiln:(i + 3):5.
test::ArtifactSpec cudaArtifactOf(const std::vector<std::pair<std::string, std::string>> &kernels) {
  test::ArtifactSpec spec;
  spec.target = "cuda";
  spec.archs = {"sm_80", "sm_90a"};
  spec.buffers.push_back({"loss", schema::BufferRole_Loss});
  spec.buffers.push_back({"x", schema::BufferRole_Activation, schema::DType_F32, {1024}});
  for (size_t i = 0; i < kernels.size(); ++i) {
    test::KernelSpec kernel{kernels[i].first, kernels[i].second,
                            "model.kiln:" + std::to_string(i + 3) + ":5", "kiln.mul"};
    kernel.launch = schema::KernelLaunch(4, 256, 0);
    spec.kernels.push_back(kernel);
    test::StepSpec step;
    step.kernel = static_cast<uint32_t>(i);
    step.buffers = {1};
    spec.schedule.push_back(step);
  }
  return spec;
}

// The same with every entry in kernel 0's `source`.
test::ArtifactSpec cudaArtifact(const std::string &source,
                                const std::vector<std::string> &entries) {
  std::vector<std::pair<std::string, std::string>> kernels;
  for (size_t i = 0; i < entries.size(); ++i)
    kernels.push_back({entries[i], i == 0 ? source : "// in kernel 0's source\n"});
  return cudaArtifactOf(kernels);
}

int runCompileOnly(const std::string &dir, const test::ArtifactSpec &spec,
                   const std::string &extra, std::string *output) {
  std::string path = dir + "/model.kart";
  test::writeFile(path, test::serializeArtifact(spec));
  std::string log = dir + "/tool.log";
  std::string cmd = "KILN_CACHE_DIR=" + dir + "/cache " + KILN_RUN_PATH + " " +
                    path + " --compile-only " + extra + " >" + log + " 2>&1";
  int status = std::system(cmd.c_str());
  std::ifstream in(log);
  output->assign(std::istreambuf_iterator<char>(in), {});
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST_F(CudaJitTest, CompileOnlyReportsEveryKernelForEveryArch) {
  std::string output;
  int code = runCompileOnly(dir_, cudaArtifact(doublingKernel("twice"), {"twice"}),
                            "", &output);
  EXPECT_EQ(code, 0) << output;
  EXPECT_THAT(output, HasSubstr("sm_80: 1 kernels in 1 parts, cold"));
  EXPECT_THAT(output, HasSubstr("sm_90a: 1 kernels in 1 parts, cold"));
  EXPECT_THAT(output, HasSubstr("(compiled), warm"));
  EXPECT_THAT(output, HasSubstr("(cache hit)"));
  EXPECT_THAT(output, HasSubstr("registers"));
  EXPECT_THAT(output, HasSubstr("model.kiln:3:5"));
  // --arch overrides the artifact's list.
  code = runCompileOnly(dir_, cudaArtifact(doublingKernel("twice"), {"twice"}),
                        "--arch sm_86", &output);
  EXPECT_EQ(code, 0) << output;
  EXPECT_THAT(output, HasSubstr("sm_86: 1 kernels"));
  EXPECT_THAT(output, Not(HasSubstr("sm_90a")));
}

// An artifact's kernels compile in parts side by side, each its own CUBIN
// and cache entry: every entry is in exactly one part, with its ptxas
// report; a warm load hits every part; an edit of one kernel recompiles
// only its part.
TEST_F(CudaJitTest, ArtifactCompilesInPartsCachedEachOnItsOwn) {
  auto artifactWith = [&](const std::vector<std::string> &names) {
    std::vector<std::pair<std::string, std::string>> kernels;
    for (size_t i = 0; i < names.size(); ++i)
      kernels.push_back({names[i], doublingKernel(names[i], 2.0f + i)});
    auto artifact =
        Artifact::loadBytes(test::serializeArtifact(cudaArtifactOf(kernels)), "model.kart");
    EXPECT_TRUE(artifact.ok()) << artifact.status().message();
    return std::move(*artifact);
  };
  JitCache cache(*nvrtc_, dir_);
  std::unique_ptr<Artifact> four = artifactWith({"k0", "k1", "k2", "k3"});
  auto cold = cache.compileArtifact(*four, "sm_90a", /*parts=*/3);
  ASSERT_TRUE(cold.ok()) << cold.status().message();
  ASSERT_EQ(cold->parts.size(), 3u);
  EXPECT_FALSE(cold->cacheHit);
  const std::vector<std::string> entries = {"k0", "k1", "k2", "k3"};
  for (uint32_t k = 0; k < entries.size(); ++k) {
    int in = 0;
    for (const JitModule &part : cold->parts) {
      expectCubin(part.cubin);
      in += part.resources(entries[k]) ? 1 : 0;
    }
    EXPECT_EQ(in, 1) << entries[k];
    EXPECT_NE(cold->resources(entries[k]), nullptr) << entries[k];
    // partOf names that part: the backend asks no other module for it.
    EXPECT_NE(cold->parts[cold->partOf(k)].resources(entries[k]), nullptr) << entries[k];
  }
  auto warm = cache.compileArtifact(*four, "sm_90a", 3);
  ASSERT_TRUE(warm.ok());
  EXPECT_TRUE(warm->cacheHit);
  EXPECT_EQ(warm->cubinBytes(), cold->cubinBytes());
  // k3 renamed: the last part changes, the others are cache hits.
  std::unique_ptr<Artifact> edited = artifactWith({"k0", "k1", "k2", "k3b"});
  auto again = cache.compileArtifact(*edited, "sm_90a", 3);
  ASSERT_TRUE(again.ok());
  int compiled = 0;
  for (const JitModule &part : again->parts)
    compiled += part.cacheHit ? 0 : 1;
  EXPECT_EQ(compiled, 1);
  EXPECT_NE(again->resources("k3b"), nullptr);
  // One part: the whole unit, as one module.
  auto whole = cache.compileArtifact(*four, "sm_90a", 1);
  ASSERT_TRUE(whole.ok());
  ASSERT_EQ(whole->parts.size(), 1u);
  for (const char *entry : {"k0", "k1", "k2", "k3"})
    EXPECT_NE(whole->parts[0].resources(entry), nullptr) << entry;
}

TEST_F(CudaJitTest, CompileOnlyFailsOnSpills) {
  std::string output;
  int code = runCompileOnly(dir_, cudaArtifact(kSpillingKernel, {"spills"}),
                            "--arch sm_80", &output);
  EXPECT_EQ(code, 1) << output;
  EXPECT_THAT(output, HasSubstr("error: sm_80: kernel 'spills' (model.kiln:3:5) spills"));
}

TEST_F(CudaJitTest, CompileOnlyFailsOnCompileErrorsAndMissingEntries) {
  std::string output;
  int code = runCompileOnly(dir_, cudaArtifact("this is not CUDA;", {"k"}),
                            "--arch sm_80", &output);
  EXPECT_EQ(code, 1) << output;
  EXPECT_THAT(output, HasSubstr("NVRTC"));
  EXPECT_THAT(output, HasSubstr("error"));
  // A kernel the source does not define as an entry point.
  code = runCompileOnly(dir_, cudaArtifact(doublingKernel("twice"), {"twice", "other"}),
                        "--arch sm_80", &output);
  EXPECT_EQ(code, 1) << output;
  EXPECT_THAT(output, HasSubstr("kernel 'other' (model.kiln:4:5) is not an entry point"));
}

TEST(CompileOnlyTest, CpuArtifactIsRefused) {
  std::string dir = test::makeTempDir();
  std::string output;
  int code = runCompileOnly(dir, test::minimalArtifact(), "", &output);
  EXPECT_EQ(code, 1) << output;
  EXPECT_THAT(output, HasSubstr("--compile-only compiles CUDA artifacts"));
}

// The GEMM epilogue fallback (GemmEpilogueFallback.h) is runtime source:
// NVRTC compiles it for both archs Kiln targets, every entry the plans name
// present and none spilling. (Its numerics: test/e2e/cuda_sim/
// gemm_epilogue_fallback.test, against the CPU backend.)
TEST(GemmEpilogueFallbackTest, CompilesWithNvrtc) {
  auto nvrtc = Nvrtc::load();
  if (!nvrtc.ok())
    GTEST_SKIP() << nvrtc.status().message();
  for (const char *arch : {"sm_80", "sm_90a"}) {
    auto out = (*nvrtc)->compile(gemmEpilogueSource(), "gemm_epilogue.cu", arch);
    ASSERT_TRUE(out.ok()) << arch << ": " << out.status().message();
    std::vector<std::string> entries;
    for (const KernelResources &k : parsePtxasReport(out->log)) {
      entries.push_back(k.entry);
      EXPECT_FALSE(k.spills()) << k.entry;
    }
    EXPECT_THAT(entries, ::testing::UnorderedElementsAre(
                             "kiln_epilogue_bias_gelu_f32", "kiln_epilogue_bias_gelu_bf16",
                             "kiln_epilogue_dgelu_f32", "kiln_epilogue_dgelu_bf16",
                             "kiln_epilogue_sum_f32", "kiln_epilogue_sum_bf16"));
  }
}

} // namespace
} // namespace kiln::rt::cuda
