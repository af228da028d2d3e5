//===- Nvrtc.h - NVRTC loaded at run time: CUDA C++ source to CUBIN -------===//
//
// NVRTC compiles CUDA C++ without a GPU or a driver, so kiln-run compiles a
// CUDA artifact's kernels on any machine with the library (the CI check that
// every generated kernel compiles for sm_80 and sm_90a runs here too). The
// library is dlopen'ed (DynamicLibrary); this header exposes no NVRTC type.
//
// Every compile asks ptxas for its resource report (-Xptxas -v, which NVRTC
// forwards and prints into the program log), so each kernel's registers and
// spill bytes come with the CUBIN without parsing its ELF sections.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CUDA_NVRTC_H
#define KILN_RUNTIME_CUDA_NVRTC_H

#include "runtime/Status.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::rt::cuda {

class DynamicLibrary;

// What ptxas reported for one kernel entry point.
struct KernelResources {
  std::string entry;          // the extern "C" name
  int registers = 0;          // registers per thread
  int64_t spillStoreBytes = 0;
  int64_t spillLoadBytes = 0;
  int64_t stackBytes = 0;     // local stack frame (spills and local arrays)
  int64_t staticSharedBytes = 0; // __shared__ variables ("N bytes smem")

  bool spills() const { return spillStoreBytes > 0 || spillLoadBytes > 0; }
};

// Parses ptxas' `-v` report (as NVRTC puts it into the program log): one
// entry per "Compiling entry function 'NAME'" block, in log order.
std::vector<KernelResources> parsePtxasReport(const std::string &log);

struct NvrtcOutput {
  std::vector<uint8_t> cubin; // an ELF file for exactly the requested arch
  std::string log;            // NVRTC's program log (ptxas' report included)
};

class Nvrtc {
public:
  // Opens libnvrtc (see DynamicLibrary for where it is looked for).
  static StatusOr<std::unique_ptr<Nvrtc>> load();
  ~Nvrtc();

  // "13.0": nvrtcVersion(), part of every cache key (a new NVRTC may
  // generate different code from the same source).
  const std::string &version() const { return version_; }
  // The library that was opened, for reports.
  const std::string &libraryPath() const;

  // The options every compile for `arch` ("sm_80", "sm_90a") uses; part of
  // the cache key.
  static std::vector<std::string> options(const std::string &arch);
  // options(arch) plus what this NVRTC needs and does not change the code:
  // from 12.9 on, --no-cache. NVRTC 12.9+ keeps its own cache (the driver's
  // compute cache), and a CUBIN served from it comes without ptxas' -v report,
  // which kiln-run's resource checks (registers, spills, shared memory) read;
  // the JitCache, whose entries keep that report, is the cache.
  std::vector<std::string> compileOptions(const std::string &arch) const;
  static bool hasOwnCache(int major, int minor) {
    return major > 12 || (major == 12 && minor >= 9);
  }

  // Compiles `source` (named `fileName` in the log) to a CUBIN for `arch`.
  // A compile error returns kInvalidArgument with NVRTC's log.
  StatusOr<NvrtcOutput> compile(const std::string &source,
                                const std::string &fileName,
                                const std::string &arch) const;

private:
  Nvrtc() = default;
  struct Functions;
  std::unique_ptr<DynamicLibrary> library_;
  std::unique_ptr<Functions> fn_;
  std::string version_;
  int major_ = 0, minor_ = 0;
};

// True for "sm_<digits>" with an optional "a"/"f" suffix ("sm_80", "sm_90a").
bool isCudaArch(const std::string &arch);

} // namespace kiln::rt::cuda

#endif // KILN_RUNTIME_CUDA_NVRTC_H
