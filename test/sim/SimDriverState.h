//===- SimDriverState.h - The simulated driver's state, shared by its files ===//
//
// Test-only, internal to libcuda.so.1 of the device simulator: the handle
// types, the one device's state and the stream helpers SimDriver.cpp
// (context, memory, streams, graphs) defines and SimModules.cpp (modules,
// functions, launches) and SimEvents.cpp (events) use. See SimDriver.cpp's banner for what is simulated.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_SIM_SIMDRIVERSTATE_H
#define KILN_TEST_SIM_SIMDRIVERSTATE_H

#include <cuda.h>

#include <chrono>

#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

// ---- handles ---------------------------------------------------------------

struct CUctx_st {
  int device = 0;
};

struct CUmod_st {
  void *library = nullptr;
  using Launch = int (*)(void (*)(void *const *), void *const *, unsigned, unsigned,
                         unsigned, unsigned long long, int, char *, size_t);
  Launch launch = nullptr;
};

struct CUfunc_st {
  CUmod_st *module = nullptr;
  void (*entry)(void *const *) = nullptr;
  std::string name;
  int maxDynamicShared = 48 * 1024; // the default without an opt-in
};

namespace kiln::sim::driver {

struct Operation {
  std::function<void()> run;
  std::string what;
};

struct Graph {
  std::vector<Operation> nodes;
};

} // namespace kiln::sim::driver

struct CUgraph_st {
  kiln::sim::driver::Graph graph;
};
struct CUgraphExec_st {
  kiln::sim::driver::Graph graph;
};

struct CUevent_st {
  std::chrono::steady_clock::time_point at; // when its record ran
  bool timing = true;
  bool completed = false;
  bool destroyed = false;
  int pending = 0; // records queued, not yet run
  // Recorded into this stream's capture (cuStreamWaitEvent then joins the
  // waiting stream to it), or null.
  CUstream_st *capturedIn = nullptr;
};

struct CUstream_st {
  unsigned flags = 0;
  std::deque<kiln::sim::driver::Operation> queue;
  bool capturing = false;
  bool invalidated = false;
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
  std::thread::id captureThread;
  std::unique_ptr<CUgraph_st> capture;
  std::string invalidatedBy;
  // Forked from that stream's capture (it waited on an event recorded
  // there): its work goes into that capture, in issue order, until the
  // capture ends.
  CUstream_st *joinedTo = nullptr;
};

namespace kiln::sim::driver {

constexpr size_t kTotalBytes = size_t(80) << 30;
constexpr int kOptInShared = 232448; // sm_90: 227 KiB
constexpr int kDefaultShared = 48 * 1024;

struct Allocation {
  size_t bytes = 0;
  size_t mapped = 0; // with the guard page
};

struct Device {
  bool initialized = false;
  CUctx_st context;
  int contextRefs = 0;
  std::map<uintptr_t, Allocation> allocations;
  size_t allocated = 0;
  std::map<uintptr_t, size_t> pinned; // cuMemAllocHost: start -> bytes
  CUstream_st legacy; // stream 0 / CU_STREAM_LEGACY
  std::set<CUstream_st *> streams;
  std::set<CUfunc_st *> functions;
  std::set<CUmod_st *> modules;
  std::set<CUevent_st *> events;
  CUresult sticky = CUDA_SUCCESS;
  unsigned long long launches = 0;
  unsigned long long seed = 1;
  bool alwaysFibers = false;
  bool trace = false;
};

Device &device();

// The stream a handle names (0 and CU_STREAM_LEGACY: the legacy stream),
// null for an unknown one.
CUstream_st *resolveStream(CUstream s);
// CUDA_SUCCESS when the driver is initialized and a context is current, else
// the error (the sticky one after a failed kernel).
CUresult ready();
// Queues `op` on `s`, or records it while `s` is captured.
CUresult enqueueOn(CUstream_st *s, Operation op);
// Runs everything queued on `s`.
void drain(CUstream_st &s);
// Sets the context's sticky error, with its reason on stderr once.
void failContext(const std::string &why);
// [p, p + bytes) lies in one live allocation.
bool inDevice(CUdeviceptr p, size_t bytes);

} // namespace kiln::sim::driver

#endif // KILN_TEST_SIM_SIMDRIVERSTATE_H
