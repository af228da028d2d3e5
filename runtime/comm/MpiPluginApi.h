//===- MpiPluginApi.h - The C interface of libkiln_mpi.so -----------------===//
//
// kiln-run links no MPI library: a GPU box or a laptop without Open MPI runs
// single-process artifacts with the same binary. Multi-process CPU runs load
// libkiln_mpi.so (runtime/comm/mpi/MpiPlugin.cpp, linked against the MPI
// the project was built with) and reach MPI through this table of plain C
// functions -- no C++ type crosses the dlopen boundary. Each function
// returns 0 on success; on failure it writes a message (MPI's own error
// string included) into `error[0, error_size)` and returns nonzero.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_COMM_MPIPLUGINAPI_H
#define KILN_RUNTIME_COMM_MPIPLUGINAPI_H

#include <stddef.h>

#define KILN_MPI_PLUGIN_VERSION 1
#define KILN_MPI_PLUGIN_SYMBOL "kiln_mpi_plugin"

extern "C" {

struct KilnMpiPlugin {
  int version; // KILN_MPI_PLUGIN_VERSION
  // MPI_Init (once); this process's rank and the world's size.
  int (*init)(int *rank, int *size, char *error, size_t error_size);
  // In place: data[i] = sum over ranks of data[i], `count` floats.
  int (*allreduce_sum_f32)(float *data, size_t count, char *error,
                           size_t error_size);
  // recv[r * bytes, (r + 1) * bytes) = rank r's `send` (bytes each).
  int (*allgather)(const void *send, size_t bytes, void *recv, char *error,
                   size_t error_size);
  // MPI_Abort(MPI_COMM_WORLD, code): ends every rank of the run.
  void (*abort)(int code);
  // MPI_Finalize (when initialised).
  void (*finalize)(void);
  // MPI_Get_library_version's text, first line ("Open MPI v4.1.4, ...").
  const char *(*library_version)(void);
};

typedef const KilnMpiPlugin *(*KilnMpiPluginEntry)(void);

} // extern "C"

#endif // KILN_RUNTIME_COMM_MPIPLUGINAPI_H
