//===- CommPluginApi.h - The C interface of Kiln's communication plugins --===//
//
// kiln-run links no communication library: a GPU box or a laptop without
// Open MPI or Gloo runs single-process artifacts with the same binary.
// Multi-process CPU runs load a plugin, each linked against one real
// library, and reach it through this table of plain C functions -- no C++
// type crosses the dlopen boundary:
//   libkiln_mpi.so   Open MPI (runtime/comm/mpi/MpiPlugin.cpp), for ranks
//                    started by mpirun (or srun with PMIx)
//   libkiln_gloo.so  Gloo over TCP (runtime/comm/gloo/GlooPlugin.cpp), the
//                    library PyTorch uses on CPUs, for ranks started by
//                    torchrun or Slurm, which meet at MASTER_ADDR:MASTER_PORT
// Each function returns 0 on success; on failure it writes a message (the
// library's own error text included) into `error[0, error_size)` and
// returns nonzero.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_COMM_COMMPLUGINAPI_H
#define KILN_RUNTIME_COMM_COMMPLUGINAPI_H

#include <stddef.h>

#define KILN_COMM_PLUGIN_VERSION 4
#define KILN_COMM_PLUGIN_SYMBOL "kiln_comm_plugin"

extern "C" {

// What the launcher said about this process (comm/LaunchEnv.h). MPI knows
// it from its own runtime and only checks it; Gloo needs all of it.
struct KilnCommLaunch {
  int rank;
  int size;
  const char *master_addr;    // the rendezvous host ("" for MPI)
  int master_port;            // the rendezvous port (0 for MPI)
  int timeout_seconds;        // rendezvous and collectives (--comm-timeout)
};

// Some of the run's ranks (a mesh axis: the ranks that differ only in
// their index along it), made by `split`; null stands for every rank.
typedef struct KilnCommGroup KilnCommGroup;

struct KilnCommPlugin {
  int version; // KILN_COMM_PLUGIN_VERSION
  // Joins the run (once); this process's rank and the world's size.
  int (*init)(const KilnCommLaunch *launch, int *rank, int *size, char *error,
              size_t error_size);
  // Every rank calls it together: the ranks with the same `color` form one
  // group, ordered by `key`; this rank's group, its rank in it and its size.
  int (*split)(int color, int key, KilnCommGroup **group, int *rank, int *size,
               char *error, size_t error_size);
  // Leaves a group `split` made.
  void (*free_group)(KilnCommGroup *group);
  // The collectives between the ranks of `group` (null: all of them).
  // In place: data[i] = sum over ranks of data[i], `count` floats.
  int (*allreduce_sum_f32)(KilnCommGroup *group, float *data, size_t count,
                           char *error, size_t error_size);
  // recv[0, recv_count) = slice `rank` of the sum over ranks of
  // send[0, recv_count * size) (slice r: [r * recv_count, (r + 1) *
  // recv_count)).
  int (*reduce_scatter_sum_f32)(KilnCommGroup *group, const float *send,
                                float *recv, size_t recv_count, char *error,
                                size_t error_size);
  // recv[r * bytes, (r + 1) * bytes) = rank r's `send` (bytes each).
  int (*allgather)(KilnCommGroup *group, const void *send, size_t bytes,
                   void *recv, char *error, size_t error_size);
  // Ends every rank of the run (MPI_Abort), or this one, whose closed
  // connections then end the others' collectives (Gloo).
  void (*abort)(int code);
  // Leaves the run (when joined).
  void (*finalize)(void);
  // The library and its version ("Open MPI v4.1.4", "Gloo (TCP)").
  const char *(*library_version)(void);
};
typedef const KilnCommPlugin *(*KilnCommPluginEntry)(void);

} // extern "C"

#endif // KILN_RUNTIME_COMM_COMMPLUGINAPI_H
