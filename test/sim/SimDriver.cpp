//===- SimDriver.cpp - The device simulator's libcuda: one strict fake GPU ===//
//
// Test-only; built as libcuda.so.1 in the simulator's library folder, which
// kiln-run finds through $KILN_CUDA_LIB_DIR. It implements the driver entry
// points runtime/cuda/CudaDriver.h resolves (this file: context, memory,
// streams, graphs; SimModules.cpp: modules and launches; SimEvents.cpp:
// events), as the driver documents them,
// for one H100-like device (sm_90, 80 GiB, 227 KiB opt-in shared memory):
//
//  - Device memory is its own mappings, filled with 0xff at allocation (NaN
//    as fp32 and bf16), so a buffer the host never uploaded, or a kernel
//    read of memory nothing wrote, shows as NaN; each allocation is followed
//    by an inaccessible page, and freed memory is unmapped.
//  - Streams are lazy: operations queue and run only when their stream is
//    synchronized or a synchronous call orders them (the legacy default
//    stream waits for blocking streams, never for CU_STREAM_NON_BLOCKING
//    ones). Asynchronous copies stage pageable host memory at the call.
//  - Capture (cuStreamBeginCapture) records a stream's operations into a
//    graph instead; cuGraphLaunch replays them. What the driver forbids
//    during a capture -- allocation, freeing, synchronous copies, syncing
//    the capturing stream, copies from pageable memory -- fails with
//    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the capture, so
//    cuStreamEndCapture then fails with CUDA_ERROR_STREAM_CAPTURE_INVALIDATED.
//  - Launches are checked as the driver checks them: a loaded function,
//    1 <= block <= 1024, 1 <= grid < 2^31, dynamic shared memory above
//    48 KiB only up to what cuFuncSetAttribute opted into. Kernels run by
//    SimKernelRuntime.h (blocks shuffled, threads as fibers).
//  - A failed kernel makes the context's error sticky, as on a GPU: the
//    next synchronizing call and every call after it return
//    CUDA_ERROR_LAUNCH_FAILED; the reason is printed once on stderr.
//
// Not simulated: several devices, 2-D/3-D grids and blocks (Kiln launches
// 1-D only; refused), kernel parameters other than one pointer (Kiln's
// `void* const* buffers`), static shared memory sizes (reported as 0),
// concurrency between streams (a stream's queue runs in order on the host).
//
// Events time the host's run of the operations between two records;
// cuMemAllocHost memory is read by a copy when the copy runs (so a graph may
// replay it), pageable memory is staged at the call.
//
// Environment: KILN_SIM_SEED (block order, default 1),
// KILN_SIM_ALWAYS_FIBERS=1 (no fast path), KILN_SIM_TRACE=1 (one stderr line
// per operation run, with its host time; a graph's nodes as "graph node",
// before the line of their "graph launch").
//
//===----------------------------------------------------------------------===//

#include "SimDevice.h"
#include "SimDriverState.h"

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>

namespace kiln::sim::driver {

Device &device() {
  static Device d;
  return d;
}

namespace {
thread_local CUcontext currentContext = nullptr;
} // namespace

CUstream_st *resolveStream(CUstream s) {
  Device &d = device();
  if (s == nullptr || s == CU_STREAM_LEGACY)
    return &d.legacy;
  return d.streams.count(s) ? s : nullptr;
}

void failContext(const std::string &why) {
  Device &d = device();
  if (d.sticky == CUDA_SUCCESS)
    std::fprintf(stderr, "kiln device simulator: %s\n", why.c_str());
  d.sticky = CUDA_ERROR_LAUNCH_FAILED;
}

// Set while a graph's nodes run, so the trace tells them from operations
// launched on their own.
thread_local bool inGraph = false;

void runOperation(const Operation &op) {
  Device &d = device();
  if (d.sticky != CUDA_SUCCESS)
    return; // a failed context runs nothing more
  if (!d.trace) {
    op.run();
    return;
  }
  auto start = std::chrono::steady_clock::now();
  op.run();
  std::fprintf(stderr, "kiln device simulator: ran %s%s in %.3f ms\n",
               inGraph ? "graph node " : "", op.what.c_str(),
               std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                   .count());
}

void drain(CUstream_st &s) {
  while (!s.queue.empty()) {
    Operation op = std::move(s.queue.front());
    s.queue.pop_front();
    runOperation(op);
  }
}

// Every stream's queued work, the legacy stream's last.
void drainAll() {
  Device &d = device();
  for (CUstream_st *s : d.streams)
    drain(*s);
  drain(d.legacy);
}

// What a synchronous call on the legacy stream orders: every blocking
// stream's queued work, then the legacy stream's.
void drainForLegacy() {
  Device &d = device();
  for (CUstream_st *s : d.streams)
    if (!(s->flags & CU_STREAM_NON_BLOCKING))
      drain(*s);
  drain(d.legacy);
}

// The driver's rule for "potentially unsafe" calls during a capture: they
// fail when this thread captures in GLOBAL or THREAD_LOCAL mode, or any
// thread captures in GLOBAL mode; those captures are invalidated.
CUresult captureForbids(const char *call) {
  Device &d = device();
  CUresult result = CUDA_SUCCESS;
  for (CUstream_st *s : d.streams) {
    if (!s->capturing || s->mode == CU_STREAM_CAPTURE_MODE_RELAXED)
      continue;
    bool thisThread = s->captureThread == std::this_thread::get_id();
    if (thisThread || s->mode == CU_STREAM_CAPTURE_MODE_GLOBAL) {
      s->invalidated = true;
      s->invalidatedBy = call;
      result = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
  }
  return result;
}

CUresult ready() {
  Device &d = device();
  if (!d.initialized)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (!currentContext)
    return CUDA_ERROR_INVALID_CONTEXT;
  return d.sticky;
}

CUresult enqueueOn(CUstream_st *s, Operation op) {
  if (s->joinedTo && s->joinedTo->capturing)
    s = s->joinedTo; // a forked stream records into its origin's capture
  if (s->capturing) {
    s->capture->graph.nodes.push_back(std::move(op));
    return CUDA_SUCCESS;
  }
  if (s == &device().legacy) {
    // The legacy stream waits for the blocking streams' earlier work.
    for (CUstream_st *other : device().streams)
      if (!(other->flags & CU_STREAM_NON_BLOCKING))
        drain(*other);
  }
  s->queue.push_back(std::move(op));
  return CUDA_SUCCESS;
}

bool inDevice(CUdeviceptr p, size_t bytes) {
  return kiln::sim::isDeviceRange(reinterpret_cast<const void *>(p), bytes);
}

void runGraph(const Graph &g) {
  inGraph = true;
  for (const Operation &op : g.nodes)
    runOperation(op);
  inGraph = false;
}

} // namespace kiln::sim::driver

using namespace kiln::sim::driver;

// ---- the interface for the simulator's other libraries ---------------------

namespace kiln::sim {

CUresult enqueue(CUstream stream, std::function<void()> op, std::string what) {
  CUstream_st *s = resolveStream(stream);
  if (!s)
    return CUDA_ERROR_INVALID_HANDLE;
  return enqueueOn(s, Operation{std::move(op), std::move(what)});
}

bool isDeviceRange(const void *pointer, size_t bytes) {
  Device &d = device();
  uintptr_t p = reinterpret_cast<uintptr_t>(pointer);
  auto it = d.allocations.upper_bound(p);
  if (it == d.allocations.begin())
    return false;
  --it;
  return p >= it->first && p + bytes <= it->first + it->second.bytes && p + bytes >= p;
}

void fault(const std::string &message) {
  std::fprintf(stderr, "kiln device simulator: %s\n", message.c_str());
  std::abort();
}

} // namespace kiln::sim

// ---- the driver API --------------------------------------------------------

namespace {

// $KILN_SIM_DEVICES (default 1): how many GPUs the node seems to have, so
// that ranks of a data-parallel run (one per GPU, LOCAL_RANK) start.
int simulatedDeviceCount() {
  const char *text = std::getenv("KILN_SIM_DEVICES");
  int count = text && *text ? std::atoi(text) : 1;
  return count >= 1 ? count : 1;
}

} // namespace

extern "C" {

CUresult CUDAAPI cuGetErrorName(CUresult error, const char **pStr) {
  if (!pStr)
    return CUDA_ERROR_INVALID_VALUE;
  switch (error) {
#define KILN_SIM_NAME(e)                                                       \
  case e:                                                                      \
    *pStr = #e;                                                                \
    return CUDA_SUCCESS;
    KILN_SIM_NAME(CUDA_SUCCESS)
    KILN_SIM_NAME(CUDA_ERROR_INVALID_VALUE)
    KILN_SIM_NAME(CUDA_ERROR_OUT_OF_MEMORY)
    KILN_SIM_NAME(CUDA_ERROR_NOT_INITIALIZED)
    KILN_SIM_NAME(CUDA_ERROR_INVALID_IMAGE)
    KILN_SIM_NAME(CUDA_ERROR_INVALID_CONTEXT)
    KILN_SIM_NAME(CUDA_ERROR_INVALID_HANDLE)
    KILN_SIM_NAME(CUDA_ERROR_NOT_FOUND)
    KILN_SIM_NAME(CUDA_ERROR_ILLEGAL_ADDRESS)
    KILN_SIM_NAME(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)
    KILN_SIM_NAME(CUDA_ERROR_LAUNCH_FAILED)
    KILN_SIM_NAME(CUDA_ERROR_NOT_SUPPORTED)
    KILN_SIM_NAME(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
    KILN_SIM_NAME(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
    KILN_SIM_NAME(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED)
    KILN_SIM_NAME(CUDA_ERROR_ILLEGAL_STATE)
#undef KILN_SIM_NAME
  default:
    *pStr = nullptr;
    return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult CUDAAPI cuGetErrorString(CUresult error, const char **pStr) {
  if (!pStr)
    return CUDA_ERROR_INVALID_VALUE;
  switch (error) {
  case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED:
    *pStr = "operation not permitted when stream is capturing";
    return CUDA_SUCCESS;
  case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED:
    *pStr = "operation failed due to a previous error during capture";
    return CUDA_SUCCESS;
  case CUDA_ERROR_LAUNCH_FAILED:
    *pStr = "unspecified launch failure (device simulator: the reason is on stderr)";
    return CUDA_SUCCESS;
  default:
    return cuGetErrorName(error, pStr);
  }
}

CUresult CUDAAPI cuInit(unsigned int flags) {
  if (flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  Device &d = device();
  d.initialized = true;
  if (const char *seed = std::getenv("KILN_SIM_SEED"); seed && *seed)
    d.seed = std::strtoull(seed, nullptr, 10);
  const char *fibers = std::getenv("KILN_SIM_ALWAYS_FIBERS");
  d.alwaysFibers = fibers && std::strcmp(fibers, "1") == 0;
  const char *trace = std::getenv("KILN_SIM_TRACE");
  d.trace = trace && std::strcmp(trace, "1") == 0;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDriverGetVersion(int *version) {
  if (!version)
    return CUDA_ERROR_INVALID_VALUE;
  *version = 13000;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetCount(int *count) {
  if (!count)
    return CUDA_ERROR_INVALID_VALUE;
  if (!device().initialized)
    return CUDA_ERROR_NOT_INITIALIZED;
  *count = simulatedDeviceCount();
  return CUDA_SUCCESS;
}

// Each ordinal below the count is the one simulated device (a process uses
// one GPU; ranks in other processes each have their own simulator).
CUresult CUDAAPI cuDeviceGet(CUdevice *dev, int ordinal) {
  if (!dev)
    return CUDA_ERROR_INVALID_VALUE;
  if (!device().initialized)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (ordinal < 0 || ordinal >= simulatedDeviceCount())
    return CUDA_ERROR_INVALID_DEVICE;
  *dev = 0;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev) {
  if (!name || len <= 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (dev != 0)
    return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(name, static_cast<size_t>(len), "Kiln device simulator (sm_90)");
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev) {
  if (!pi)
    return CUDA_ERROR_INVALID_VALUE;
  if (dev != 0)
    return CUDA_ERROR_INVALID_DEVICE;
  switch (attrib) {
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = 9; break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = 0; break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *pi = kOptInShared; break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *pi = kDefaultShared; break;
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: *pi = 1024; break;
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: *pi = INT_MAX; break;
  case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *pi = 32; break;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = 132; break;
  case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: *pi = 65536; break;
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *pi = 2048; break;
  default:
    // Not simulated: a caller relying on it learns so instead of a made-up value.
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
  if (!pctx)
    return CUDA_ERROR_INVALID_VALUE;
  if (!device().initialized)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (dev != 0)
    return CUDA_ERROR_INVALID_DEVICE;
  ++device().contextRefs;
  *pctx = &device().context;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev) {
  if (dev != 0)
    return CUDA_ERROR_INVALID_DEVICE;
  if (device().contextRefs <= 0)
    return CUDA_ERROR_INVALID_CONTEXT;
  --device().contextRefs;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) {
  if (ctx && ctx != &device().context)
    return CUDA_ERROR_INVALID_CONTEXT;
  currentContext = ctx;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemGetInfo(size_t *free, size_t *total) {
  if (CUresult r = ready(); r != CUDA_SUCCESS)
    return r;
  if (!free || !total)
    return CUDA_ERROR_INVALID_VALUE;
  *total = kTotalBytes;
  *free = kTotalBytes - device().allocated;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAlloc(CUdeviceptr *dptr, size_t bytesize) {
  if (CUresult r = ready(); r != CUDA_SUCCESS)
    return r;
  if (!dptr || bytesize == 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = captureForbids("cuMemAlloc"); r != CUDA_SUCCESS)
    return r;
  Device &d = device();
  if (bytesize > kTotalBytes - d.allocated)
    return CUDA_ERROR_OUT_OF_MEMORY;
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  size_t usable = (bytesize + page - 1) / page * page;
  size_t mapped = usable + page;
  void *p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return CUDA_ERROR_OUT_OF_MEMORY;
  mprotect(static_cast<char *>(p) + usable, page, PROT_NONE);
  std::memset(p, 0xff, bytesize); // poison: NaN as fp32 and bf16
  d.allocations[reinterpret_cast<uintptr_t>(p)] = Allocation{bytesize, mapped};
  d.allocated += bytesize;
  *dptr = reinterpret_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemFree(CUdeviceptr dptr) {
  if (CUresult r = ready(); r != CUDA_SUCCESS && r != CUDA_ERROR_LAUNCH_FAILED)
    return r;
  if (CUresult r = captureForbids("cuMemFree"); r != CUDA_SUCCESS)
    return r;
  Device &d = device();
  auto it = d.allocations.find(static_cast<uintptr_t>(dptr));
  if (it == d.allocations.end())
    return CUDA_ERROR_INVALID_VALUE;
  drainAll(); // cuMemFree waits for the work that may still use the memory
  munmap(reinterpret_cast<void *>(it->first), it->second.mapped);
  d.allocated -= it->second.bytes;
  d.allocations.erase(it);
  return CUDA_SUCCESS;
}

// Page-locked host memory: a copy from it reads it when the copy runs (so a
// graph can replay one), where pageable memory is staged at the call.
CUresult CUDAAPI cuMemAllocHost(void **pp, size_t bytesize) {
  if (CUresult r = ready(); r != CUDA_SUCCESS)
    return r;
  if (!pp || bytesize == 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = captureForbids("cuMemAllocHost"); r != CUDA_SUCCESS)
    return r;
  void *p = std::aligned_alloc(4096, (bytesize + 4095) / 4096 * 4096);
  if (!p)
    return CUDA_ERROR_OUT_OF_MEMORY;
  std::memset(p, 0xff, bytesize); // uninitialized, as cuMemAllocHost leaves it
  device().pinned[reinterpret_cast<uintptr_t>(p)] = bytesize;
  *pp = p;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemFreeHost(void *p) {
  if (CUresult r = ready(); r != CUDA_SUCCESS && r != CUDA_ERROR_LAUNCH_FAILED)
    return r;
  if (CUresult r = captureForbids("cuMemFreeHost"); r != CUDA_SUCCESS)
    return r;
  Device &d = device();
  auto it = d.pinned.find(reinterpret_cast<uintptr_t>(p));
  if (it == d.pinned.end())
    return CUDA_ERROR_INVALID_VALUE;
  drainAll(); // work that may still read it completes
  d.pinned.erase(it);
  std::free(p);
  return CUDA_SUCCESS;
}

namespace {

// [p, p + bytes) lies in one cuMemAllocHost allocation.
bool inPinned(const void *p, size_t bytes) {
  const Device &d = device();
  auto at = reinterpret_cast<uintptr_t>(p);
  auto it = d.pinned.upper_bound(at);
  if (it == d.pinned.begin())
    return false;
  --it;
  return at + bytes <= it->first + it->second;
}

} // namespace

CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t bytes) {
  if (CUresult r = ready(); r != CUDA_SUCCESS)
    return r;
  if (CUresult r = captureForbids("cuMemcpyHtoD"); r != CUDA_SUCCESS)
    return r;
  if (!src || !inDevice(dst, bytes))
    return CUDA_ERROR_INVALID_VALUE;
  drainForLegacy();
  std::memcpy(reinterpret_cast<void *>(dst), src, bytes);
  return device().sticky;
}

CUresult CUDAAPI cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t bytes) {
  if (CUresult r = ready(); r != CUDA_SUCCESS)
    return r;
  if (CUresult r = captureForbids("cuMemcpyDtoH"); r != CUDA_SUCCESS)
    return r;
  if (!dst || !inDevice(src, bytes))
    return CUDA_ERROR_INVALID_VALUE;
  drainForLegacy();
  std::memcpy(dst, reinterpret_cast<const void *>(src), bytes);
  return device().sticky;
}

CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t bytes,
                                   CUstream stream) {
  if (CUresult r = ready(); r != CUDA_SUCCESS)
    return r;
  CUstream_st *s = resolveStream(stream);
  if (!s)
    return CUDA_ERROR_INVALID_HANDLE;
  if (!src || !inDevice(dst, bytes))
    return CUDA_ERROR_INVALID_VALUE;
  if (inPinned(src, bytes))
    return enqueueOn(s, Operation{[dst, src, bytes] {
                                    std::memcpy(reinterpret_cast<void *>(dst), src, bytes);
                                  },
                                  "cuMemcpyHtoDAsync"});
  if (s->capturing) {
    // From pageable memory: a graph cannot replay the copy.
    s->invalidated = true;
    s->invalidatedBy = "cuMemcpyHtoDAsync from pageable memory";
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  // Pageable memory is staged before the call returns.
  auto staged = std::make_shared<std::vector<unsigned char>>(
      static_cast<const unsigned char *>(src), static_cast<const unsigned char *>(src) + bytes);
  return enqueueOn(s, Operation{[dst, staged] {
                                  std::memcpy(reinterpret_cast<void *>(dst), staged->data(),
                                              staged->size());
                                },
                                "cuMemcpyHtoDAsync"});
}

CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                                   CUstream stream) {
  if (CUresult r = ready(); r != CUDA_SUCCESS)
    return r;
  CUstream_st *s = resolveStream(stream);
  if (!s)
    return CUDA_ERROR_INVALID_HANDLE;
  if (!inDevice(dst, bytes) || !inDevice(src, bytes))
    return CUDA_ERROR_INVALID_VALUE;
  return enqueueOn(s, Operation{[dst, src, bytes] {
                                  std::memmove(reinterpret_cast<void *>(dst),
                                               reinterpret_cast<const void *>(src), bytes);
                                },
                                "cuMemcpyDtoDAsync"});
}

CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t n,
                                 CUstream stream) {
  if (CUresult r = ready(); r != CUDA_SUCCESS)
    return r;
  CUstream_st *s = resolveStream(stream);
  if (!s)
    return CUDA_ERROR_INVALID_HANDLE;
  if (!inDevice(dst, n))
    return CUDA_ERROR_INVALID_VALUE;
  return enqueueOn(s, Operation{[dst, value, n] {
                                  std::memset(reinterpret_cast<void *>(dst), value, n);
                                },
                                "cuMemsetD8Async"});
}

CUresult CUDAAPI cuStreamCreate(CUstream *phStream, unsigned int flags) {
  if (CUresult r = ready(); r != CUDA_SUCCESS)
    return r;
  if (!phStream || (flags & ~unsigned(CU_STREAM_NON_BLOCKING)))
    return CUDA_ERROR_INVALID_VALUE;
  auto *s = new CUstream_st;
  s->flags = flags;
  device().streams.insert(s);
  *phStream = s;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamDestroy(CUstream hStream) {
  Device &d = device();
  if (!d.streams.count(hStream))
    return CUDA_ERROR_INVALID_HANDLE;
  drain(*hStream); // queued work completes, as on the device
  d.streams.erase(hStream);
  delete hStream;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamSynchronize(CUstream hStream) {
  if (CUresult r = ready(); r != CUDA_SUCCESS)
    return r;
  CUstream_st *s = resolveStream(hStream);
  if (!s)
    return CUDA_ERROR_INVALID_HANDLE;
  if (s->capturing) {
    s->invalidated = true;
    s->invalidatedBy = "cuStreamSynchronize";
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  if (CUresult r = captureForbids("cuStreamSynchronize"); r != CUDA_SUCCESS)
    return r;
  if (s == &device().legacy)
    drainForLegacy();
  else
    drain(*s);
  return device().sticky;
}

CUresult CUDAAPI cuStreamBeginCapture(CUstream hStream, CUstreamCaptureMode mode) {
  if (CUresult r = ready(); r != CUDA_SUCCESS)
    return r;
  CUstream_st *s = resolveStream(hStream);
  if (!s)
    return CUDA_ERROR_INVALID_HANDLE;
  if (s == &device().legacy)
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; // the legacy stream cannot be captured
  if (s->capturing)
    return CUDA_ERROR_ILLEGAL_STATE;
  s->capturing = true;
  s->invalidated = false;
  s->invalidatedBy.clear();
  s->mode = mode;
  s->captureThread = std::this_thread::get_id();
  s->capture = std::make_unique<CUgraph_st>();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamEndCapture(CUstream hStream, CUgraph *phGraph) {
  CUstream_st *s = resolveStream(hStream);
  if (!s || !phGraph)
    return s ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_INVALID_HANDLE;
  if (!s->capturing)
    return CUDA_ERROR_ILLEGAL_STATE;
  if (s->captureThread != std::this_thread::get_id() &&
      s->mode != CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
  s->capturing = false;
  for (CUstream_st *forked : device().streams)
    if (forked->joinedTo == s)
      forked->joinedTo = nullptr;
  std::unique_ptr<CUgraph_st> graph = std::move(s->capture);
  if (s->invalidated) {
    std::fprintf(stderr, "kiln device simulator: the capture was invalidated by %s\n",
                 s->invalidatedBy.c_str());
    *phGraph = nullptr;
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  }
  *phGraph = graph.release();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph,
                                    unsigned long long flags) {
  if (CUresult r = ready(); r != CUDA_SUCCESS)
    return r;
  if (!phGraphExec || !hGraph || flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  *phGraphExec = new CUgraphExec_st{hGraph->graph};
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
  if (CUresult r = ready(); r != CUDA_SUCCESS)
    return r;
  if (!hGraphExec)
    return CUDA_ERROR_INVALID_VALUE;
  CUstream_st *s = resolveStream(hStream);
  if (!s)
    return CUDA_ERROR_INVALID_HANDLE;
  const Graph *graph = &hGraphExec->graph;
  return enqueueOn(s, Operation{[graph] { runGraph(*graph); }, "graph launch"});
}

CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec hGraphExec) {
  if (!hGraphExec)
    return CUDA_ERROR_INVALID_VALUE;
  for (CUstream_st *s : device().streams)
    drain(*s); // a queued launch of it completes first
  delete hGraphExec;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphDestroy(CUgraph hGraph) {
  if (!hGraph)
    return CUDA_ERROR_INVALID_VALUE;
  delete hGraph;
  return CUDA_SUCCESS;
}

} // extern "C"
