//===- DynamicLibrary.h - dlopen of the CUDA libraries with clear errors --===//
//
// kiln-run links no CUDA library: libcuda, NVRTC and cuBLASLt are opened at
// run time so that one binary runs CPU artifacts on a machine without CUDA.
// A library is looked for, in order, in
//   1. $KILN_CUDA_LIB_DIR            (an explicit override),
//   2. <dir of kiln-run>/lib and <dir of kiln-run>/../lib
//                                    (a GPU box carries the libraries next to
//                                     the binary),
//   3. /usr/local/cuda/lib64 and /usr/local/cuda/lib
//                                    (the toolkit's default install; NCCL
//                                     sits in lib),
//   4. the default loader path       (LD_LIBRARY_PATH, ld.so.cache).
// When none works the error names the library and every place tried with
// dlerror()'s reason, so "why does kiln-run not find NVRTC" is answered by
// the message itself.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CUDA_DYNAMICLIBRARY_H
#define KILN_RUNTIME_CUDA_DYNAMICLIBRARY_H

#include "runtime/Status.h"

#include <memory>
#include <string>
#include <vector>

namespace kiln::rt::cuda {

class DynamicLibrary {
public:
  // Opens the first of `names` (e.g. {"libnvrtc.so.13", "libnvrtc.so"})
  // found in the search directories above. `what` names the library in
  // messages ("NVRTC").
  static StatusOr<std::unique_ptr<DynamicLibrary>>
  open(const std::string &what, const std::vector<std::string> &names);
  // Opens exactly `path` (tests; a file the user named).
  static StatusOr<std::unique_ptr<DynamicLibrary>>
  openPath(const std::string &what, const std::string &path);

  ~DynamicLibrary();
  DynamicLibrary(const DynamicLibrary &) = delete;
  DynamicLibrary &operator=(const DynamicLibrary &) = delete;

  // The address of `symbol`, or an error naming the symbol and the library.
  StatusOr<void *> symbol(const std::string &symbol) const;

  // Resolves `symbol` into the function pointer `fn`.
  template <typename Fn> Status resolve(const char *name, Fn &fn) const {
    StatusOr<void *> address = symbol(name);
    if (!address.ok())
      return address.status();
    fn = reinterpret_cast<Fn>(*address);
    return okStatus();
  }

  // The file that was opened ("/usr/local/cuda/lib64/libnvrtc.so.13", or
  // just the name when the default loader path found it).
  const std::string &path() const { return path_; }

private:
  DynamicLibrary(void *handle, std::string what, std::string path)
      : handle_(handle), what_(std::move(what)), path_(std::move(path)) {}
  void *handle_;
  std::string what_;
  std::string path_;
};

// The directories searched before the default loader path, in order
// (nonexistent ones included; exposed for the tests and for messages).
std::vector<std::string> cudaLibrarySearchDirs();

} // namespace kiln::rt::cuda

#endif // KILN_RUNTIME_CUDA_DYNAMICLIBRARY_H
