//===- SimNccl.cpp - libnccl.so.2 of the device simulator: one rank -------===//
//
// Test-only. The simulator is one device, so its NCCL is a communicator of
// one rank: an all-reduce over one rank is the identity (sum or average of
// one buffer), done as an operation on the stream like the real one, so it
// runs when the stream runs and is captured into a graph like a kernel.
// That is what lets the CUDA backend's NCCL path (runtime/cuda/Nccl.h) run
// under the simulator; more ranks need GPUs.
//
//===----------------------------------------------------------------------===//

#include "test/sim/SimDevice.h"

#include <nccl.h>

#include <cstring>
#include <string>

struct ncclComm {
  int rank = 0;
  int size = 1;
};

namespace {

size_t typeBytes(ncclDataType_t type) {
  switch (type) {
  case ncclInt8:
  case ncclUint8:
    return 1;
  case ncclFloat16:
  case ncclBfloat16:
    return 2;
  case ncclInt32:
  case ncclUint32:
  case ncclFloat32:
    return 4;
  case ncclInt64:
  case ncclUint64:
  case ncclFloat64:
    return 8;
  default:
    return 0;
  }
}

} // namespace

extern "C" {

__attribute__((visibility("default"))) ncclResult_t ncclGetVersion(int *version) {
  if (!version)
    return ncclInvalidArgument;
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

__attribute__((visibility("default"))) ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  if (!id)
    return ncclInvalidArgument;
  std::memset(id, 0, sizeof *id);
  std::memcpy(id->internal, "kiln-sim", 8);
  return ncclSuccess;
}

__attribute__((visibility("default"))) ncclResult_t
ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
  if (!comm || std::memcmp(id.internal, "kiln-sim", 8) != 0)
    return ncclInvalidArgument;
  if (nranks != 1 || rank != 0)
    return ncclInvalidUsage; // one simulated device, one rank
  *comm = new ncclComm();
  return ncclSuccess;
}

__attribute__((visibility("default"))) ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  delete comm;
  return ncclSuccess;
}

__attribute__((visibility("default"))) ncclResult_t ncclGroupStart() { return ncclSuccess; }
__attribute__((visibility("default"))) ncclResult_t ncclGroupEnd() { return ncclSuccess; }

__attribute__((visibility("default"))) ncclResult_t
ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
              ncclComm_t comm, cudaStream_t stream) {
  size_t bytes = count * typeBytes(type);
  if (!comm || bytes == 0 || (op != ncclSum && op != ncclAvg && op != ncclMax &&
                              op != ncclMin && op != ncclProd))
    return ncclInvalidArgument;
  if (!kiln::sim::isDeviceRange(send, bytes) || !kiln::sim::isDeviceRange(recv, bytes))
    kiln::sim::fault("ncclAllReduce of " + std::to_string(bytes) +
                     " bytes outside device memory");
  // One rank: every reduction of one value is the value.
  CUresult queued = kiln::sim::enqueue(
      reinterpret_cast<CUstream>(stream),
      [send, recv, bytes] {
        if (send != recv)
          std::memmove(recv, send, bytes);
      },
      "ncclAllReduce");
  return queued == CUDA_SUCCESS ? ncclSuccess : ncclUnhandledCudaError;
}

__attribute__((visibility("default"))) const char *ncclGetErrorString(ncclResult_t result) {
  switch (result) {
  case ncclSuccess:
    return "no error";
  case ncclInvalidArgument:
    return "invalid argument (simulator)";
  case ncclInvalidUsage:
    return "invalid usage (the simulator's NCCL has one rank)";
  default:
    return "unhandled error (simulator)";
  }
}

} // extern "C"
