//===- JitCache.cpp - NVRTC compiles of an artifact, cached on disk -------===//

#include "runtime/cuda/JitCache.h"

#include "runtime/FileIO.h"
#include "runtime/Hash.h"
#include "runtime/cpu/KernelCompiler.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

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

StatusOr<JitModule> JitCache::compileArtifact(const Artifact &artifact,
                                              const std::string &arch) const {
  std::string model =
      artifact.root().model() ? artifact.root().model()->str() : "kernels";
  StatusOr<JitModule> module =
      compile(translationUnit(artifact.root()), model + ".cu", arch);
  if (!module.ok())
    return module.status().withPrefix(artifact.name() + ": ");
  return module;
}

} // namespace kiln::rt::cuda
