//===- Nvrtc.cpp - NVRTC loaded at run time: CUDA C++ source to CUBIN -----===//

#include "runtime/cuda/Nvrtc.h"

#include "runtime/FileIO.h"
#include "runtime/cuda/DynamicLibrary.h"

#include <nvrtc.h>

#include <cctype>
#include <cstdlib>
#include <regex>
#include <sstream>

namespace kiln::rt::cuda {

// The NVRTC entry points kiln uses; the types come from nvrtc.h so the
// signatures are the toolkit's own, but nothing is linked.
struct Nvrtc::Functions {
  decltype(&::nvrtcGetErrorString) getErrorString = nullptr;
  decltype(&::nvrtcVersion) version = nullptr;
  decltype(&::nvrtcCreateProgram) createProgram = nullptr;
  decltype(&::nvrtcDestroyProgram) destroyProgram = nullptr;
  decltype(&::nvrtcCompileProgram) compileProgram = nullptr;
  decltype(&::nvrtcGetProgramLogSize) getProgramLogSize = nullptr;
  decltype(&::nvrtcGetProgramLog) getProgramLog = nullptr;
  decltype(&::nvrtcGetCUBINSize) getCubinSize = nullptr;
  decltype(&::nvrtcGetCUBIN) getCubin = nullptr;
};

namespace {

// Destroys the program on every return path.
struct ProgramGuard {
  decltype(&::nvrtcDestroyProgram) destroy;
  nvrtcProgram program = nullptr;
  ~ProgramGuard() {
    if (program)
      destroy(&program);
  }
};

// The CUDA headers generated kernels may include (cuda_bf16.h, and mma.h
// for the bf16 attention kernels' WMMA tiles): NVRTC has only a few built
// in, so the toolkit's include directory is passed when found:
// $KILN_CUDA_INCLUDE_DIR, else the include/ beside $KILN_CUDA_LIB_DIR (a
// toolkit's lib64/ or lib/, where NVRTC itself was found), else
// /usr/local/cuda/include.
std::string cudaIncludeDir() {
  if (const char *env = std::getenv("KILN_CUDA_INCLUDE_DIR"); env && *env)
    return env;
  if (const char *lib = std::getenv("KILN_CUDA_LIB_DIR"); lib && *lib) {
    std::string dir = lib;
    while (dir.size() > 1 && dir.back() == '/')
      dir.pop_back();
    std::string include = dir.substr(0, dir.rfind('/') + 1) + "include";
    if (fileExists(include + "/cuda_runtime.h"))
      return include;
  }
  if (isDirectory("/usr/local/cuda/include"))
    return "/usr/local/cuda/include";
  return "";
}

// A toolkit header `source` includes that the include directory lacks
// ("" when none is missing): NVRTC would fail with "cannot open source
// file", which does not say where kiln looked or how to point it elsewhere.
std::string missingToolkitHeader(const std::string &source,
                                 const std::string &includeDir) {
  for (const char *header : {"mma.h", "cuda_bf16.h", "cuda_fp16.h"}) {
    if (source.find(std::string("#include <") + header + ">") ==
        std::string::npos)
      continue;
    if (includeDir.empty() || !fileExists(includeDir + "/" + header))
      return header;
  }
  return "";
}

} // namespace

bool isCudaArch(const std::string &arch) {
  static const std::regex pattern("sm_[0-9]{2,3}[af]?");
  return std::regex_match(arch, pattern);
}

std::vector<KernelResources> parsePtxasReport(const std::string &log) {
  // ptxas -v prints, per entry function:
  //   ptxas info    : Compiling entry function 'k' for 'sm_80'
  //   ptxas info    : Function properties for k
  //   ptxas         .     8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
  //   ptxas info    : Used 10 registers, used 0 barriers, 360 bytes cmem[0]
  // "Function properties" also appears for non-inlined device functions,
  // whose numbers must not be attributed to the entry: only lines after an
  // entry's own "Function properties for <entry>" count.
  static const std::regex entryLine(R"(Compiling entry function '([^']+)')");
  static const std::regex propertiesLine(R"(Function properties for (\S+))");
  static const std::regex frameLine(
      R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex usedLine(R"(Used (\d+) registers)");
  // "Used 40 registers, used 1 barriers, 1 bytes smem, 400 bytes cmem[0]":
  // static shared memory (absent when the kernel has none).
  static const std::regex smemPart(R"((\d+) bytes smem)");
  std::vector<KernelResources> kernels;
  bool inEntryProperties = false;
  std::istringstream lines(log);
  std::string line;
  std::smatch m;
  while (std::getline(lines, line)) {
    if (std::regex_search(line, m, entryLine)) {
      kernels.push_back(KernelResources{m[1].str()});
      inEntryProperties = false;
    } else if (std::regex_search(line, m, propertiesLine)) {
      inEntryProperties = !kernels.empty() && m[1].str() == kernels.back().entry;
    } else if (inEntryProperties && std::regex_search(line, m, frameLine)) {
      kernels.back().stackBytes = std::stoll(m[1].str());
      kernels.back().spillStoreBytes = std::stoll(m[2].str());
      kernels.back().spillLoadBytes = std::stoll(m[3].str());
    } else if (!kernels.empty() && std::regex_search(line, m, usedLine)) {
      kernels.back().registers = std::stoi(m[1].str());
      std::smatch smem;
      if (std::regex_search(line, smem, smemPart))
        kernels.back().staticSharedBytes = std::stoll(smem[1].str());
      inEntryProperties = false;
    }
  }
  return kernels;
}

StatusOr<std::unique_ptr<Nvrtc>> Nvrtc::load() {
  std::unique_ptr<Nvrtc> nvrtc(new Nvrtc());
  KILN_ASSIGN_OR_RETURN(
      nvrtc->library_,
      DynamicLibrary::open("NVRTC", {"libnvrtc.so.13", "libnvrtc.so.12",
                                     "libnvrtc.so"}));
  nvrtc->fn_ = std::make_unique<Functions>();
  Functions &f = *nvrtc->fn_;
  const DynamicLibrary &lib = *nvrtc->library_;
  KILN_RETURN_IF_ERROR(lib.resolve("nvrtcGetErrorString", f.getErrorString));
  KILN_RETURN_IF_ERROR(lib.resolve("nvrtcVersion", f.version));
  KILN_RETURN_IF_ERROR(lib.resolve("nvrtcCreateProgram", f.createProgram));
  KILN_RETURN_IF_ERROR(lib.resolve("nvrtcDestroyProgram", f.destroyProgram));
  KILN_RETURN_IF_ERROR(lib.resolve("nvrtcCompileProgram", f.compileProgram));
  KILN_RETURN_IF_ERROR(lib.resolve("nvrtcGetProgramLogSize", f.getProgramLogSize));
  KILN_RETURN_IF_ERROR(lib.resolve("nvrtcGetProgramLog", f.getProgramLog));
  KILN_RETURN_IF_ERROR(lib.resolve("nvrtcGetCUBINSize", f.getCubinSize));
  KILN_RETURN_IF_ERROR(lib.resolve("nvrtcGetCUBIN", f.getCubin));
  int major = 0, minor = 0;
  if (nvrtcResult r = f.version(&major, &minor); r != NVRTC_SUCCESS)
    return unavailable("nvrtcVersion failed: ", f.getErrorString(r));
  nvrtc->version_ = std::to_string(major) + "." + std::to_string(minor);
  nvrtc->major_ = major;
  nvrtc->minor_ = minor;
  return nvrtc;
}

Nvrtc::~Nvrtc() = default;

const std::string &Nvrtc::libraryPath() const { return library_->path(); }

std::vector<std::string> Nvrtc::options(const std::string &arch) {
  // -arch=sm_XX (a real architecture, not compute_XX) makes NVRTC run ptxas
  // and return SASS in a CUBIN; -Xptxas -v adds the resource report to the
  // log; -lineinfo keeps source lines for profilers and traces at no runtime
  // cost. --fmad=false: a * b + c is a rounded product and a rounded sum,
  // never one FMA, as the CPU kernels are compiled (-ffp-contract=off): how
  // fusion or recompute groups the ops into kernels decides what a compiler
  // could contract, so with contraction a value's bits would depend on the
  // grouping (remat = full against none, fused against unfused). The math
  // library's own fmaf calls are explicit and stay FMAs; the kernels are
  // bandwidth-bound or tensor-core-bound, not bound by these few flops.
  std::vector<std::string> options = {"-arch=" + arch, "--std=c++17", "--fmad=false",
                                      "-Xptxas", "-v", "-lineinfo"};
  std::string include = cudaIncludeDir();
  if (!include.empty())
    options.push_back("-I" + include);
  return options;
}

std::vector<std::string> Nvrtc::compileOptions(const std::string &arch) const {
  std::vector<std::string> opts = options(arch);
  if (hasOwnCache(major_, minor_))
    opts.push_back("--no-cache");
  return opts;
}

StatusOr<NvrtcOutput> Nvrtc::compile(const std::string &source,
                                     const std::string &fileName,
                                     const std::string &arch) const {
  if (!isCudaArch(arch))
    return invalidArgument("'", arch, "' is not a CUDA architecture "
                           "(expected e.g. sm_80 or sm_90a)");
  std::string includeDir = cudaIncludeDir();
  if (std::string header = missingToolkitHeader(source, includeDir);
      !header.empty())
    return notFound(fileName, " includes <", header,
                    ">, a CUDA toolkit header NVRTC does not carry, and ",
                    includeDir.empty() ? std::string("no toolkit include directory was found")
                                       : "'" + includeDir + "' does not have it",
                    " (set $KILN_CUDA_INCLUDE_DIR to the toolkit's include "
                    "directory, or $KILN_CUDA_LIB_DIR to its lib64)");
  const Functions &f = *fn_;
  ProgramGuard guard{f.destroyProgram};
  if (nvrtcResult r = f.createProgram(&guard.program, source.c_str(),
                                      fileName.c_str(), 0, nullptr, nullptr);
      r != NVRTC_SUCCESS)
    return unavailable("nvrtcCreateProgram(", fileName, ") failed: ",
                       f.getErrorString(r));
  std::vector<std::string> opts = compileOptions(arch);
  std::vector<const char *> argv;
  for (const std::string &o : opts)
    argv.push_back(o.c_str());
  nvrtcResult compiled = f.compileProgram(
      guard.program, static_cast<int>(argv.size()), argv.data());

  NvrtcOutput out;
  size_t logSize = 0;
  if (nvrtcResult r = f.getProgramLogSize(guard.program, &logSize);
      r != NVRTC_SUCCESS)
    return unavailable("nvrtcGetProgramLogSize failed: ", f.getErrorString(r));
  if (logSize > 1) {
    std::string log(logSize, '\0');
    if (nvrtcResult r = f.getProgramLog(guard.program, log.data());
        r != NVRTC_SUCCESS)
      return unavailable("nvrtcGetProgramLog failed: ", f.getErrorString(r));
    log.resize(logSize - 1); // drop the terminating NUL
    out.log = std::move(log);
  }
  if (compiled != NVRTC_SUCCESS)
    return invalidArgument("NVRTC ", version_, " failed to compile ", fileName,
                           " for ", arch, " (", f.getErrorString(compiled),
                           "):\n", out.log);
  size_t cubinSize = 0;
  if (nvrtcResult r = f.getCubinSize(guard.program, &cubinSize);
      r != NVRTC_SUCCESS)
    return unavailable("nvrtcGetCUBINSize failed: ", f.getErrorString(r));
  out.cubin.resize(cubinSize);
  if (nvrtcResult r =
          f.getCubin(guard.program, reinterpret_cast<char *>(out.cubin.data()));
      r != NVRTC_SUCCESS)
    return unavailable("nvrtcGetCUBIN failed: ", f.getErrorString(r));
  return out;
}

} // namespace kiln::rt::cuda
