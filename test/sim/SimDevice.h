//===- SimDevice.h - The device simulator's interface between its libraries ===//
//
// Test-only. The simulator is three shared libraries that stand in for the
// real ones at kiln-run's dlopen boundary ($KILN_CUDA_LIB_DIR):
//   libcuda.so.1      SimDriver.cpp   device memory, streams, graphs, launches
//   libnvrtc.so.13    SimNvrtc.cpp    CUDA source -> host shared library
//   libcublasLt.so.13 SimCublasLt.cpp cuBLASLt's documented matmul semantics
//   libnccl.so.2      SimNccl.cpp     NCCL's all-reduce between rank processes
//                                     (POSIX shared memory); $KILN_SIM_DEVICES
//                                     GPUs per node (default 1)
// libcublasLt links against libcuda (same directory, $ORIGIN rpath), so both
// share one device: a matmul is one more operation on a stream, run when the
// stream runs, and captured into a graph like a kernel.
//
// Streams run lazily: an operation is queued and runs only when its stream
// is synchronized (or a graph replays it), so host code that reads device
// memory without synchronizing sees stale bytes, as it may on a GPU.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_SIM_SIMDEVICE_H
#define KILN_TEST_SIM_SIMDEVICE_H

#include <cuda.h>

#include <cstddef>
#include <functional>
#include <string>

namespace kiln::sim {

// Queues `op` on `stream` (0 and CU_STREAM_LEGACY: the legacy default
// stream). While the stream is being captured the op is recorded into the
// capture instead. `what` names the op in the simulator's error messages.
// Returns CUDA_ERROR_INVALID_HANDLE for an unknown stream.
__attribute__((visibility("default"))) CUresult
enqueue(CUstream stream, std::function<void()> op, std::string what);

// Whether [pointer, pointer + bytes) lies inside one live device allocation.
// Host memory passed where device memory is expected (a missing upload
// path) fails this check.
__attribute__((visibility("default"))) bool isDeviceRange(const void *pointer,
                                                          size_t bytes);

// Reports a simulator error on stderr ("kiln device simulator: ...") and
// aborts: used where the real device would fault (an illegal address) and
// no CUresult can carry the error back.
[[noreturn]] __attribute__((visibility("default"))) void
fault(const std::string &message);

} // namespace kiln::sim

#endif // KILN_TEST_SIM_SIMDEVICE_H
