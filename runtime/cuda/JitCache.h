//===- JitCache.h - NVRTC compiles of an artifact, cached on disk ---------===//
//
// The prelude and the kernels of a CUDA artifact are compiled per
// architecture in at most kArtifactParts translation units of about equal
// source size (NVRTC's start-up and header parsing dominate small kernels,
// so a few programs are far faster than one per kernel), side by side on
// as many threads as there are cores, each into a CUBIN of its own, loaded
// later as a CUmodule of its own. The split depends on the artifact only,
// so every machine looks up the same cache entries.
//
// Cache: $KILN_CACHE_DIR (default ~/.cache/kiln) / cuda / <key>.cubin, with
// key = FNV-1a 64 over the source, the architecture, the NVRTC version and
// the compile options. An entry is a small envelope around the CUBIN:
//   "KILNCUBN" | u32 format | u32 0 | u64 cubin bytes | u64 log bytes
//   | u64 FNV-1a of cubin+log | cubin (ELF) | ptxas report
// The report is kept so a warm hit still knows every kernel's registers and
// spills. Entries are written atomically (temp file + rename); an entry with
// a bad envelope, size, checksum or ELF magic (a torn or corrupted file) is
// recompiled and replaced, never loaded.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CUDA_JITCACHE_H
#define KILN_RUNTIME_CUDA_JITCACHE_H

#include "runtime/Artifact.h"
#include "runtime/Status.h"
#include "runtime/cuda/Nvrtc.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace kiln::rt::cuda {

// The compiled kernels of one translation unit for one architecture.
struct JitModule {
  std::string arch;
  std::vector<uint8_t> cubin;
  std::vector<KernelResources> kernels; // ptxas' report, in its order
  bool cacheHit = false;                // warm: read from the cache
  bool replacedCorruptEntry = false;    // a bad entry was found and recompiled
  double seconds = 0;                   // wall time of lookup (+ compile)
  std::string cachePath;                // <cacheDir>/<key>.cubin

  // The resources of `entry`, or null when ptxas did not report it.
  const KernelResources *resources(const std::string &entry) const;
};

// An artifact's kernels for one architecture: its parts' modules.
struct JitArtifact {
  std::string arch;
  std::vector<JitModule> parts;
  std::vector<uint32_t> firstKernels; // of each part: parts hold contiguous runs
  bool cacheHit = false; // every part read from the cache
  double seconds = 0;    // wall time of all lookups (+ compiles)
  size_t cubinBytes() const;
  // The part that holds the artifact's kernel `kernel`.
  size_t partOf(uint32_t kernel) const;
  // The resources of `entry` from the report of the part that has it.
  const KernelResources *resources(const std::string &entry) const;
  // "<cacheDir>/<key>.cubin" of the first part, "and N more".
  std::string cachePaths() const;
};

class JitCache {
public:
  // `cacheDir` holds the entries directly (normally cudaCacheDir()).
  JitCache(const Nvrtc &nvrtc, std::string cacheDir)
      : nvrtc_(nvrtc), cacheDir_(std::move(cacheDir)) {}

  // $KILN_CACHE_DIR/cuda, or ~/.cache/kiln/cuda.
  static std::string cudaCacheDir();

  // 16 hex digits identifying (source, arch, NVRTC version, options).
  std::string key(const std::string &source, const std::string &arch) const;
  std::string entryPath(const std::string &source, const std::string &arch) const;

  // The CUBIN of `source` for `arch`: from the cache when a valid entry
  // exists, else compiled by NVRTC and stored. `fileName` names the source
  // in NVRTC's messages; on a compile error the source is kept next to the
  // cache entry (<key>.cu) and its path is part of the message.
  StatusOr<JitModule> compile(const std::string &source,
                              const std::string &fileName,
                              const std::string &arch) const;

  // The translation unit of `artifact` (prelude, then every kernel).
  static std::string translationUnit(const schema::Artifact &artifact);
  // Parts an artifact's kernels are compiled in (fewer with fewer kernels).
  static constexpr size_t kArtifactParts = 8;
  // compile() of each of the artifact's `parts` translation units (without
  // model-file locations: the cache key survives an edit that only moves
  // model lines), in parallel; errors name the artifact and the part. With
  // `progress`, a cold compile (a part not in the cache) says so there
  // first, as the CPU backend does: it takes seconds.
  StatusOr<JitArtifact> compileArtifact(const Artifact &artifact, const std::string &arch,
                                        size_t parts = kArtifactParts,
                                        FILE *progress = nullptr) const;

private:
  const Nvrtc &nvrtc_;
  std::string cacheDir_;
};

// Decodes a cache entry; an error says what is wrong with it (exposed for
// the tests).
Status decodeCacheEntry(const std::vector<uint8_t> &bytes,
                        std::vector<uint8_t> &cubin, std::string &log);

} // namespace kiln::rt::cuda

#endif // KILN_RUNTIME_CUDA_JITCACHE_H
