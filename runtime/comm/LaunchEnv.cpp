//===- LaunchEnv.cpp - Which rank of how many this process is -------------===//

#include "runtime/comm/LaunchEnv.h"

#include <cerrno>
#include <cstdlib>
#include <string>

namespace kiln::rt {

namespace {

// One launcher's variable names; `localRank` and the torchrun rendezvous
// may be absent.
struct LauncherVars {
  const char *launcher;
  const char *size, *rank, *localRank;
};

const LauncherVars kLaunchers[] = {
    {"mpirun", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
     "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"mpich", "PMI_SIZE", "PMI_RANK", nullptr},
    {"slurm", "SLURM_NTASKS", "SLURM_PROCID", "SLURM_LOCALID"},
    {"torchrun", "WORLD_SIZE", "RANK", "LOCAL_RANK"},
};

// A non-negative decimal integer below 2^31, or an error naming `name`.
StatusOr<int> parseCount(const char *name, const char *text) {
  errno = 0;
  char *end = nullptr;
  long value = std::strtol(text, &end, 10);
  if (!*text || *end || errno != 0 || value < 0 || value > 0x7fffffff)
    return invalidArgument("the launcher's ", name, "=", text,
                           " is not a non-negative integer");
  return static_cast<int>(value);
}

} // namespace

StatusOr<LaunchEnv> readLaunchEnv(
    const std::function<const char *(const char *)> &getenvFn) {
  auto get = [&](const char *name) -> const char * {
    if (!name)
      return nullptr;
    const char *value = getenvFn ? getenvFn(name) : std::getenv(name);
    return value && *value ? value : nullptr;
  };
  LaunchEnv env;
  for (const LauncherVars &l : kLaunchers) {
    const char *size = get(l.size), *rank = get(l.rank);
    if (!size && !rank)
      continue;
    if (!size || !rank)
      return invalidArgument(size ? l.size : l.rank, " is set but ",
                             size ? l.rank : l.size, " is not: the ",
                             l.launcher, " environment is incomplete");
    env.launcher = l.launcher;
    KILN_ASSIGN_OR_RETURN(env.size, parseCount(l.size, size));
    KILN_ASSIGN_OR_RETURN(env.rank, parseCount(l.rank, rank));
    env.described =
        detail::concat(l.size, "=", size, ", ", l.rank, "=", rank);
    if (env.size == 0 || env.rank >= env.size)
      return invalidArgument("the ", l.launcher, " environment (",
                             env.described, ") names rank ", env.rank,
                             " of ", env.size, " processes");
    if (const char *local = get(l.localRank)) {
      KILN_ASSIGN_OR_RETURN(env.localRank, parseCount(l.localRank, local));
    }
    // The rendezvous: torchrun always sets it; a Slurm job script sets it
    // to meet without MPI (as PyTorch's Slurm recipes do).
    if (env.launcher == std::string("torchrun") || env.launcher == std::string("slurm")) {
      if (const char *addr = get("MASTER_ADDR"))
        env.masterAddr = addr;
      if (const char *port = get("MASTER_PORT")) {
        KILN_ASSIGN_OR_RETURN(env.masterPort, parseCount("MASTER_PORT", port));
        if (env.masterPort == 0 || env.masterPort > 65535)
          return invalidArgument("the launcher's MASTER_PORT=", port, " is not a TCP port");
        // torchrun's agent serves its own store on MASTER_PORT to the
        // workers it starts (TORCHELASTIC_USE_AGENT_STORE): Kiln's
        // rendezvous takes the next port.
        const char *agentStore = get("TORCHELASTIC_USE_AGENT_STORE");
        if (agentStore && (std::string(agentStore) == "True" || std::string(agentStore) == "1"))
          env.masterPort += env.masterPort < 65535 ? 1 : 0;
      }
    }
    return env;
  }
  return env;
}

} // namespace kiln::rt
