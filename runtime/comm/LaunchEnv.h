//===- LaunchEnv.h - Which rank of how many this process is ---------------===//
//
// A process learns its place in a multi-process run from its launcher's
// environment, read in this order (the first launcher whose variables are
// set wins; mpirun under a Slurm allocation sets both, and mpirun's are the
// ones that describe this process):
//   mpirun (Open MPI)   OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_RANK,
//                       OMPI_COMM_WORLD_LOCAL_RANK
//   MPICH / Hydra       PMI_SIZE, PMI_RANK
//   Slurm (srun)        SLURM_NTASKS, SLURM_PROCID, SLURM_LOCALID
//   torchrun            WORLD_SIZE, RANK, LOCAL_RANK, MASTER_ADDR, MASTER_PORT
// torchrun's ranks, and Slurm's when the job sets MASTER_ADDR and
// MASTER_PORT, meet there over Gloo; mpirun's (and Slurm's without them,
// through PMIx) over MPI (comm/Communicator.h).
// None set: one process, rank 0. Malformed values (not a number, a rank
// outside [0, size)) are errors naming the variable, never a silent rank 0:
// two processes that both believed they were the only one would train two
// copies and write the same checkpoint directory.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_COMM_LAUNCHENV_H
#define KILN_RUNTIME_COMM_LAUNCHENV_H

#include "runtime/Status.h"

#include <functional>
#include <string>

namespace kiln::rt {

struct LaunchEnv {
  std::string launcher = "none"; // "mpirun", "mpich", "slurm", "torchrun", "none"
  int rank = 0;
  int size = 1;
  int localRank = 0;
  std::string masterAddr; // torchrun, Slurm: the rendezvous host and port
  int masterPort = 0;     // (MASTER_PORT + 1 under torchrun's agent store)

  // Whether the ranks meet at masterAddr:masterPort (Gloo) rather than
  // through MPI's runtime.
  bool rendezvous() const { return !masterAddr.empty() && masterPort > 0; }
  // The variables it was read from, for messages ("WORLD_SIZE=2, RANK=1").
  std::string described;

  bool distributed() const { return size > 1; }
};

// Reads the launch environment through `getenv` (std::getenv by default;
// tests pass their own).
StatusOr<LaunchEnv> readLaunchEnv(
    const std::function<const char *(const char *)> &getenv = nullptr);

} // namespace kiln::rt

#endif // KILN_RUNTIME_COMM_LAUNCHENV_H
