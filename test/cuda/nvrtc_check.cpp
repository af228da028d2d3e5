//===- nvrtc_check.cpp - Every CUDA kernel of an artifact compiles --------===//
//
//   nvrtc_check ARTIFACT.kart [--arch=sm_80,...] [--maxrregcount=N]
//   nvrtc_check --cu=FILE.cu --arch=sm_80 [--maxrregcount=N]
//   (--per-kernel: also one line per kernel with its registers and spills)
//
// The CI check that needs no GPU: NVRTC compiles the prelude and every kernel
// of a `kilnc --target=cuda` artifact, as one translation unit (as the
// runtime's JIT does), to a CUBIN for each architecture in Artifact.archs (or
// --arch). It fails when
//   - the artifact is not a valid CUDA artifact (identifier, checksum
//     trailer, flatbuffers structure, format version, target, archs, every
//     kernel with a launch of 1..1024 threads and at least one block);
//   - NVRTC reports an error (its log is printed) or produces no CUBIN;
//   - ptxas (-Xptxas=-v) does not report a kernel, or reports spill stores
//     or loads for one;
//   - a kernel's registers x threads per block exceed the 64K registers of
//     an SM (the launch would fail with "too many resources requested").
// --cu compiles a standalone CUDA file with the same checks (tests of this
// tool). Test-only: the product's JIT lives in runtime/cuda/.
//
// TODO(merge): the structural checks below mirror rt::Artifact::loadBytes,
// whose content verifier accepts only target "cpu" on this branch; switch to
// rt::Artifact::loadFile once the CUDA runtime (branch cudart) accepts "cuda".
//
//===----------------------------------------------------------------------===//

#include "runtime/schema/ArtifactChecksum.h"
#include "runtime/schema/ArtifactVersion.h"
#include "runtime/schema/artifact_generated.h"

#include <nvrtc.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

// One kernel as ptxas reported it.
struct KernelUsage {
  int registers = -1;
  long spillStores = 0, spillLoads = 0;
};

std::vector<std::string> splitList(const std::string &text) {
  std::vector<std::string> items;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty())
      items.push_back(item);
  return items;
}

bool readFile(const std::string &path, std::string &bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return false;
  bytes.assign(std::istreambuf_iterator<char>(in), {});
  return true;
}

// Parses ptxas -v output: "Compiling entry function 'k' for 'sm_80'", then
// "... N bytes spill stores, M bytes spill loads" and "Used R registers".
std::map<std::string, KernelUsage> parsePtxasLog(const std::string &log) {
  std::map<std::string, KernelUsage> usage;
  std::string current;
  std::stringstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    const std::string entryTag = "Compiling entry function '";
    size_t at = line.find(entryTag);
    if (at != std::string::npos) {
      size_t begin = at + entryTag.size();
      current = line.substr(begin, line.find('\'', begin) - begin);
      usage[current];
      continue;
    }
    if (current.empty())
      continue;
    size_t spill = line.find("bytes spill stores");
    if (spill != std::string::npos) {
      size_t comma = line.rfind(',', spill);
      usage[current].spillStores = std::stol(line.substr(comma + 1));
      size_t loads = line.find("bytes spill loads");
      size_t comma2 = line.rfind(',', loads);
      usage[current].spillLoads = std::stol(line.substr(comma2 + 1));
    }
    size_t used = line.find("Used ");
    if (used != std::string::npos && line.find(" registers") != std::string::npos)
      usage[current].registers = std::stoi(line.substr(used + 5));
  }
  return usage;
}

struct Check {
  std::string source;                 // the translation unit
  std::map<std::string, unsigned> threads; // entry -> threads per block (0: unknown)
};

// Compiles `check.source` for `arch`; prints problems, returns their count.
int compileFor(const Check &check, const std::string &arch, int maxRegisters,
               bool perKernel) {
  auto start = std::chrono::steady_clock::now();
  nvrtcProgram program;
  if (nvrtcCreateProgram(&program, check.source.c_str(), "kiln_kernels.cu", 0,
                         nullptr, nullptr) != NVRTC_SUCCESS) {
    std::cerr << "error: nvrtcCreateProgram failed\n";
    return 1;
  }
  std::string archOption = "--gpu-architecture=" + arch;
  std::string maxReg = "--maxrregcount=" + std::to_string(maxRegisters);
  std::vector<const char *> options = {archOption.c_str(), "--std=c++17",
                                       "-Xptxas=-v"};
  // The toolkit headers kernels may include (mma.h for the attention
  // kernels' tensor cores), as the runtime's JIT passes them.
  std::string include = std::string("-I") + KILN_CUDA_INCLUDE_DIR;
  options.push_back(include.c_str());
  if (maxRegisters > 0)
    options.push_back(maxReg.c_str());
  nvrtcResult result =
      nvrtcCompileProgram(program, static_cast<int>(options.size()), options.data());
  size_t logSize = 0;
  nvrtcGetProgramLogSize(program, &logSize);
  std::string log(logSize, '\0');
  nvrtcGetProgramLog(program, log.data());
  int problems = 0;
  if (result != NVRTC_SUCCESS) {
    std::cerr << "error: " << arch << ": NVRTC failed (" << nvrtcGetErrorString(result)
              << "):\n" << log << "\n";
    nvrtcDestroyProgram(&program);
    return 1;
  }
  size_t cubinSize = 0;
  if (nvrtcGetCUBINSize(program, &cubinSize) != NVRTC_SUCCESS || cubinSize == 0) {
    std::cerr << "error: " << arch << ": NVRTC produced no CUBIN\n";
    ++problems;
  }
  nvrtcDestroyProgram(&program);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::map<std::string, KernelUsage> usage = parsePtxasLog(log);
  int maxUsed = 0;
  for (const auto &[entry, threads] : check.threads) {
    auto it = usage.find(entry);
    if (it == usage.end() || it->second.registers < 0) {
      std::cerr << "error: " << arch << ": ptxas reported no resource usage for '" << entry
                << "'\n";
      ++problems;
      continue;
    }
    const KernelUsage &u = it->second;
    maxUsed = std::max(maxUsed, u.registers);
    if (perKernel)
      std::printf("%s: %s: %d registers, %ld/%ld bytes spill stores/loads, %d threads\n",
                  arch.c_str(), entry.c_str(), u.registers, u.spillStores, u.spillLoads,
                  threads);
    if (u.spillStores > 0 || u.spillLoads > 0) {
      std::cerr << "error: " << arch << ": kernel '" << entry << "' spills registers ("
                << u.spillStores << " bytes spill stores, " << u.spillLoads
                << " bytes spill loads, " << u.registers << " registers)\n";
      ++problems;
    }
    if (threads > 0 && static_cast<long>(u.registers) * threads > 65536) {
      std::cerr << "error: " << arch << ": kernel '" << entry << "' needs " << u.registers
                << " registers x " << threads << " threads, more than an SM's 65536\n";
      ++problems;
    }
  }
  std::printf("%s: %zu kernels compiled in %.2f s, CUBIN %zu bytes, at most %d registers, %s\n",
              arch.c_str(), check.threads.size(), seconds, cubinSize, maxUsed,
              problems ? "FAILED" : "no spills");
  return problems;
}

// Builds the translation unit of a CUDA artifact; prints problems and
// returns false when the artifact is not one.
bool loadArtifact(const std::string &path, Check &check, std::vector<std::string> &archs) {
  std::string bytes;
  if (!readFile(path, bytes)) {
    std::cerr << path << ": error: cannot read the file\n";
    return false;
  }
  const auto *data = reinterpret_cast<const uint8_t *>(bytes.data());
  uint64_t stored = 0;
  if (!kiln::schema::readChecksumTrailer(data, bytes.size(), stored) ||
      kiln::schema::artifactChecksum(data, bytes.size() - kiln::schema::kChecksumTrailerBytes) !=
          stored) {
    std::cerr << path << ": error: not a Kiln artifact (missing or wrong checksum trailer)\n";
    return false;
  }
  size_t size = bytes.size() - kiln::schema::kChecksumTrailerBytes;
  flatbuffers::Verifier verifier(data, size, /*max_depth=*/64, /*max_tables=*/10000000);
  if (!kiln::schema::ArtifactBufferHasIdentifier(data) ||
      !kiln::schema::VerifyArtifactBuffer(verifier)) {
    std::cerr << path << ": error: not a Kiln artifact (flatbuffers verification failed)\n";
    return false;
  }
  const kiln::schema::Artifact *artifact = kiln::schema::GetArtifact(data);
  if (artifact->version() != kiln::schema::kArtifactVersion) {
    std::cerr << path << ": error: artifact format version " << artifact->version()
              << ", this tool reads " << kiln::schema::kArtifactVersion << "\n";
    return false;
  }
  std::string target = artifact->target() ? artifact->target()->str() : "";
  if (target != "cuda") {
    std::cerr << path << ": error: target '" << target
              << "' is not 'cuda' (compile with kilnc --target=cuda)\n";
    return false;
  }
  if (archs.empty() && artifact->archs())
    for (const flatbuffers::String *arch : *artifact->archs())
      archs.push_back(arch->str());
  if (archs.empty()) {
    std::cerr << path << ": error: the artifact lists no architectures (Artifact.archs)\n";
    return false;
  }
  if (!artifact->prelude() || !artifact->kernels() || artifact->kernels()->size() == 0) {
    std::cerr << path << ": error: the artifact has no prelude or no kernels\n";
    return false;
  }
  check.source = artifact->prelude()->str();
  bool ok = true;
  for (const kiln::schema::Kernel *kernel : *artifact->kernels()) {
    std::string entry = kernel->entry() ? kernel->entry()->str() : "";
    const kiln::schema::KernelLaunch *launch = kernel->launch();
    if (!launch || launch->grid() < 1 || launch->block() < 1 || launch->block() > 1024 ||
        launch->block() % 32 != 0) {
      std::cerr << path << ": error: kernel '" << entry
                << "' has no valid launch (needs grid >= 1 and a block of 32..1024 threads, a "
                   "multiple of 32)\n";
      ok = false;
      continue;
    }
    if (!kernel->source() || kernel->source()->str().find(entry) == std::string::npos) {
      std::cerr << path << ": error: kernel '" << entry << "' has no source defining it\n";
      ok = false;
      continue;
    }
    check.source += "\n" + kernel->source()->str();
    check.threads[entry] = launch->block();
  }
  return ok;
}

// The `extern "C" __global__ void NAME` entries of a standalone file.
void collectEntries(const std::string &source, Check &check) {
  const std::string tag = "__global__ void ";
  for (size_t at = source.find(tag); at != std::string::npos; at = source.find(tag, at + 1)) {
    size_t begin = at + tag.size();
    size_t end = source.find('(', begin);
    check.threads[source.substr(begin, end - begin)] = 0;
  }
}

} // namespace

int main(int argc, char **argv) {
  std::string artifactPath, cuPath, archList;
  int maxRegisters = 0;
  bool perKernel = false; // --per-kernel: one line of registers/spills per kernel
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--arch=", 0) == 0)
      archList = arg.substr(7);
    else if (arg.rfind("--cu=", 0) == 0)
      cuPath = arg.substr(5);
    else if (arg == "--per-kernel")
      perKernel = true;
    else if (arg.rfind("--maxrregcount=", 0) == 0)
      maxRegisters = std::stoi(arg.substr(15));
    else if (!arg.empty() && arg[0] != '-' && artifactPath.empty())
      artifactPath = arg;
    else {
      std::cerr << "usage: nvrtc_check ARTIFACT.kart [--arch=LIST] [--maxrregcount=N]\n"
                   "       nvrtc_check --cu=FILE.cu --arch=LIST [--maxrregcount=N]\n";
      return 2;
    }
  }
  if (artifactPath.empty() == cuPath.empty()) {
    std::cerr << "nvrtc_check: give either an artifact or --cu=FILE\n";
    return 2;
  }
  std::vector<std::string> archs = splitList(archList);
  Check check;
  if (!cuPath.empty()) {
    if (!readFile(cuPath, check.source)) {
      std::cerr << cuPath << ": error: cannot read the file\n";
      return 1;
    }
    collectEntries(check.source, check);
    if (archs.empty()) {
      std::cerr << "nvrtc_check: --cu needs --arch\n";
      return 2;
    }
  } else if (!loadArtifact(artifactPath, check, archs)) {
    return 1;
  }
  int problems = 0;
  for (const std::string &arch : archs)
    problems += compileFor(check, arch, maxRegisters, perKernel);
  return problems ? 1 : 0;
}
