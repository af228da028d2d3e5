//===- Nccl.h - NCCL loaded at run time: the ranks' all-reduces on the GPU -===//
//
// A CUDA artifact compiled for `mesh = [data = N]` averages its gradients
// with NCCL, opened at run time like libcuda, NVRTC and cuBLASLt (so one
// kiln-run binary still runs without it). One communicator over the run's
// ranks, each rank on its own GPU; rank 0's unique id reaches the others
// through the CPU communicator the launch already opened (MPI or Gloo,
// comm/Communicator.h), the way PyTorch passes it through its store. The
// all-reduces of a CollectiveCall run in one NCCL group on the backend's
// stream, in the order of the schedule, so they are captured in the CUDA
// graph with the kernels around them. One rank (mesh = [data = 1]) needs no
// CPU communicator: its collectives degenerate but still run through NCCL.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CUDA_NCCL_H
#define KILN_RUNTIME_CUDA_NCCL_H

#include "runtime/Status.h"
#include "runtime/cuda/DynamicLibrary.h"

#include <cuda.h>
#include <nccl.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace kiln::rt {
class Communicator;
}

namespace kiln::rt::cuda {

// One buffer of a CollectiveCall: `count` floats at `data`, reduced in place
// (a local shard's copy, of any element type: `count` bytes).
struct NcclBuffer {
  CUdeviceptr data = 0;
  size_t count = 0;
};

class Nccl {
public:
  // Opens libnccl and the communicator of `size` ranks, this one `rank`;
  // `bootstrap` (required when size > 1) carries rank 0's unique id.
  static StatusOr<std::unique_ptr<Nccl>> open(Communicator *bootstrap, int rank, int size);
  ~Nccl();

  // "NCCL 2.28.3" and where it was loaded from.
  std::string describe() const;
  // In place: each buffer = its sum (or mean) over the ranks, queued on
  // `stream` as one group.
  Status allReduce(const std::vector<NcclBuffer> &buffers, bool mean, CUstream stream,
                   const std::string &where) const;
  // out[0, count) = slice rank() of the sum (or mean) over ranks of
  // in[0, count * size), queued on `stream`.
  Status reduceScatter(CUdeviceptr in, CUdeviceptr out, size_t count, bool mean,
                       CUstream stream, const std::string &where) const;
  // out[r * count, (r + 1) * count) = rank r's in[0, count).
  Status allGather(CUdeviceptr in, CUdeviceptr out, size_t count, CUstream stream,
                   const std::string &where) const;
  int rank() const { return rank_; }

private:
  Nccl() = default;
  Status check(ncclResult_t result, const char *call, const std::string &context = "") const;

  std::unique_ptr<DynamicLibrary> library_;
  int version_ = 0;
  int rank_ = 0;
  ncclComm_t comm_ = nullptr;
  ncclResult_t (*getVersion_)(int *) = nullptr;
  ncclResult_t (*getUniqueId_)(ncclUniqueId *) = nullptr;
  ncclResult_t (*commInitRank_)(ncclComm_t *, int, ncclUniqueId, int) = nullptr;
  ncclResult_t (*commDestroy_)(ncclComm_t) = nullptr;
  ncclResult_t (*allReduce_)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
                             ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*reduceScatter_)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
                                 ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*allGather_)(const void *, void *, size_t, ncclDataType_t, ncclComm_t,
                             cudaStream_t) = nullptr;
  ncclResult_t (*groupStart_)() = nullptr;
  ncclResult_t (*groupEnd_)() = nullptr;
  const char *(*getErrorString_)(ncclResult_t) = nullptr;
};

} // namespace kiln::rt::cuda

#endif // KILN_RUNTIME_CUDA_NCCL_H
