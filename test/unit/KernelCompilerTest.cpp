//===- KernelCompilerTest.cpp - JIT compile, cache hits, compiler errors --===//
//
// Each test uses its own empty cache directory so the first load is always
// cold; the compiler comes from $CXX/c++ as in kiln-run.
//
//===----------------------------------------------------------------------===//

#include "TestArtifact.h"

#include "runtime/FileIO.h"
#include "runtime/cpu/KernelCompiler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kiln::rt::test {
namespace {

using ::testing::HasSubstr;

cpu::KernelCompilerOptions testOptions(const std::string &cacheDir) {
  cpu::KernelCompilerOptions options =
      cpu::KernelCompilerOptions::fromEnvironment();
  options.cacheDir = cacheDir;
  // -O0 keeps the unit tests fast; the flags are part of the cache key.
  options.flags = {"-O0", "-fopenmp", "-shared", "-fPIC"};
  return options;
}

std::unique_ptr<Artifact> load(const ArtifactSpec &spec) {
  auto artifact = Artifact::loadBytes(serializeArtifact(spec), "model.kart");
  EXPECT_TRUE(artifact.ok()) << artifact.status().message();
  return std::move(artifact).value();
}

TEST(KernelCompilerTest, CompilesThenHitsTheCache) {
  std::string cache = makeTempDir() + "/nested/cache"; // created on demand
  std::unique_ptr<Artifact> artifact = load(minimalArtifact());

  cpu::KernelCompiler compiler(testOptions(cache));
  auto cold = compiler.load(*artifact);
  ASSERT_TRUE(cold.ok()) << cold.status().message();
  EXPECT_FALSE((*cold)->cacheHit());
  EXPECT_TRUE(fileExists((*cold)->libraryPath()));
  EXPECT_TRUE(fileExists((*cold)->sourcePath()));
  float loss = 0;
  void *buffers[] = {&loss};
  (*cold)->entry(0)(buffers);
  EXPECT_EQ(loss, 1.0f);

  // A second compiler (a second kiln-run process) finds the library.
  cpu::KernelCompiler again(testOptions(cache));
  auto warm = again.load(*artifact);
  ASSERT_TRUE(warm.ok()) << warm.status().message();
  EXPECT_TRUE((*warm)->cacheHit());
  EXPECT_EQ((*warm)->libraryPath(), (*cold)->libraryPath());
}

TEST(KernelCompilerTest, DifferentFlagsDifferentCacheEntry) {
  std::string cache = makeTempDir();
  std::unique_ptr<Artifact> artifact = load(minimalArtifact());
  auto a = cpu::KernelCompiler(testOptions(cache)).load(*artifact);
  cpu::KernelCompilerOptions other = testOptions(cache);
  other.flags.insert(other.flags.begin(), "-O1");
  auto b = cpu::KernelCompiler(other).load(*artifact);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_FALSE((*b)->cacheHit());
  EXPECT_NE((*a)->libraryPath(), (*b)->libraryPath());
}

TEST(KernelCompilerTest, CorruptCacheEntryIsRebuilt) {
  // A library left truncated by a full disk must be rebuilt, not crash.
  // (Uses a fresh cache path: a library already loaded in this process stays
  // mapped, so dlopen would hand it back.)
  std::string cache = makeTempDir();
  std::unique_ptr<Artifact> artifact = load(minimalArtifact());
  cpu::KernelCompiler compiler(testOptions(cache));
  auto path = compiler.cachedLibraryPath(*artifact);
  ASSERT_TRUE(path.ok()) << path.status().message();
  writeFile(*path, std::string("not an ELF file"));
  auto library = compiler.load(*artifact);
  ASSERT_TRUE(library.ok()) << library.status().message();
  EXPECT_FALSE((*library)->cacheHit());
  EXPECT_EQ((*library)->libraryPath(), *path);
  float loss = 0;
  void *buffers[] = {&loss};
  (*library)->entry(0)(buffers);
  EXPECT_EQ(loss, 1.0f);
}

TEST(KernelCompilerTest, CompileErrorShowsOutputAndSource) {
  std::string cache = makeTempDir();
  ArtifactSpec spec = minimalArtifact();
  spec.kernels[0].source =
      "extern \"C\" void k_one(void *const *b) { this is not C++; }";
  std::unique_ptr<Artifact> artifact = load(spec);
  auto library = cpu::KernelCompiler(testOptions(cache)).load(*artifact);
  ASSERT_FALSE(library.ok());
  const std::string &message = library.status().message();
  EXPECT_THAT(message, HasSubstr("model.kart: compiling the generated kernels "
                                 "failed"));
  EXPECT_THAT(message, HasSubstr("source kept at " + cache + "/kiln-"));
  EXPECT_THAT(message, HasSubstr("error"));
  // No broken library may be left behind for the next run to pick up.
  std::string stem = message.substr(message.find(cache + "/kiln-"));
  stem = stem.substr(0, stem.find(".cpp"));
  EXPECT_TRUE(fileExists(stem + ".cpp"));
  EXPECT_FALSE(fileExists(stem + ".so"));
}

TEST(KernelCompilerTest, MissingEntryNamesKernelAndLocation) {
  std::string cache = makeTempDir();
  ArtifactSpec spec = minimalArtifact();
  spec.kernels[0].source = "extern \"C\" void k_other(void *const *) {}";
  spec.kernels[0].location = "gpt.kiln:12:5";
  std::unique_ptr<Artifact> artifact = load(spec);
  auto library = cpu::KernelCompiler(testOptions(cache)).load(*artifact);
  ASSERT_FALSE(library.ok());
  EXPECT_THAT(library.status().message(),
              HasSubstr("model.kart: kernel 0 'k_one' (gpt.kiln:12:5): entry "
                        "point not found"));
}

TEST(KernelCompilerTest, MissingCompilerIsAnError) {
  std::string cache = makeTempDir();
  cpu::KernelCompilerOptions options = testOptions(cache);
  options.compiler = "/nonexistent/c++";
  std::unique_ptr<Artifact> artifact = load(minimalArtifact());
  auto library = cpu::KernelCompiler(options).load(*artifact);
  ASSERT_FALSE(library.ok());
  EXPECT_THAT(library.status().message(), HasSubstr("/nonexistent/c++"));
}

} // namespace
} // namespace kiln::rt::test

namespace kiln::rt::test {
namespace {

// A cold load compiles the kernels in parts side by side: every kernel in
// exactly one part, in order, each part opening with the prelude; never
// more parts than kernels.
TEST(KernelCompilerTest, PartsHoldEveryKernelOnce) {
  ArtifactSpec spec = minimalArtifact();
  spec.prelude = "// the prelude\n";
  KernelSpec first = spec.kernels[0];
  for (int i = 1; i < 5; ++i) {
    KernelSpec k = first;
    k.entry = "k_extra" + std::to_string(i);
    k.source = "extern \"C\" void " + k.entry + "(void *const *b) { (void)b; }";
    spec.kernels.push_back(k);
  }
  std::unique_ptr<Artifact> artifact = load(spec);
  for (size_t parts : {1u, 2u, 3u, 8u}) {
    std::vector<uint32_t> firstKernels;
    std::vector<std::string> units = cpu::KernelCompiler::translationUnitParts(
        artifact->root(), parts, /*withLocations=*/true, &firstKernels);
    EXPECT_EQ(units.size(), std::min<size_t>(parts, 5)) << parts;
    // Each unit holds exactly the kernels from its first to the next unit's:
    // the CUDA backend asks only that part's module for them.
    ASSERT_EQ(firstKernels.size(), units.size()) << parts;
    for (size_t u = 0; u < units.size(); ++u) {
      uint32_t end = u + 1 < units.size() ? firstKernels[u + 1] : spec.kernels.size();
      for (uint32_t k = 0; k < spec.kernels.size(); ++k) {
        bool inUnit = k >= firstKernels[u] && k < end;
        EXPECT_EQ(units[u].find("void " + spec.kernels[k].entry + "(") != std::string::npos, inUnit)
            << "kernel " << k << " in unit " << u << " of " << parts;
      }
    }
    std::string all;
    for (const std::string &unit : units) {
      EXPECT_NE(unit.find("// the prelude"), std::string::npos);
      EXPECT_NE(unit.find("// kernel "), std::string::npos); // none empty
      all += unit;
    }
    size_t at = 0;
    for (const KernelSpec &k : spec.kernels) {
      size_t found = all.find("void " + k.entry + "(", at);
      ASSERT_NE(found, std::string::npos) << k.entry << " with " << parts << " parts";
      EXPECT_EQ(all.find("void " + k.entry + "(", found + 1), std::string::npos);
      at = found;
    }
  }
}

} // namespace
} // namespace kiln::rt::test
