//===- Nccl.cpp - NCCL loaded at run time ---------------------------------===//

#include "runtime/cuda/Nccl.h"

#include "runtime/comm/Communicator.h"

#include <cstring>

namespace kiln::rt::cuda {

StatusOr<std::unique_ptr<Nccl>> Nccl::open(Communicator *bootstrap, int rank, int size) {
  if (size > 1 && !bootstrap)
    return failedPrecondition("NCCL over ", size, " ranks needs the launch's communicator "
                              "to pass rank 0's unique id");
  std::unique_ptr<Nccl> nccl(new Nccl());
  KILN_ASSIGN_OR_RETURN(nccl->library_,
                        DynamicLibrary::open("NCCL", {"libnccl.so.2", "libnccl.so"}));
  const DynamicLibrary &lib = *nccl->library_;
  KILN_RETURN_IF_ERROR(lib.resolve("ncclGetVersion", nccl->getVersion_));
  KILN_RETURN_IF_ERROR(lib.resolve("ncclGetUniqueId", nccl->getUniqueId_));
  KILN_RETURN_IF_ERROR(lib.resolve("ncclCommInitRank", nccl->commInitRank_));
  KILN_RETURN_IF_ERROR(lib.resolve("ncclCommDestroy", nccl->commDestroy_));
  KILN_RETURN_IF_ERROR(lib.resolve("ncclAllReduce", nccl->allReduce_));
  KILN_RETURN_IF_ERROR(lib.resolve("ncclReduceScatter", nccl->reduceScatter_));
  KILN_RETURN_IF_ERROR(lib.resolve("ncclAllGather", nccl->allGather_));
  KILN_RETURN_IF_ERROR(lib.resolve("ncclGroupStart", nccl->groupStart_));
  KILN_RETURN_IF_ERROR(lib.resolve("ncclGroupEnd", nccl->groupEnd_));
  KILN_RETURN_IF_ERROR(lib.resolve("ncclGetErrorString", nccl->getErrorString_));
  KILN_RETURN_IF_ERROR(nccl->check(nccl->getVersion_(&nccl->version_), "ncclGetVersion"));
  // ncclAvg, which the mean all-reduces use, is NCCL 2.10's.
  if (nccl->version_ < 21000)
    return failedPrecondition(lib.path(), " is NCCL ", nccl->version_,
                              "; Kiln needs 2.10 or later (ncclAvg)");
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (rank == 0)
    KILN_RETURN_IF_ERROR(nccl->check(nccl->getUniqueId_(&id), "ncclGetUniqueId"));
  if (size > 1) {
    KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> all, bootstrap->allGather(&id, sizeof id));
    std::memcpy(&id, all.data(), sizeof id); // rank 0's
  }
  KILN_RETURN_IF_ERROR(nccl->check(nccl->commInitRank_(&nccl->comm_, size, id, rank),
                                   "ncclCommInitRank",
                                   detail::concat(" (rank ", rank, " of ", size, ")")));
  nccl->rank_ = rank;
  return nccl;
}

Nccl::~Nccl() {
  if (comm_)
    commDestroy_(comm_);
}

std::string Nccl::describe() const {
  return detail::concat("NCCL ", version_ / 10000, ".", (version_ / 100) % 100, ".",
                        version_ % 100, " (", library_->path(), ")");
}

Status Nccl::allReduce(const std::vector<NcclBuffer> &buffers, bool mean, CUstream stream,
                       const std::string &where) const {
  KILN_RETURN_IF_ERROR(check(groupStart_(), "ncclGroupStart", " for " + where));
  Status queued = okStatus();
  for (const NcclBuffer &b : buffers) {
    void *data = reinterpret_cast<void *>(static_cast<uintptr_t>(b.data));
    queued = check(allReduce_(data, data, b.count, ncclFloat32, mean ? ncclAvg : ncclSum, comm_,
                              reinterpret_cast<cudaStream_t>(stream)),
                   "ncclAllReduce", " for " + where);
    if (!queued.ok())
      break;
  }
  // The group is closed on every path, or NCCL stays in it.
  Status ended = check(groupEnd_(), "ncclGroupEnd", " for " + where);
  KILN_RETURN_IF_ERROR(queued);
  return ended;
}

Status Nccl::reduceScatter(CUdeviceptr in, CUdeviceptr out, size_t count, bool mean,
                           CUstream stream, const std::string &where) const {
  return check(reduceScatter_(reinterpret_cast<const void *>(static_cast<uintptr_t>(in)),
                              reinterpret_cast<void *>(static_cast<uintptr_t>(out)), count,
                              ncclFloat32, mean ? ncclAvg : ncclSum, comm_,
                              reinterpret_cast<cudaStream_t>(stream)),
               "ncclReduceScatter", " for " + where);
}

Status Nccl::allGather(CUdeviceptr in, CUdeviceptr out, size_t count, CUstream stream,
                       const std::string &where) const {
  return check(allGather_(reinterpret_cast<const void *>(static_cast<uintptr_t>(in)),
                          reinterpret_cast<void *>(static_cast<uintptr_t>(out)), count,
                          ncclFloat32, comm_, reinterpret_cast<cudaStream_t>(stream)),
               "ncclAllGather", " for " + where);
}

Status Nccl::check(ncclResult_t result, const char *call, const std::string &context) const {
  if (result == ncclSuccess)
    return okStatus();
  return Status(StatusCode::kUnavailable,
                detail::concat(call, context, " failed: ",
                               getErrorString_ ? getErrorString_(result) : "NCCL error",
                               " (ncclResult_t ", static_cast<int>(result), ")"));
}

} // namespace kiln::rt::cuda
