//===- SimNvrtc.cpp - The device simulator's NVRTC: CUDA source -> host code ===//
//
// Test-only; built as libnvrtc.so.13 in the simulator's library folder.
// nvrtcCompileProgram builds the very source kiln-run hands NVRTC with the
// host C++ compiler ($CXX, else c++), after SimKernelRuntime.h, into a
// shared library; that library's bytes are the "CUBIN" (an ELF file, so
// the JIT cache stores and checks it like a real one) and the simulated
// driver's cuModuleLoadData loads it. The prelude's fixed-width typedefs
// are dropped (the host's <stdint.h> defines those types).
//
// Not simulated: ptxas. The program log says the code was host-compiled
// and carries no register or spill report (the NVRTC compile-only tests
// check those with the real NVRTC); the options are checked as NVRTC would
// (-arch must name a real architecture).
//
//===----------------------------------------------------------------------===//

#include <nvrtc.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#ifndef KILN_SIM_INCLUDE_DIR
#error "KILN_SIM_INCLUDE_DIR (test/sim) must be defined by the build"
#endif

struct _nvrtcProgram {
  std::string source, name, log;
  std::vector<char> binary;
};

namespace {

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The translation unit for the host compiler: the simulator's runtime, then
// the source without the NVRTC prelude's `typedef ... intN_t;` lines.
std::string hostSource(const std::string &source) {
  static const std::regex fixedWidth(R"(typedef [a-z ]+ u?int(8|16|32|64)_t;)");
  std::ostringstream out;
  out << "#include \"SimKernelRuntime.h\"\n";
  std::istringstream lines(source);
  for (std::string line; std::getline(lines, line);)
    out << (std::regex_match(line, fixedWidth) ? "" : line) << "\n";
  return out.str();
}

std::string shellQuote(const std::string &s) {
  std::string out = "'";
  for (char c : s)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

} // namespace

extern "C" {

const char *nvrtcGetErrorString(nvrtcResult result) {
  switch (result) {
  case NVRTC_SUCCESS:
    return "NVRTC_SUCCESS";
  case NVRTC_ERROR_OUT_OF_MEMORY:
    return "NVRTC_ERROR_OUT_OF_MEMORY";
  case NVRTC_ERROR_INVALID_INPUT:
    return "NVRTC_ERROR_INVALID_INPUT";
  case NVRTC_ERROR_INVALID_PROGRAM:
    return "NVRTC_ERROR_INVALID_PROGRAM";
  case NVRTC_ERROR_INVALID_OPTION:
    return "NVRTC_ERROR_INVALID_OPTION";
  case NVRTC_ERROR_COMPILATION:
    return "NVRTC_ERROR_COMPILATION";
  default:
    return "NVRTC_ERROR (simulator)";
  }
}

nvrtcResult nvrtcVersion(int *major, int *minor) {
  if (!major || !minor)
    return NVRTC_ERROR_INVALID_INPUT;
  *major = 13;
  *minor = 0;
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcCreateProgram(nvrtcProgram *prog, const char *src, const char *name,
                               int numHeaders, const char *const *, const char *const *) {
  if (!prog || !src || numHeaders < 0)
    return NVRTC_ERROR_INVALID_INPUT;
  if (numHeaders > 0)
    return NVRTC_ERROR_INVALID_INPUT; // kiln passes none; not simulated
  *prog = new _nvrtcProgram{src, name ? name : "default_program", "", {}};
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcDestroyProgram(nvrtcProgram *prog) {
  if (!prog || !*prog)
    return NVRTC_ERROR_INVALID_PROGRAM;
  delete *prog;
  *prog = nullptr;
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcCompileProgram(nvrtcProgram prog, int numOptions, const char *const *options) {
  if (!prog)
    return NVRTC_ERROR_INVALID_PROGRAM;
  static const std::regex arch(R"(-arch=sm_[0-9]{2,3}[af]?)");
  bool hasArch = false;
  for (int i = 0; i < numOptions; ++i) {
    std::string o = options[i];
    if (o.rfind("-arch=", 0) == 0) {
      if (!std::regex_match(o, arch)) {
        prog->log = "nvrtc: error: invalid value for -arch: " + o + "\n";
        return NVRTC_ERROR_INVALID_OPTION;
      }
      hasArch = true;
    }
  }
  if (!hasArch) {
    prog->log = "kiln device simulator: -arch=sm_XX is required for a CUBIN\n";
    return NVRTC_ERROR_INVALID_OPTION;
  }
  char dir[] = "/tmp/kiln_sim_nvrtc_XXXXXX";
  if (!mkdtemp(dir)) {
    prog->log = "kiln device simulator: mkdtemp failed\n";
    return NVRTC_ERROR_OUT_OF_MEMORY;
  }
  std::string d = dir;
  std::string src = d + "/" + "module.cpp", lib = d + "/module.so", log = d + "/log.txt";
  {
    std::ofstream out(src);
    out << hostSource(prog->source);
  }
  const char *cxx = std::getenv("CXX");
  std::string cmd = std::string(cxx && *cxx ? cxx : "c++") +
                    " -std=c++17 -O1 -fPIC -shared -w -I" + shellQuote(KILN_SIM_INCLUDE_DIR) +
                    " -o " + shellQuote(lib) + " " + shellQuote(src) + " > " +
                    shellQuote(log) + " 2>&1";
  int rc = std::system(cmd.c_str());
  prog->log = "kiln device simulator: " + prog->name +
              " built by the host compiler (no ptxas report)\n";
  nvrtcResult result = NVRTC_SUCCESS;
  if (rc != 0) {
    prog->log += readFile(log);
    result = NVRTC_ERROR_COMPILATION;
  } else {
    std::string bytes = readFile(lib);
    prog->binary.assign(bytes.begin(), bytes.end());
  }
  std::system(("rm -rf " + shellQuote(d)).c_str());
  return result;
}

nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram prog, size_t *size) {
  if (!prog || !size)
    return NVRTC_ERROR_INVALID_INPUT;
  *size = prog->log.size() + 1;
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetProgramLog(nvrtcProgram prog, char *log) {
  if (!prog || !log)
    return NVRTC_ERROR_INVALID_INPUT;
  std::memcpy(log, prog->log.c_str(), prog->log.size() + 1);
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetCUBINSize(nvrtcProgram prog, size_t *size) {
  if (!prog || !size)
    return NVRTC_ERROR_INVALID_INPUT;
  if (prog->binary.empty())
    return NVRTC_ERROR_INVALID_PROGRAM; // not compiled (or failed)
  *size = prog->binary.size();
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetCUBIN(nvrtcProgram prog, char *cubin) {
  if (!prog || !cubin)
    return NVRTC_ERROR_INVALID_INPUT;
  if (prog->binary.empty())
    return NVRTC_ERROR_INVALID_PROGRAM;
  std::memcpy(cubin, prog->binary.data(), prog->binary.size());
  return NVRTC_SUCCESS;
}

} // extern "C"
