//===- KernelCompiler.cpp - JIT of generated C++ kernels, with a cache ----===//
//
// load():
//   1. build the translation unit (prelude + kernels) and its cache key (the
//      unit without model-file locations: moving a line recompiles nothing);
//   2. if <cache>/kiln-<key>.so exists, dlopen it (warm); if that fails the
//      file is corrupt (e.g. a disk filled up): delete it and go on to 3;
//   3. otherwise write <cache>/kiln-<key>.cpp (kept for debugging), compile
//      the kernels in parts side by side (one compiler per core, at most 8:
//      kiln-<key>.partN.<pid>.cpp, each the prelude and a run of kernels,
//      to .o),
//      link them into a pid-unique temp file and rename it into place
//      (cold), so concurrent runs never load a half-written library; a
//      part that fails to compile is kept and named in the error;
//   4. dlsym every kernel entry.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelCompiler.h"

#include "runtime/FileIO.h"
#include "runtime/Hash.h"
#include "runtime/cpu/HostProcess.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <fstream>
#include <system_error>
#include <thread>
#include <sstream>
#include <unistd.h>

namespace kiln::rt::cpu {

namespace {

std::vector<std::string> splitOnSpaces(const std::string &text) {
  std::vector<std::string> parts;
  std::istringstream in(text);
  std::string part;
  while (in >> part)
    parts.push_back(part);
  return parts;
}

std::string join(const std::vector<std::string> &parts) {
  std::string out;
  for (const std::string &part : parts) {
    if (!out.empty())
      out += ' ';
    out += part;
  }
  return out;
}

// -march=native compiles for this CPU; a cache shared over NFS between
// different machines must not hand one CPU's code to another.
std::string hostCpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  std::string model, flags;
  while (std::getline(in, line)) {
    if (model.empty() && line.rfind("model name", 0) == 0)
      model = line;
    if (flags.empty() && line.rfind("flags", 0) == 0)
      flags = line;
    if (!model.empty() && !flags.empty())
      break;
  }
  return model + "\n" + flags;
}

std::string hex64(uint64_t value) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx",
                static_cast<unsigned long long>(value));
  return buf;
}

std::string kernelWhere(const schema::Kernel &kernel, uint32_t index) {
  std::string where = detail::concat("kernel ", index, " '",
                                     kernel.entry()->str(), "'");
  if (kernel.location() && kernel.location()->size() > 0)
    where += " (" + kernel.location()->str() + ")";
  return where;
}

// Generated kernels use OpenMP and GEMMs use OpenBLAS's own thread pool, so
// both pools share the cores. With libgomp's default (spin after each
// parallel region) the spinning workers starve the next sgemm: on a 2-core
// machine the bigram test model ran 10x slower than with passive waiting.
// libgomp reads OMP_WAIT_POLICY once, when it is loaded, which happens when
// the kernel library is dlopen'ed, so it is set here, before that; a value
// the user chose is kept.
void preferPassiveOpenMpWaiting() { ::setenv("OMP_WAIT_POLICY", "passive", 0); }

// RTLD_NODELETE: the library (and the OpenMP runtime it pulled in) stays
// mapped after dlclose. Unloading libgomp under its idle worker threads
// crashes the process at exit.
void *openLibrary(const std::string &path) {
  preferPassiveOpenMpWaiting();
  return ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
}

} // namespace

KernelCompilerOptions KernelCompilerOptions::fromEnvironment() {
  KernelCompilerOptions options;
  const char *cxx = std::getenv("CXX");
  options.compiler = (cxx && *cxx) ? cxx : "c++";
  const char *cache = std::getenv("KILN_CACHE_DIR");
  if (cache && *cache) {
    options.cacheDir = cache;
  } else {
    const char *home = std::getenv("HOME");
    options.cacheDir = std::string(home && *home ? home : "/tmp") +
                       "/.cache/kiln";
  }
  // -ffp-contract=off: every float operation is rounded as the kernel
  // writes it, never contracted with the next into one FMA. Otherwise the
  // bits of a value depend on which kernel computes it (a * b + c contracts
  // when fusion puts both ops in one loop, not when a * b is stored between
  // two kernels), so recompute (remat), fusion and the GEMM epilogue
  // (GemmEpilogue.cpp, compiled the same way) would change the training's
  // bits. The CPU backend is the reference: the same model gives the same
  // bits however it is scheduled.
  options.flags = {"-O3", "-march=native", "-ffp-contract=off", "-fopenmp",
                   "-shared", "-fPIC"};
  return options;
}

KernelLibrary::~KernelLibrary() {
  if (handle_)
    ::dlclose(handle_);
}

namespace {

// The unit's opening: a comment naming the model, then the prelude.
std::string unitHeader(const schema::Artifact &artifact) {
  std::string source = "// Generated by Kiln: prelude + every kernel of model '";
  source += artifact.model() ? artifact.model()->str() : "";
  source += "'.\n";
  if (artifact.prelude())
    source += artifact.prelude()->str();
  return source + "\n";
}

// Kernel `i` behind a comment naming its entry, ops and (withLocations)
// model-file location.
std::string kernelText(const schema::Artifact &artifact, uint32_t i, bool withLocations) {
  const schema::Kernel &kernel = *artifact.kernels()->Get(i);
  std::string source = "\n// kernel " + std::to_string(i) + ": " + kernel.entry()->str();
  if (kernel.ops())
    source += " [" + kernel.ops()->str() + "]";
  if (withLocations && kernel.location() && kernel.location()->size() > 0)
    source += " at " + kernel.location()->str();
  return source + "\n" + kernel.source()->str() + "\n";
}

} // namespace

std::string KernelCompiler::translationUnit(const schema::Artifact &artifact,
                                            bool withLocations) {
  std::string source = unitHeader(artifact);
  uint32_t count = artifact.kernels() ? artifact.kernels()->size() : 0;
  for (uint32_t i = 0; i < count; ++i)
    source += kernelText(artifact, i, withLocations);
  return source;
}

std::vector<std::string> KernelCompiler::translationUnitParts(const schema::Artifact &artifact,
                                                              size_t parts,
                                                              bool withLocations,
                                                              std::vector<uint32_t> *firstKernels) {
  uint32_t count = artifact.kernels() ? artifact.kernels()->size() : 0;
  std::vector<std::string> kernels;
  size_t total = 0;
  for (uint32_t i = 0; i < count; ++i) {
    kernels.push_back(kernelText(artifact, i, withLocations));
    total += kernels.back().size();
  }
  parts = std::max<size_t>(1, std::min<size_t>(parts, count));
  std::vector<std::string> units;
  size_t done = 0;
  std::string unit = unitHeader(artifact);
  if (firstKernels)
    *firstKernels = {0};
  for (uint32_t i = 0; i < count; ++i) {
    unit += kernels[i];
    done += kernels[i].size();
    // Close this unit once it holds its share of the source, leaving at
    // least one kernel for each unit still to come.
    bool share = done * parts >= total * (units.size() + 1);
    if (i + 1 < count && share && units.size() + 1 < parts && count - i - 1 >= parts - units.size() - 1) {
      units.push_back(std::move(unit));
      unit = unitHeader(artifact);
      if (firstKernels)
        firstKernels->push_back(i + 1);
    }
  }
  units.push_back(std::move(unit));
  return units;
}

StatusOr<std::string> KernelCompiler::compilerIdentity() {
  if (!identity_.empty())
    return identity_;
  std::vector<std::string> argv = splitOnSpaces(options_.compiler);
  if (argv.empty())
    return invalidArgument("no host C++ compiler configured (set $CXX)");
  argv.push_back("--version");
  auto result = runHostProcess(argv);
  if (!result.ok())
    return result.status().withPrefix(
        "the CPU backend needs a host C++ compiler: ");
  if (result->exitCode != 0)
    return unavailable("'", options_.compiler, " --version' failed (exit ",
                       result->exitCode, "): ", lastLines(result->output, 5));
  std::string firstLine = result->output.substr(0, result->output.find('\n'));
  identity_ = options_.compiler + "\n" + firstLine;
  return identity_;
}

Status KernelCompiler::compile(const Artifact &artifact, const std::string &stem,
                               const std::string &libraryPath) {
  std::vector<std::string> command = splitOnSpaces(options_.compiler);
  // One compiler per core (at most 8), each on its share of the kernels.
  size_t cores = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::string> units = translationUnitParts(artifact.root(), std::min<size_t>(cores, 8));
  std::string pid = std::to_string(::getpid());
  std::vector<std::string> sources, objects;
  for (size_t i = 0; i < units.size(); ++i) {
    // pid-unique: ranks sharing a cache may compile the same kernels at once.
    sources.push_back(stem + ".part" + std::to_string(i) + "." + pid + ".cpp");
    objects.push_back(stem + ".part" + std::to_string(i) + "." + pid + ".o");
    KILN_RETURN_IF_ERROR(writeFileAtomically(sources.back(), {units[i]}));
  }
  if (::isatty(STDERR_FILENO))
    std::fprintf(stderr, "kiln-run: compiling %u kernels with %s in %zu parallel units "
                         "(a cold cache; later runs load them from %s)\n",
                 artifact.root().kernels() ? artifact.root().kernels()->size() : 0u,
                 options_.compiler.c_str(), units.size(), options_.cacheDir.c_str());
  // Every flag but -shared compiles a part; all of them link.
  std::vector<std::string> compileFlags;
  for (const std::string &flag : options_.flags)
    if (flag != "-shared")
      compileFlags.push_back(flag);
  std::vector<StatusOr<ProcessResult>> results(units.size(), unavailable("not run"));
  std::vector<std::thread> workers;
  auto compilePart = [&](size_t i) {
    std::vector<std::string> argv = command;
    argv.insert(argv.end(), compileFlags.begin(), compileFlags.end());
    argv.insert(argv.end(), {"-c", sources[i], "-o", objects[i]});
    results[i] = runHostProcess(argv);
  };
  for (size_t i = 0; i < units.size(); ++i) {
    try {
      workers.emplace_back(compilePart, i);
    } catch (const std::system_error &) {
      compilePart(i); // no thread to be had: compile this part here
    }
  }
  for (std::thread &worker : workers)
    worker.join();
  auto removeObjects = [&] {
    for (const std::string &object : objects)
      ::unlink(object.c_str());
  };
  for (size_t i = 0; i < units.size(); ++i) {
    if (!results[i].ok()) {
      removeObjects();
      return results[i].status().withPrefix(artifact.name() + ": ");
    }
    if (results[i]->exitCode != 0) {
      removeObjects();
      return unavailable(artifact.name(), ": compiling the generated kernels "
                         "failed (", options_.compiler, " exited with ",
                         results[i]->exitCode, ")\nsource kept at ", sources[i],
                         "\ncompiler output (last lines):\n",
                         lastLines(results[i]->output, 30));
    }
  }
  std::string tmpPath = libraryPath + ".tmp." + pid;
  std::vector<std::string> argv = command;
  argv.insert(argv.end(), options_.flags.begin(), options_.flags.end());
  argv.insert(argv.end(), objects.begin(), objects.end());
  argv.insert(argv.end(), {"-o", tmpPath});
  auto linked = runHostProcess(argv);
  removeObjects();
  for (const std::string &source : sources) // <stem>.cpp keeps the whole unit
    ::unlink(source.c_str());
  if (!linked.ok())
    return linked.status().withPrefix(artifact.name() + ": ");
  if (linked->exitCode != 0) {
    ::unlink(tmpPath.c_str());
    return unavailable(artifact.name(), ": linking the generated kernels "
                       "failed (", join(argv), " exited with ", linked->exitCode,
                       ")\ncompiler output (last lines):\n", lastLines(linked->output, 30));
  }
  if (::rename(tmpPath.c_str(), libraryPath.c_str()) != 0) {
    ::unlink(tmpPath.c_str());
    return invalidArgument(libraryPath, ": cannot move the compiled kernel "
                                        "library into the cache");
  }
  return okStatus();
}

StatusOr<std::string> KernelCompiler::cacheStem(const std::string &source) {
  KILN_ASSIGN_OR_RETURN(std::string identity, compilerIdentity());
  Fnv1a64 key;
  key.updateField(source);
  key.updateField(identity);
  key.updateField(join(options_.flags));
  key.updateField(hostCpuModel());
  return options_.cacheDir + "/kiln-" + hex64(key.digest());
}

StatusOr<std::string>
KernelCompiler::cachedLibraryPath(const Artifact &artifact) {
  KILN_ASSIGN_OR_RETURN(std::string stem,
                        cacheStem(translationUnit(artifact.root())));
  return stem + ".so";
}

StatusOr<std::unique_ptr<KernelLibrary>>
KernelCompiler::load(const Artifact &artifact) {
  auto start = std::chrono::steady_clock::now();
  // Keyed on what changes the binary: the unit without model-file
  // locations, so an edit that only moves lines (a comment) hits the cache.
  KILN_ASSIGN_OR_RETURN(std::string stem, cacheStem(translationUnit(artifact.root())));

  std::unique_ptr<KernelLibrary> library(new KernelLibrary());
  library->libraryPath_ = stem + ".so";
  library->sourcePath_ = stem + ".cpp";
  KILN_RETURN_IF_ERROR(createDirectories(options_.cacheDir)
                           .withPrefix("kernel cache ($KILN_CACHE_DIR): "));

  if (fileExists(library->libraryPath_)) {
    library->handle_ = openLibrary(library->libraryPath_);
    if (library->handle_)
      library->cacheHit_ = true;
    else
      ::unlink(library->libraryPath_.c_str()); // corrupt entry: rebuild
  }
  if (!library->handle_) {
    // The kept source names each kernel's model line (same lines, longer
    // comments: the compiler's line numbers still match).
    KILN_RETURN_IF_ERROR(writeFileAtomically(
        library->sourcePath_, {translationUnit(artifact.root(), /*withLocations=*/true)}));
    KILN_RETURN_IF_ERROR(compile(artifact, stem, library->libraryPath_));
    library->handle_ = openLibrary(library->libraryPath_);
    if (!library->handle_)
      return unavailable(artifact.name(), ": cannot load the compiled kernel "
                         "library ", library->libraryPath_, ": ", ::dlerror());
  }

  uint32_t numKernels =
      artifact.root().kernels() ? artifact.root().kernels()->size() : 0;
  for (uint32_t i = 0; i < numKernels; ++i) {
    const schema::Kernel &kernel = *artifact.root().kernels()->Get(i);
    void *symbol = ::dlsym(library->handle_, kernel.entry()->c_str());
    if (!symbol)
      return failedPrecondition(
          artifact.name(), ": ", kernelWhere(kernel, i),
          ": entry point not found in the compiled library (is it declared "
          "extern \"C\"?); source at ",
          library->sourcePath_);
    library->entries_.push_back(reinterpret_cast<KernelEntry>(symbol));
  }
  library->loadSeconds_ = std::chrono::duration<double>(
                              std::chrono::steady_clock::now() - start)
                              .count();
  return library;
}

} // namespace kiln::rt::cpu
