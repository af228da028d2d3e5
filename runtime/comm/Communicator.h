//===- Communicator.h - Collectives between the ranks of a run ------------===//
//
// What the runtime needs from a communication library: in-place all-reduce
// of f32 buffers (the artifact's CollectiveCall steps: gradient buckets; the
// per-step stop flag), reduce-scatter and all-gather of f32 buffers (ZeRO's
// CollectiveCalls; optimizer state gathered for a checkpoint) and an
// all-gather of bytes (start-up: do the ranks run the same artifact and
// flags?). Each implementation is a real library behind a
// plugin (CommPluginApi.h), never a home-made transport:
//   MPI   (CPU artifacts, mpirun)            Open MPI, libkiln_mpi.so
//   Gloo  (CPU artifacts, torchrun, Slurm)   Gloo over TCP, libkiln_gloo.so,
//                                            meeting at MASTER_ADDR:MASTER_PORT
// CUDA artifacts run their CollectiveCalls through NCCL (runtime/cuda/
// Nccl.h); this communicator then only carries NCCL's unique id and the
// start-up checks. Buffers are host memory here (the CPU arena).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_COMM_COMMUNICATOR_H
#define KILN_RUNTIME_COMM_COMMUNICATOR_H

#include "runtime/Status.h"
#include "runtime/comm/LaunchEnv.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::rt {

enum class Reduction { kSum, kMean };

class Communicator {
public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "MPI (Open MPI v4.1.4)".
  virtual std::string name() const = 0;

  // data[i] = the sum (or mean) over ranks of data[i], in place.
  virtual Status allReduce(float *data, size_t count, Reduction reduction) = 0;
  // out[0, count) = slice rank() of the sum (or mean) over ranks of
  // in[0, count * size()) (slice r: [r * count, (r + 1) * count)).
  virtual Status reduceScatter(const float *in, float *out, size_t count,
                               Reduction reduction) = 0;
  // out[r * count, (r + 1) * count) = rank r's in[0, count).
  virtual Status allGatherInto(const float *in, float *out, size_t count) = 0;
  // Every rank's `bytes` bytes, rank 0's first.
  virtual StatusOr<std::vector<uint8_t>> allGather(const void *data,
                                                   size_t bytes) = 0;
  // Every rank of this communicator calls it together: those with the
  // same `color` form a new communicator, ranked by `key` (a mesh axis:
  // the ranks that differ only in their index along it).
  virtual StatusOr<std::unique_ptr<Communicator>> split(int color, int key) = 0;
  // Ends every rank of the run with exit status `code` (after this rank
  // printed why): the others may be blocked in a collective this rank will
  // never join.
  [[noreturn]] virtual void abortAll(int code) = 0;

  // Bytes this rank has handed to the artifact's collectives (all-reduce
  // and reduce-scatter: the input; all-gather: the output), summed over
  // calls.
  int64_t communicatedBytes() const { return communicatedBytes_; }

protected:
  int64_t communicatedBytes_ = 0;
};

// The communicators of a run's mesh: every rank's, and one per axis that
// spans some of the ranks (the others run over `world`, or, for an axis of
// one rank, communicate nothing).
struct MeshCommunicators {
  Communicator *world = nullptr;
  std::map<std::string, std::unique_ptr<Communicator>, std::less<>> axes;

  // The communicator of the collectives over `axis`.
  Communicator *forAxis(std::string_view axis) const {
    auto it = axes.find(axis);
    return it != axes.end() ? it->second.get() : world;
  }
  // Bytes this rank has handed to collectives over all of them.
  int64_t communicatedBytes() const {
    int64_t bytes = world ? world->communicatedBytes() : 0;
    for (const auto &[name, comm] : axes)
      bytes += comm->communicatedBytes();
    return bytes;
  }
};

// Joins the run `env` describes: over Gloo when the ranks have a
// rendezvous (torchrun; Slurm with MASTER_ADDR and MASTER_PORT), else over
// MPI, whose world must agree with `env` (a Slurm environment without an
// MPI launcher gives MPI a world of one: the error says how to launch
// instead). A collective that waits longer than `timeoutSeconds` for the
// other ranks ends this process with a message (a watchdog thread: MPI
// itself never times out), and the launcher, or the closed connections,
// then end the others.
StatusOr<std::unique_ptr<Communicator>>
openCommunicator(const LaunchEnv &env, int64_t timeoutSeconds);

} // namespace kiln::rt

#endif // KILN_RUNTIME_COMM_COMMUNICATOR_H
