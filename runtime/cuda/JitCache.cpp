//===- JitCache.cpp - NVRTC compiles of an artifact, cached on disk -------===//

#include "runtime/cuda/JitCache.h"

#include "runtime/FileIO.h"
#include "runtime/Hash.h"
#include "runtime/cpu/KernelCompiler.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <thread>

namespace kiln::rt::cuda {
namespace {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'C', 'U', 'B', 'N'};
constexpr uint32_t kEntryFormat = 1;
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 8 + 8 + 8;

std::string hex64(uint64_t value) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx",
                static_cast<unsigned long long>(value));
  return buf;
}

uint64_t payloadHash(std::string_view cubin, std::string_view log) {
  Fnv1a64 h;
  h.updateField(cubin);
  h.updateField(log);
  return h.digest();
}

template <typename T> void appendRaw(std::string &out, T value) {
  out.append(reinterpret_cast<const char *>(&value), sizeof(value));
}
template <typename T> T readRaw(const uint8_t *at) {
  T value;
  std::memcpy(&value, at, sizeof(value));
  return value;
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

} // namespace

const KernelResources *JitModule::resources(const std::string &entry) const {
  for (const KernelResources &k : kernels)
    if (k.entry == entry)
      return &k;
  return nullptr;
}

std::string JitCache::cudaCacheDir() {
  if (const char *cache = std::getenv("KILN_CACHE_DIR"); cache && *cache)
    return std::string(cache) + "/cuda";
  const char *home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/kiln/cuda";
}

std::string JitCache::key(const std::string &source,
                          const std::string &arch) const {
  Fnv1a64 h;
  h.updateField(source);
  h.updateField(arch);
  h.updateField(nvrtc_.version());
  for (const std::string &option : nvrtc_.compileOptions(arch))
    h.updateField(option);
  return hex64(h.digest());
}

std::string JitCache::entryPath(const std::string &source,
                                const std::string &arch) const {
  return cacheDir_ + "/" + key(source, arch) + ".cubin";
}

Status decodeCacheEntry(const std::vector<uint8_t> &bytes,
                        std::vector<uint8_t> &cubin, std::string &log) {
  if (bytes.size() < kHeaderBytes)
    return dataLoss("truncated (", bytes.size(), " bytes, header is ",
                    kHeaderBytes, ")");
  if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0)
    return dataLoss("not a kiln CUBIN cache entry (bad magic)");
  if (uint32_t format = readRaw<uint32_t>(bytes.data() + 8);
      format != kEntryFormat)
    return dataLoss("entry format ", format, ", expected ", kEntryFormat);
  uint64_t cubinBytes = readRaw<uint64_t>(bytes.data() + 16);
  uint64_t logBytes = readRaw<uint64_t>(bytes.data() + 24);
  uint64_t hash = readRaw<uint64_t>(bytes.data() + 32);
  uint64_t payload = bytes.size() - kHeaderBytes;
  if (cubinBytes > payload || logBytes != payload - cubinBytes)
    return dataLoss("sizes ", cubinBytes, " + ", logBytes,
                    " do not match the payload of ", payload, " bytes");
  std::string_view cubinView(
      reinterpret_cast<const char *>(bytes.data() + kHeaderBytes), cubinBytes);
  std::string_view logView(cubinView.data() + cubinBytes, logBytes);
  if (payloadHash(cubinView, logView) != hash)
    return dataLoss("checksum mismatch");
  if (cubinBytes < 4 || std::memcmp(cubinView.data(), "\x7f" "ELF", 4) != 0)
    return dataLoss("payload is not an ELF CUBIN");
  cubin.assign(cubinView.begin(), cubinView.end());
  log.assign(logView);
  return okStatus();
}

StatusOr<JitModule> JitCache::compile(const std::string &source,
                                      const std::string &fileName,
                                      const std::string &arch) const {
  auto start = std::chrono::steady_clock::now();
  JitModule module;
  module.arch = arch;
  std::string stem = cacheDir_ + "/" + key(source, arch);
  module.cachePath = stem + ".cubin";
  KILN_RETURN_IF_ERROR(createDirectories(cacheDir_).withPrefix(
      "CUDA kernel cache ($KILN_CACHE_DIR/cuda): "));

  if (fileExists(module.cachePath)) {
    StatusOr<std::vector<uint8_t>> bytes = readFileBytes(module.cachePath);
    std::string log;
    if (bytes.ok() && decodeCacheEntry(*bytes, module.cubin, log).ok()) {
      module.kernels = parsePtxasReport(log);
      module.cacheHit = true;
      module.seconds = secondsSince(start);
      return module;
    }
    // Torn by a killed writer or corrupted on disk: compile it again; the
    // atomic write below replaces it.
    module.replacedCorruptEntry = true;
  }

  StatusOr<NvrtcOutput> out = nvrtc_.compile(source, fileName, arch);
  if (!out.ok()) {
    std::string kept = stem + ".cu";
    if (writeFileAtomically(kept, {source}).ok())
      return Status(out.status().code(),
                    out.status().message() + "\nsource kept at " + kept);
    return out.status();
  }
  std::string header(kMagic, sizeof(kMagic));
  appendRaw<uint32_t>(header, kEntryFormat);
  appendRaw<uint32_t>(header, 0);
  appendRaw<uint64_t>(header, out->cubin.size());
  appendRaw<uint64_t>(header, out->log.size());
  std::string_view cubinView(reinterpret_cast<const char *>(out->cubin.data()),
                             out->cubin.size());
  appendRaw<uint64_t>(header, payloadHash(cubinView, out->log));
  KILN_RETURN_IF_ERROR(
      writeFileAtomically(module.cachePath, {header, cubinView, out->log}));
  module.kernels = parsePtxasReport(out->log);
  module.cubin = std::move(out->cubin);
  module.seconds = secondsSince(start);
  return module;
}

std::string JitCache::translationUnit(const schema::Artifact &artifact) {
  // The CPU backend's unit: the prelude, then each kernel behind a comment
  // naming its entry and ops. Without model-file locations, so the cache key
  // (a hash of the source) survives an edit that only moves model lines; the
  // entry names in NVRTC's messages lead to the locations in the artifact.
  return cpu::KernelCompiler::translationUnit(artifact);
}

StatusOr<JitArtifact> JitCache::compileArtifact(const Artifact &artifact,
                                                const std::string &arch, size_t parts,
                                                FILE *progress) const {
  auto start = std::chrono::steady_clock::now();
  std::string model = artifact.root().model() ? artifact.root().model()->str() : "kernels";
  std::vector<uint32_t> firstKernels;
  std::vector<std::string> units =
      cpu::KernelCompiler::translationUnitParts(artifact.root(), parts, /*withLocations=*/false,
                                                &firstKernels);
  if (progress) {
    size_t cold = 0;
    for (const std::string &unit : units)
      cold += fileExists(entryPath(unit, arch)) ? 0 : 1;
    if (cold > 0)
      std::fprintf(progress, "kiln-run: compiling %u kernels with NVRTC %s for %s in %zu "
                             "parallel parts (a cold cache; later runs load them from %s)\n",
                   artifact.root().kernels() ? artifact.root().kernels()->size() : 0u,
                   nvrtc_.version().c_str(), arch.c_str(), units.size(), cacheDir_.c_str());
  }
  std::vector<StatusOr<JitModule>> compiled(units.size(), unavailable("not compiled"));
  // Workers take the next part until none is left: as many as cores, NVRTC
  // being thread-safe for distinct programs.
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < units.size(); i = next++)
      compiled[i] = compile(units[i],
                            units.size() == 1 ? model + ".cu"
                                              : detail::concat(model, ".part", i, ".cu"),
                            arch);
  };
  size_t threads = std::min<size_t>(units.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> workers;
  for (size_t t = 1; t < threads; ++t) {
    try {
      workers.emplace_back(work);
    } catch (const std::system_error &) {
      break; // no more threads to be had: the others and this one share the parts
    }
  }
  work();
  for (std::thread &worker : workers)
    worker.join();
  JitArtifact result;
  result.arch = arch;
  result.cacheHit = true;
  for (StatusOr<JitModule> &part : compiled) {
    if (!part.ok())
      return part.status().withPrefix(artifact.name() + ": ");
    result.cacheHit = result.cacheHit && part->cacheHit;
    result.parts.push_back(std::move(*part));
  }
  result.firstKernels = std::move(firstKernels);
  result.seconds = secondsSince(start);
  return result;
}

size_t JitArtifact::cubinBytes() const {
  size_t bytes = 0;
  for (const JitModule &part : parts)
    bytes += part.cubin.size();
  return bytes;
}

size_t JitArtifact::partOf(uint32_t kernel) const {
  // The last part whose first kernel is at or before `kernel`.
  auto after = std::upper_bound(firstKernels.begin(), firstKernels.end(), kernel);
  return after == firstKernels.begin() ? 0 : size_t(after - firstKernels.begin()) - 1;
}

const KernelResources *JitArtifact::resources(const std::string &entry) const {
  for (const JitModule &part : parts)
    if (const KernelResources *r = part.resources(entry))
      return r;
  return nullptr;
}

std::string JitArtifact::cachePaths() const {
  if (parts.empty())
    return "";
  return parts.size() == 1 ? parts[0].cachePath
                           : detail::concat(parts[0].cachePath, " and ", parts.size() - 1,
                                            " more");
}

} // namespace kiln::rt::cuda
