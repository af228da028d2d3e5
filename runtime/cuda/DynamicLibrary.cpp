//===- DynamicLibrary.cpp - dlopen of the CUDA libraries with clear errors ===//

#include "runtime/cuda/DynamicLibrary.h"

#include <climits>
#include <cstdlib>
#include <dlfcn.h>
#include <unistd.h>

namespace kiln::rt::cuda {
namespace {

// The directory of the running executable (kiln-run, or a test binary), or
// "" when /proc/self/exe cannot be read.
std::string executableDir() {
  char buffer[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  if (n <= 0)
    return "";
  std::string path(buffer, static_cast<size_t>(n));
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

} // namespace

std::vector<std::string> cudaLibrarySearchDirs() {
  std::vector<std::string> dirs;
  if (const char *env = std::getenv("KILN_CUDA_LIB_DIR"); env && *env)
    dirs.push_back(env);
  std::string exe = executableDir();
  if (!exe.empty()) {
    dirs.push_back(exe + "/lib");
    dirs.push_back(exe + "/../lib");
  }
  dirs.push_back("/usr/local/cuda/lib64");
  dirs.push_back("/usr/local/cuda/lib"); // NCCL's place in the CUDA 13 toolkit
  return dirs;
}

StatusOr<std::unique_ptr<DynamicLibrary>>
DynamicLibrary::open(const std::string &what,
                     const std::vector<std::string> &names) {
  std::string tried;
  auto attempt = [&](const std::string &path) -> void * {
    // RTLD_LOCAL: the CUDA libraries' symbols must not satisfy the generated
    // CPU kernels' or each other's lookups by accident.
    void *handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char *reason = ::dlerror();
      tried += "\n  " + path + ": " + (reason ? reason : "not loadable");
    }
    return handle;
  };
  for (const std::string &dir : cudaLibrarySearchDirs())
    for (const std::string &name : names) {
      std::string path = dir + "/" + name;
      if (::access(path.c_str(), F_OK) != 0) {
        tried += "\n  " + path + ": no such file";
        continue;
      }
      if (void *handle = attempt(path))
        return std::unique_ptr<DynamicLibrary>(
            new DynamicLibrary(handle, what, path));
    }
  // A bare name makes dlopen search LD_LIBRARY_PATH and ld.so.cache.
  for (const std::string &name : names)
    if (void *handle = attempt(name))
      return std::unique_ptr<DynamicLibrary>(
          new DynamicLibrary(handle, what, name));
  return notFound("cannot load ", what, " (set $KILN_CUDA_LIB_DIR to the "
                  "directory holding it); tried:", tried,
                  " (default loader path)");
}

StatusOr<std::unique_ptr<DynamicLibrary>>
DynamicLibrary::openPath(const std::string &what, const std::string &path) {
  void *handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *reason = ::dlerror();
    return notFound("cannot load ", what, " from ", path, ": ",
                    reason ? reason : "not loadable");
  }
  return std::unique_ptr<DynamicLibrary>(new DynamicLibrary(handle, what, path));
}

DynamicLibrary::~DynamicLibrary() {
  if (handle_)
    ::dlclose(handle_);
}

StatusOr<void *> DynamicLibrary::symbol(const std::string &name) const {
  ::dlerror(); // clear a stale error so the one below is ours
  void *address = ::dlsym(handle_, name.c_str());
  if (!address)
    return notFound(what_, " (", path_, ") has no symbol '", name,
                    "': the library is older than this kiln-run expects");
  return address;
}

} // namespace kiln::rt::cuda
