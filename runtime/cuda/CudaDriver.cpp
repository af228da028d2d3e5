//===- CudaDriver.cpp - The CUDA driver API, loaded from libcuda ----------===//

#include "runtime/cuda/CudaDriver.h"

namespace kiln::rt::cuda {

// cuda.h maps API names to versioned symbols with macros (cuMemAlloc ->
// cuMemAlloc_v2); expanding before stringizing gives the exported name.
#define KILN_STRINGIZE_EXPANDED(x) KILN_STRINGIZE(x)
#define KILN_STRINGIZE(x) #x

StatusOr<std::unique_ptr<CudaDriver>> CudaDriver::load() {
  std::unique_ptr<CudaDriver> driver(new CudaDriver());
  // libcuda comes with the NVIDIA driver, not the toolkit: the toolkit's
  // lib64/stubs/libcuda.so only links and fails cuInit, so it is not tried.
  StatusOr<std::unique_ptr<DynamicLibrary>> library =
      DynamicLibrary::open("the CUDA driver (libcuda)", {"libcuda.so.1"});
  if (!library.ok())
    return failedPrecondition("this artifact targets CUDA, but no NVIDIA driver "
                              "is installed on this machine: ",
                              library.status().message());
  driver->library = std::move(*library);
#define KILN_RESOLVE_CUDA_FN(name)                                             \
  KILN_RETURN_IF_ERROR(                                                        \
      driver->library->resolve(KILN_STRINGIZE_EXPANDED(name), driver->name));
  KILN_CUDA_DRIVER_FUNCTIONS(KILN_RESOLVE_CUDA_FN)
#undef KILN_RESOLVE_CUDA_FN
  KILN_RETURN_IF_ERROR(driver->check(driver->cuInit(0), "cuInit"));
  int devices = 0;
  KILN_RETURN_IF_ERROR(
      driver->check(driver->cuDeviceGetCount(&devices), "cuDeviceGetCount"));
  if (devices == 0)
    return failedPrecondition("this artifact targets CUDA, but the driver "
                              "sees no GPU (check CUDA_VISIBLE_DEVICES)");
  return driver;
}

Status CudaDriver::check(CUresult result, const char *call,
                         const std::string &context) const {
  if (result == CUDA_SUCCESS)
    return okStatus();
  const char *name = nullptr;
  const char *text = nullptr;
  if (cuGetErrorName)
    cuGetErrorName(result, &name);
  if (cuGetErrorString)
    cuGetErrorString(result, &text);
  std::string message = detail::concat(
      call, ": ", name ? name : "CUDA error", " (",
      text ? text : std::to_string(static_cast<int>(result)).c_str(), ")",
      context);
  // Out of memory is the user's to fix (a smaller batch), the rest is the
  // device or a runtime bug.
  if (result == CUDA_ERROR_OUT_OF_MEMORY)
    return failedPrecondition(message);
  return unavailable(message);
}

} // namespace kiln::rt::cuda
