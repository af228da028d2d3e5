//===- SimNccl.cpp - libnccl.so.2 of the device simulator -----------------===//
//
// Test-only. NCCL's all-reduce, reduce-scatter and all-gather between the
// ranks of a run, each rank a process with its own simulator, so that the
// CUDA backend's NCCL path (runtime/cuda/Nccl.h: the unique id passed over
// the launch's communicator, one rank per GPU, mean and sum, graph capture)
// runs on CPUs. A collective is an operation on the stream like the real
// one: it runs when the stream runs, and is captured into a graph like a
// kernel. When it runs, each rank copies its send buffer into its slot of a
// POSIX shared-memory segment named after the communicator and the call's
// sequence number, waits for every rank, reads the slots in rank order
// (sums in rank order, so every rank gets the same bits; the mean scaled
// after), and waits again before the segment goes. One rank needs no
// segment: its slot is its own send buffer.
//
//===----------------------------------------------------------------------===//

#include "test/sim/SimDevice.h"

#include <nccl.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr char kMagic[8] = {'k', 'i', 'l', 'n', '-', 's', 'i', 'm'};
constexpr auto kTimeout = std::chrono::seconds(120);

// A segment every rank maps: an arrival counter, then `bytes` per rank.
struct Segment {
  std::string name;
  uint8_t *base = nullptr;
  size_t size = 0;

  std::atomic<uint64_t> &arrived() const {
    return *reinterpret_cast<std::atomic<uint64_t> *>(base);
  }
  uint8_t *slot(int rank, size_t bytes) const { return base + 64 + size_t(rank) * bytes; }

  static Segment open(const std::string &name, size_t size) {
    Segment s;
    s.name = name;
    s.size = size;
    int fd = ::shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
    if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(size)) != 0)
      kiln::sim::fault("simulated NCCL: shm_open(" + name + ") failed: " + std::strerror(errno));
    void *p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED)
      kiln::sim::fault("simulated NCCL: mmap of " + name + " failed");
    s.base = static_cast<uint8_t *>(p);
    return s;
  }
};

// Waits until `count` arrivals are in (every rank past this point).
void waitFor(const Segment &s, uint64_t count, const char *what) {
  auto deadline = std::chrono::steady_clock::now() + kTimeout;
  while (s.arrived().load(std::memory_order_acquire) < count) {
    if (std::chrono::steady_clock::now() > deadline)
      kiln::sim::fault(std::string(what) +
                       ": the other ranks did not arrive within 120 s at " + s.name);
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

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

struct ncclComm {
  int rank = 0;
  int size = 1;
  uint64_t token = 0; // from the unique id: names the segments
  uint64_t calls = 0; // all-reduces run so far (the same on every rank)
};

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
  std::memcpy(id->internal, kMagic, sizeof kMagic);
  uint64_t token = std::random_device{}() ^ (uint64_t(::getpid()) << 32);
  std::memcpy(id->internal + sizeof kMagic, &token, sizeof token);
  return ncclSuccess;
}

__attribute__((visibility("default"))) ncclResult_t
ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
  if (!comm || nranks < 1 || rank < 0 || rank >= nranks ||
      std::memcmp(id.internal, kMagic, sizeof kMagic) != 0)
    return ncclInvalidArgument;
  auto *c = new ncclComm();
  c->rank = rank;
  c->size = nranks;
  std::memcpy(&c->token, id.internal + sizeof kMagic, sizeof c->token);
  *comm = c;
  return ncclSuccess;
}

__attribute__((visibility("default"))) ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  delete comm;
  return ncclSuccess;
}

__attribute__((visibility("default"))) ncclResult_t ncclGroupStart() { return ncclSuccess; }
__attribute__((visibility("default"))) ncclResult_t ncclGroupEnd() { return ncclSuccess; }

} // extern "C"

namespace {

// Queues on `stream` the exchange every collective is made of: each rank
// posts `sendBytes` from `send`, then `finish(slots)` reads all ranks'
// (slots[r]: rank r's bytes) and writes this rank's result.
ncclResult_t exchange(const char *what, const void *send, size_t sendBytes,
                      ncclComm_t comm, cudaStream_t stream,
                      std::function<void(const std::vector<const uint8_t *> &)> finish) {
  CUresult queued = kiln::sim::enqueue(
      reinterpret_cast<CUstream>(stream),
      [what, send, sendBytes, comm, finish = std::move(finish)] {
        const int ranks = comm->size;
        const uint64_t call = comm->calls++;
        if (ranks == 1) {
          finish({static_cast<const uint8_t *>(send)});
          return;
        }
        Segment s = Segment::open("/kiln-sim-nccl-" + std::to_string(comm->token) + "-" +
                                      std::to_string(call),
                                  64 + size_t(ranks) * sendBytes);
        std::memcpy(s.slot(comm->rank, sendBytes), send, sendBytes);
        s.arrived().fetch_add(1, std::memory_order_acq_rel);
        waitFor(s, uint64_t(ranks), what);
        std::vector<const uint8_t *> slots;
        for (int r = 0; r < ranks; ++r)
          slots.push_back(s.slot(r, sendBytes));
        finish(slots);
        // Everyone has read every slot before the segment goes.
        s.arrived().fetch_add(1, std::memory_order_acq_rel);
        waitFor(s, 2 * uint64_t(ranks), what);
        ::munmap(s.base, s.size);
        if (comm->rank == 0)
          ::shm_unlink(s.name.c_str());
      },
      what);
  return queued == CUDA_SUCCESS ? ncclSuccess : ncclUnhandledCudaError;
}

// out[i] = the sum over ranks of slots[r][first + i] (f32, rank order),
// divided by the ranks for ncclAvg.
void reduceSlots(const std::vector<const uint8_t *> &slots, size_t first, size_t count,
                 ncclRedOp_t op, void *out) {
  std::vector<float> total(count, 0.0f);
  for (const uint8_t *slot : slots) {
    const float *part = reinterpret_cast<const float *>(slot) + first;
    for (size_t i = 0; i < count; ++i)
      total[i] += part[i];
  }
  if (op == ncclAvg)
    for (float &v : total)
      v /= static_cast<float>(slots.size());
  std::memcpy(out, total.data(), count * sizeof(float));
}

// The checks every collective makes before it is queued.
ncclResult_t checkCall(const char *what, const void *send, size_t sendBytes, const void *recv,
                       size_t recvBytes, ncclDataType_t type, ncclComm_t comm) {
  if (!comm || sendBytes == 0 || recvBytes == 0)
    return ncclInvalidArgument;
  if (comm->size > 1 && type != ncclFloat32)
    return ncclInvalidUsage; // the simulator reduces and gathers f32 across ranks only
  if (!kiln::sim::isDeviceRange(send, sendBytes) || !kiln::sim::isDeviceRange(recv, recvBytes))
    kiln::sim::fault(std::string(what) + " of " + std::to_string(sendBytes) +
                     " bytes outside device memory");
  return ncclSuccess;
}

} // namespace

extern "C" {

__attribute__((visibility("default"))) ncclResult_t
ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
              ncclComm_t comm, cudaStream_t stream) {
  size_t bytes = count * typeBytes(type);
  if (op != ncclSum && op != ncclAvg)
    return ncclInvalidArgument;
  if (ncclResult_t r = checkCall("ncclAllReduce", send, bytes, recv, bytes, type, comm))
    return r;
  return exchange("ncclAllReduce", send, bytes, comm, stream,
                  [recv, bytes, count, op, comm](const std::vector<const uint8_t *> &slots) {
                    if (comm->size == 1) {
                      if (slots[0] != recv)
                        std::memmove(recv, slots[0], bytes); // any type: itself
                      return;
                    }
                    reduceSlots(slots, 0, count, op, recv);
                  });
}

__attribute__((visibility("default"))) ncclResult_t
ncclReduceScatter(const void *send, void *recv, size_t recvCount, ncclDataType_t type,
                  ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  size_t recvBytes = recvCount * typeBytes(type);
  size_t sendBytes = comm ? recvBytes * size_t(comm->size) : 0;
  if (op != ncclSum && op != ncclAvg)
    return ncclInvalidArgument;
  if (ncclResult_t r =
          checkCall("ncclReduceScatter", send, sendBytes, recv, recvBytes, type, comm))
    return r;
  return exchange("ncclReduceScatter", send, sendBytes, comm, stream,
                  [recv, recvBytes, recvCount, op, comm](
                      const std::vector<const uint8_t *> &slots) {
                    if (comm->size == 1) {
                      if (slots[0] != recv)
                        std::memmove(recv, slots[0], recvBytes);
                      return;
                    }
                    reduceSlots(slots, size_t(comm->rank) * recvCount, recvCount, op, recv);
                  });
}

__attribute__((visibility("default"))) ncclResult_t
ncclAllGather(const void *send, void *recv, size_t sendCount, ncclDataType_t type,
              ncclComm_t comm, cudaStream_t stream) {
  size_t sendBytes = sendCount * typeBytes(type);
  size_t recvBytes = comm ? sendBytes * size_t(comm->size) : 0;
  if (ncclResult_t r = checkCall("ncclAllGather", send, sendBytes, recv, recvBytes, type, comm))
    return r;
  return exchange("ncclAllGather", send, sendBytes, comm, stream,
                  [recv, sendBytes](const std::vector<const uint8_t *> &slots) {
                    for (size_t r = 0; r < slots.size(); ++r)
                      std::memmove(static_cast<uint8_t *>(recv) + r * sendBytes, slots[r],
                                   sendBytes);
                  });
}

__attribute__((visibility("default"))) const char *ncclGetErrorString(ncclResult_t result) {
  switch (result) {
  case ncclSuccess:
    return "no error";
  case ncclInvalidArgument:
    return "invalid argument (simulator)";
  case ncclInvalidUsage:
    return "invalid usage (simulator)";
  default:
    return "unhandled error (simulator)";
  }
}

} // extern "C"
