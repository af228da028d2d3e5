//===- CudaDriver.h - The CUDA driver API, loaded from libcuda at run time ===//
//
// One table of driver entry points resolved by dlsym from libcuda.so.1.
// The function types are the toolkit's own (decltype of cuda.h's
// declarations) and the symbol names are cuda.h's macro expansions
// (cuMemAlloc -> "cuMemAlloc_v2"), so neither can drift from the header.
// Only runtime/cuda/*.cpp include this header: it pulls in cuda.h.
//
// check() turns a CUresult into a Status naming the call and the driver's
// own error name and text ("cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (out of
// memory)"); launches add the kernel's entry and model-file location.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CUDA_CUDADRIVER_H
#define KILN_RUNTIME_CUDA_CUDADRIVER_H

#include "runtime/Status.h"
#include "runtime/cuda/DynamicLibrary.h"

#include <cuda.h>

#include <memory>
#include <string>

namespace kiln::rt::cuda {

struct CudaDriver {
  // Opens libcuda.so.1 and resolves every entry below, then cuInit(0). On a
  // machine without a driver the error says so and names where it looked.
  static StatusOr<std::unique_ptr<CudaDriver>> load();

  // OK for CUDA_SUCCESS, else an error "<call>: <NAME> (<text>)<context>".
  Status check(CUresult result, const char *call,
               const std::string &context = "") const;

  std::unique_ptr<DynamicLibrary> library;

#define KILN_CUDA_DRIVER_FUNCTIONS(X)                                           \
  X(cuGetErrorName)                                                            \
  X(cuGetErrorString)                                                          \
  X(cuInit)                                                                    \
  X(cuDriverGetVersion)                                                        \
  X(cuDeviceGetCount)                                                          \
  X(cuDeviceGet)                                                               \
  X(cuDeviceGetName)                                                           \
  X(cuDeviceGetAttribute)                                                      \
  X(cuDevicePrimaryCtxRetain)                                                  \
  X(cuDevicePrimaryCtxRelease)                                                 \
  X(cuCtxSetCurrent)                                                           \
  X(cuMemGetInfo)                                                              \
  X(cuMemAlloc)                                                                \
  X(cuMemFree)                                                                 \
  X(cuMemAllocHost)                                                            \
  X(cuMemFreeHost)                                                             \
  X(cuMemcpyHtoD)                                                              \
  X(cuMemcpyDtoH)                                                              \
  X(cuMemcpyHtoDAsync)                                                         \
  X(cuMemcpyDtoDAsync)                                                         \
  X(cuMemsetD8Async)                                                           \
  X(cuModuleLoadData)                                                          \
  X(cuModuleUnload)                                                            \
  X(cuModuleGetFunction)                                                       \
  X(cuFuncSetAttribute)                                                        \
  X(cuFuncGetAttribute)                                                        \
  X(cuLaunchKernel)                                                            \
  X(cuStreamCreate)                                                            \
  X(cuStreamDestroy)                                                           \
  X(cuStreamSynchronize)                                                       \
  X(cuStreamBeginCapture)                                                      \
  X(cuStreamEndCapture)                                                        \
  X(cuGraphInstantiate)                                                        \
  X(cuGraphLaunch)                                                             \
  X(cuGraphExecDestroy)                                                        \
  X(cuGraphDestroy)                                                            \
  X(cuEventCreate)                                                             \
  X(cuEventDestroy)                                                            \
  X(cuEventRecord)                                                             \
  X(cuEventRecordWithFlags)                                                    \
  X(cuStreamWaitEvent)                                                         \
  X(cuEventElapsedTime)

  // One pointer per entry, named like the API without the "cu" macro
  // suffixes: driver.cuMemAlloc(&ptr, bytes).
#define KILN_DECLARE_CUDA_FN(name) decltype(&::name) name = nullptr;
  KILN_CUDA_DRIVER_FUNCTIONS(KILN_DECLARE_CUDA_FN)
#undef KILN_DECLARE_CUDA_FN
};

} // namespace kiln::rt::cuda

#endif // KILN_RUNTIME_CUDA_CUDADRIVER_H
