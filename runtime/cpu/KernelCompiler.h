//===- KernelCompiler.h - JIT of generated C++ kernels, with a disk cache -===//
//
// The artifact carries kernel *sources*; this turns them into callable
// functions. All kernels plus the shared prelude become one translation unit,
// compiled once by the host compiler into a shared library and dlopen'ed.
// Compiling takes seconds, so the library is cached in $KILN_CACHE_DIR
// (default ~/.cache/kiln) under a 64-bit FNV-1a key over everything that
// changes the machine code: source, compiler path and `--version`, flags and
// the host CPU model (-march=native). Loading reports whether it was a cold
// compile or a warm cache hit, and how long it took.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPU_KERNELCOMPILER_H
#define KILN_RUNTIME_CPU_KERNELCOMPILER_H

#include "runtime/Artifact.h"

#include <memory>
#include <string>
#include <vector>

namespace kiln::rt::cpu {

// Signature of every generated kernel: buffers in KernelCall order.
using KernelEntry = void (*)(void *const *buffers);

struct KernelCompilerOptions {
  // Compiler command, split on spaces ("ccache g++" works).
  std::string compiler;
  std::string cacheDir;
  std::vector<std::string> flags;

  // $CXX (or "c++"), $KILN_CACHE_DIR (or ~/.cache/kiln), the contract flags
  // -O3 -march=native -ffp-contract=off -fopenmp -shared -fPIC.
  static KernelCompilerOptions fromEnvironment();
};

// The dlopen'ed library and one resolved entry per Artifact.kernels element.
class KernelLibrary {
public:
  ~KernelLibrary();
  KernelLibrary(const KernelLibrary &) = delete;
  KernelLibrary &operator=(const KernelLibrary &) = delete;

  KernelEntry entry(uint32_t kernel) const { return entries_[kernel]; }
  size_t numKernels() const { return entries_.size(); }
  // True when the library came from the cache (warm), false when compiled.
  bool cacheHit() const { return cacheHit_; }
  // Wall time of compile-or-lookup + dlopen + dlsym.
  double loadSeconds() const { return loadSeconds_; }
  const std::string &libraryPath() const { return libraryPath_; }
  const std::string &sourcePath() const { return sourcePath_; }

private:
  friend class KernelCompiler;
  KernelLibrary() = default;
  void *handle_ = nullptr;
  std::vector<KernelEntry> entries_;
  bool cacheHit_ = false;
  double loadSeconds_ = 0;
  std::string libraryPath_;
  std::string sourcePath_;
};

class KernelCompiler {
public:
  explicit KernelCompiler(KernelCompilerOptions options)
      : options_(std::move(options)) {}

  // Compiles (or finds in the cache) and loads the kernels of `artifact`.
  // Errors carry the artifact's name; a compiler failure includes the tail
  // of the compiler's output and the path of the kept source file.
  StatusOr<std::unique_ptr<KernelLibrary>> load(const Artifact &artifact);

  // Where load() keeps (or finds) the library for `artifact`.
  StatusOr<std::string> cachedLibraryPath(const Artifact &artifact);

  // The translation unit compiled for `artifact`: prelude, then every kernel
  // behind a comment naming its entry and ops, and with `withLocations` its
  // model-file location (on the comment's line: line numbers do not move).
  // The cache key is the unit without locations: an edit of the model that
  // only moves lines (a comment) recompiles nothing.
  static std::string translationUnit(const schema::Artifact &artifact,
                                     bool withLocations = false);
  // The same kernels in `parts` units of about equal source size, each with
  // the prelude (contiguous runs of kernels, in order; fewer units when
  // there are fewer kernels): what a cold load compiles side by side, one
  // compiler per core (here then linked into one library; NVRTC's parts
  // are loaded as modules of their own, runtime/cuda/JitCache.h). With
  // `firstKernels`, the index of each unit's first kernel goes there.
  static std::vector<std::string> translationUnitParts(const schema::Artifact &artifact,
                                                       size_t parts,
                                                       bool withLocations = true,
                                                       std::vector<uint32_t> *firstKernels = nullptr);

private:
  StatusOr<std::string> compilerIdentity();
  // Cache path without extension: <cacheDir>/kiln-<16 hex digits of key>.
  StatusOr<std::string> cacheStem(const std::string &source);
  // Compiles the unit's parts (translationUnitParts, written next to
  // `stem`) in parallel and links them into `libraryPath`.
  Status compile(const Artifact &artifact, const std::string &stem,
                 const std::string &libraryPath);

  KernelCompilerOptions options_;
  std::string identity_; // memoized `compiler --version` first line
};

} // namespace kiln::rt::cpu

#endif // KILN_RUNTIME_CPU_KERNELCOMPILER_H
