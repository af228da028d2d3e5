//===- SimModules.cpp - The simulated driver's modules, functions and launches ===//
//
// Test-only, part of libcuda.so.1 of the device simulator (SimDriver.cpp has
// the banner): cuModuleLoadData loads the shared library SimNvrtc.cpp built
// from a kernel source, cuModuleGetFunction finds an entry in it, and
// cuLaunchKernel checks the launch as the driver does and queues it; the
// kernels then run under SimKernelRuntime.h's kiln_sim_launch.
//
//===----------------------------------------------------------------------===//

#include "SimDriverState.h"

#include <climits>
#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <unistd.h>

using namespace kiln::sim::driver;

namespace {

// The shared library in an image from SimNvrtc: an ELF file whose size is
// the end of its section header table.
size_t elfSize(const unsigned char *image) {
  if (std::memcmp(image, "\x7f" "ELF", 4) != 0 || image[4] != 2 /* ELFCLASS64 */)
    return 0;
  uint64_t shoff;
  uint16_t shentsize, shnum;
  std::memcpy(&shoff, image + 0x28, 8);
  std::memcpy(&shentsize, image + 0x3a, 2);
  std::memcpy(&shnum, image + 0x3c, 2);
  return static_cast<size_t>(shoff + uint64_t(shentsize) * shnum);
}

} // namespace

extern "C" {

CUresult CUDAAPI cuModuleLoadData(CUmodule *module, const void *image) {
  if (CUresult r = ready(); r != CUDA_SUCCESS)
    return r;
  if (!module || !image)
    return CUDA_ERROR_INVALID_VALUE;
  const unsigned char *bytes = static_cast<const unsigned char *>(image);
  size_t size = elfSize(bytes);
  if (size == 0)
    return CUDA_ERROR_INVALID_IMAGE;
  char path[] = "/tmp/kiln_sim_module_XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0)
    return CUDA_ERROR_OUT_OF_MEMORY;
  bool written = ::write(fd, bytes, size) == static_cast<ssize_t>(size);
  ::close(fd);
  void *library = written ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : nullptr;
  const char *why = library ? nullptr : dlerror();
  ::unlink(path);
  if (!library) {
    std::fprintf(stderr,
                 "kiln device simulator: cuModuleLoadData: not a simulator module (%s); "
                 "a real CUBIN from a JIT cache shared with a GPU run? use another "
                 "$KILN_CACHE_DIR\n",
                 why ? why : "write failed");
    return CUDA_ERROR_INVALID_IMAGE;
  }
  auto launch = reinterpret_cast<CUmod_st::Launch>(dlsym(library, "kiln_sim_launch"));
  if (!launch) {
    dlclose(library);
    std::fprintf(stderr, "kiln device simulator: cuModuleLoadData: the image has no "
                         "kiln_sim_launch (a real CUBIN? use another $KILN_CACHE_DIR)\n");
    return CUDA_ERROR_INVALID_IMAGE;
  }
  auto *m = new CUmod_st{library, launch};
  device().modules.insert(m);
  *module = m;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleUnload(CUmodule module) {
  Device &d = device();
  if (!d.modules.count(module))
    return CUDA_ERROR_INVALID_HANDLE;
  for (CUstream_st *s : d.streams)
    drain(*s);
  for (auto it = d.functions.begin(); it != d.functions.end();)
    if ((*it)->module == module) {
      delete *it;
      it = d.functions.erase(it);
    } else {
      ++it;
    }
  dlclose(module->library);
  d.modules.erase(module);
  delete module;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleGetFunction(CUfunction *hfunc, CUmodule module, const char *name) {
  if (CUresult r = ready(); r != CUDA_SUCCESS)
    return r;
  if (!hfunc || !name)
    return CUDA_ERROR_INVALID_VALUE;
  if (!device().modules.count(module))
    return CUDA_ERROR_INVALID_HANDLE;
  void *entry = dlsym(module->library, name);
  if (!entry)
    return CUDA_ERROR_NOT_FOUND;
  auto *f = new CUfunc_st;
  f->module = module;
  f->entry = reinterpret_cast<void (*)(void *const *)>(entry);
  f->name = name;
  device().functions.insert(f);
  *hfunc = f;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc) {
  if (!pi)
    return CUDA_ERROR_INVALID_VALUE;
  if (!device().functions.count(hfunc))
    return CUDA_ERROR_INVALID_HANDLE;
  switch (attrib) {
  case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: *pi = 0; break; // not known to the simulator
  case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
  case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *pi = hfunc->maxDynamicShared; break;
  default:
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value) {
  if (!device().functions.count(hfunc))
    return CUDA_ERROR_INVALID_HANDLE;
  if (attrib != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
    return CUDA_ERROR_INVALID_VALUE; // the only attribute Kiln sets
  if (value < 0 || value > kOptInShared)
    return CUDA_ERROR_INVALID_VALUE;
  hfunc->maxDynamicShared = value;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                unsigned int gridDimZ, unsigned int blockDimX,
                                unsigned int blockDimY, unsigned int blockDimZ,
                                unsigned int sharedMemBytes, CUstream stream,
                                void **kernelParams, void **extra) {
  if (CUresult r = ready(); r != CUDA_SUCCESS)
    return r;
  Device &d = device();
  if (!d.functions.count(f))
    return CUDA_ERROR_INVALID_HANDLE;
  CUstream_st *s = resolveStream(stream);
  if (!s)
    return CUDA_ERROR_INVALID_HANDLE;
  if (gridDimY != 1 || gridDimZ != 1 || blockDimY != 1 || blockDimZ != 1) {
    std::fprintf(stderr, "kiln device simulator: %s: only 1-D grids and blocks are "
                         "simulated\n", f->name.c_str());
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  if (blockDimX == 0 || blockDimX > 1024 || gridDimX == 0 || gridDimX > unsigned(INT_MAX))
    return CUDA_ERROR_INVALID_VALUE;
  if (static_cast<int>(sharedMemBytes) > f->maxDynamicShared) {
    std::fprintf(stderr, "kiln device simulator: %s: %u bytes of dynamic shared memory "
                         "but the function allows %d (cuFuncSetAttribute("
                         "MAX_DYNAMIC_SHARED_SIZE_BYTES) opts into more than 48 KiB)\n",
                 f->name.c_str(), sharedMemBytes, f->maxDynamicShared);
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (!kernelParams || extra || !kernelParams[0])
    return CUDA_ERROR_INVALID_VALUE;
  // Parameters are copied at the launch, as the driver does.
  CUdeviceptr table = *static_cast<CUdeviceptr *>(kernelParams[0]);
  if (!inDevice(table, sizeof(void *))) {
    std::fprintf(stderr, "kiln device simulator: %s: its buffer table is not device memory\n",
                 f->name.c_str());
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUfunc_st fn = *f;
  unsigned grid = gridDimX, block = blockDimX, shared = sharedMemBytes;
  return enqueueOn(
      s, Operation{[fn, table, grid, block, shared] {
                     Device &dev = device();
                     char error[512] = {};
                     unsigned long long seed = dev.seed * 0x9e3779b97f4a7c15ull + ++dev.launches;
                     int rc = fn.module->launch(fn.entry, reinterpret_cast<void *const *>(table),
                                                grid, block, shared, seed,
                                                dev.alwaysFibers ? 1 : 0, error, sizeof(error));
                     if (rc != 0)
                       failContext("kernel '" + fn.name + "': " + error);
                   },
                   "kernel " + f->name});
}

} // extern "C"
