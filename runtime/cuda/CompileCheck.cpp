//===- CompileCheck.cpp - kiln-run --compile-only: NVRTC without a GPU ----===//

#include "runtime/cuda/CompileCheck.h"

#include "runtime/Artifact.h"
#include "runtime/cuda/JitCache.h"
#include "runtime/cuda/Nvrtc.h"
#include "runtime/schema/CudaSharedMemory.h"

#include <cstdint>

namespace kiln::rt::cuda {

namespace {
// 32-bit registers per SM on every architecture from sm_80 to sm_120.
constexpr int64_t kRegistersPerSm = 65536;
} // namespace

StatusOr<CompileCheckReport> runCompileCheck(const RunOptions &options,
                                             FILE *out) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Artifact> artifact,
                        Artifact::loadFile(options.artifactPath));
  const schema::Artifact &root = artifact->root();
  if (!root.target() || root.target()->str() != "cuda")
    return failedPrecondition(
        artifact->name(), ": --compile-only compiles CUDA artifacts; this one "
        "targets '", root.target() ? root.target()->str() : "", "'");
  std::vector<std::string> archs = options.archs;
  if (archs.empty())
    for (const flatbuffers::String *arch : *root.archs())
      archs.push_back(arch->str());
  for (const std::string &arch : archs)
    if (!isCudaArch(arch))
      return invalidArgument("--arch: '", arch, "' is not a CUDA architecture "
                             "(expected e.g. sm_80 or sm_90a)");

  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Nvrtc> nvrtc, Nvrtc::load());
  JitCache cache(*nvrtc, JitCache::cudaCacheDir());
  std::fprintf(out, "NVRTC %s (%s), cache %s\n", nvrtc->version().c_str(),
               nvrtc->libraryPath().c_str(), JitCache::cudaCacheDir().c_str());
  CompileCheckReport report;
  for (const std::string &arch : archs) {
    KILN_ASSIGN_OR_RETURN(JitArtifact first, cache.compileArtifact(*artifact, arch));
    KILN_ASSIGN_OR_RETURN(JitArtifact warm, cache.compileArtifact(*artifact, arch));
    std::fprintf(out, "%s: %zu kernels in %zu parts, cold %.3f s (%s), warm %.3f s (%s), "
                 "CUBIN %zu bytes\n", arch.c_str(), size_t(root.kernels()->size()),
                 first.parts.size(), first.seconds,
                 first.cacheHit ? "already cached" : "compiled", warm.seconds,
                 warm.cacheHit ? "cache hit" : "MISSED the cache", first.cubinBytes());
    if (!warm.cacheHit)
      report.problems.push_back(arch + ": the second lookup missed the cache (" +
                                warm.cachePaths() + ")");
    for (const schema::Kernel *kernel : *root.kernels()) {
      std::string entry = kernel->entry()->str();
      std::string location =
          kernel->location() ? kernel->location()->str() : "?";
      const KernelResources *r = first.resources(entry);
      if (!r) {
        report.problems.push_back(arch + ": kernel '" + entry + "' (" +
                                  location + ") is not an entry point of the "
                                  "CUBIN (missing extern \"C\" __global__?)");
        continue;
      }
      std::fprintf(out, "  %-40s %3d registers, %lld/%lld bytes spill "
                   "stores/loads, %lld bytes stack  %s\n", entry.c_str(),
                   r->registers, static_cast<long long>(r->spillStoreBytes),
                   static_cast<long long>(r->spillLoadBytes),
                   static_cast<long long>(r->stackBytes), location.c_str());
      if (r->spills())
        report.problems.push_back(
            arch + ": kernel '" + entry + "' (" + location + ") spills " +
            std::to_string(r->spillStoreBytes) + " bytes of stores and " +
            std::to_string(r->spillLoadBytes) + " bytes of loads (" +
            std::to_string(r->registers) + " registers)");
      // A block needs all its threads' registers on one SM at once: more
      // than the SM's register file and every launch fails ("too many
      // resources requested for launch").
      // Static + dynamic shared memory within the arch's opt-in limit, else
      // every launch on that arch fails (the attention tiles are planned for
      // the artifact's smallest arch: codegen/CudaAttentionKernels.h).
      int64_t dynamicShared =
          kernel->launch() ? kernel->launch()->shared_bytes() : 0;
      int64_t sharedLimit = schema::cudaMaxSharedBytesPerBlock(arch);
      if (r->staticSharedBytes + dynamicShared > sharedLimit)
        report.problems.push_back(
            arch + ": kernel '" + entry + "' (" + location + ") needs " +
            std::to_string(r->staticSharedBytes + dynamicShared) +
            " bytes of shared memory per block (" +
            std::to_string(r->staticSharedBytes) + " static + " +
            std::to_string(dynamicShared) + " dynamic), more than the " +
            std::to_string(sharedLimit) + " " + arch +
            " allows (compile the model with kilnc --cuda-arch listing " +
            arch + ")");
      int64_t threads = kernel->launch() ? kernel->launch()->block() : 0;
      if (int64_t(r->registers) * threads > kRegistersPerSm)
        report.problems.push_back(
            arch + ": kernel '" + entry + "' (" + location + ") needs " +
            std::to_string(r->registers) + " registers x " +
            std::to_string(threads) + " threads per block, more than the " +
            std::to_string(kRegistersPerSm) + " registers of an SM");
    }
  }
  return report;
}

} // namespace kiln::rt::cuda
