//===- MpiPlugin.cpp - libkiln_mpi.so: MPI behind a C function table ------===//
//
// The only file of Kiln that includes mpi.h (see CommPluginApi.h for why MPI
// sits behind dlopen). Counts above INT_MAX are sent in pieces: MPI counts
// are ints.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/CommPluginApi.h"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <dlfcn.h>

namespace {

bool initialised = false;
char versionText[MPI_MAX_LIBRARY_VERSION_STRING + 1];

// Writes "MPI_Allreduce: <MPI's error string>" into error.
int fail(const char *call, int code, char *error, size_t size) {
  char text[MPI_MAX_ERROR_STRING + 1] = {0};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    std::snprintf(text, sizeof text, "error code %d", code);
  std::snprintf(error, size, "%s failed: %s", call, text);
  return 1;
}

// MPI's own runtime places the process; the launch is checked against it
// by the caller (PluginCommunicator.cpp).
int init(const KilnCommLaunch *, int *rank, int *size, char *error, size_t errorSize) {
  if (!initialised) {
    // Open MPI loads its components with dlopen and they resolve symbols
    // of libmpi globally; kiln-run opened this plugin (and so libmpi)
    // RTLD_LOCAL. Promote libmpi to global before MPI_Init.
    for (const char *name : {"libmpi.so.40", "libmpi.so.12", "libmpi.so"})
      if (dlopen(name, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD))
        break;
    int flag = 0;
    MPI_Initialized(&flag);
    if (!flag) {
      // Overlapped all-reduces are called from the executor's
      // communication thread, one call at a time (cpu/CommThread.h).
      int provided = MPI_THREAD_SINGLE;
      int code = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
      if (code != MPI_SUCCESS)
        return fail("MPI_Init_thread", code, error, errorSize);
      if (provided < MPI_THREAD_SERIALIZED) {
        std::snprintf(error, errorSize,
                      "this MPI provides thread level %d, below MPI_THREAD_SERIALIZED "
                      "(%d), which kiln-run's communication thread needs",
                      provided, MPI_THREAD_SERIALIZED);
        return 1;
      }
    }
    // Errors come back as codes, turned into kiln-run's messages, instead
    // of MPI's default of aborting the job from inside the call.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    initialised = true;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  MPI_Comm_size(MPI_COMM_WORLD, size);
  return 0;
}

} // namespace

// A group is an MPI communicator of its own.
struct KilnCommGroup {
  MPI_Comm comm;
};

namespace {

MPI_Comm commOf(KilnCommGroup *group) {
  return group ? group->comm : MPI_COMM_WORLD;
}

int split(int color, int key, KilnCommGroup **group, int *rank, int *size,
          char *error, size_t errorSize) {
  MPI_Comm comm = MPI_COMM_NULL;
  int code = MPI_Comm_split(MPI_COMM_WORLD, color, key, &comm);
  if (code != MPI_SUCCESS)
    return fail("MPI_Comm_split", code, error, errorSize);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm, rank);
  MPI_Comm_size(comm, size);
  *group = new KilnCommGroup{comm};
  return 0;
}

void freeGroup(KilnCommGroup *group) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized)
    MPI_Comm_free(&group->comm);
  delete group;
}

int allreduceSumF32(KilnCommGroup *group, float *data, size_t count,
                    char *error, size_t size) {
  for (size_t done = 0; done < count;) {
    int piece = static_cast<int>(std::min<size_t>(count - done, INT_MAX));
    int code = MPI_Allreduce(MPI_IN_PLACE, data + done, piece, MPI_FLOAT,
                             MPI_SUM, commOf(group));
    if (code != MPI_SUCCESS)
      return fail("MPI_Allreduce", code, error, size);
    done += static_cast<size_t>(piece);
  }
  return 0;
}

int reduceScatterSumF32(KilnCommGroup *group, const float *send, float *recv,
                        size_t count, char *error, size_t size) {
  if (count > INT_MAX) {
    std::snprintf(error, size, "MPI_Reduce_scatter_block of %zu floats per "
                               "rank: more than INT_MAX", count);
    return 1;
  }
  int code = MPI_Reduce_scatter_block(send, recv, static_cast<int>(count),
                                      MPI_FLOAT, MPI_SUM, commOf(group));
  return code == MPI_SUCCESS ? 0
                             : fail("MPI_Reduce_scatter_block", code, error, size);
}

int allgather(KilnCommGroup *group, const void *send, size_t bytes, void *recv,
              char *error, size_t size) {
  if (bytes > INT_MAX) {
    std::snprintf(error, size, "MPI_Allgather of %zu bytes per rank: more "
                               "than INT_MAX", bytes);
    return 1;
  }
  int code = MPI_Allgather(send, static_cast<int>(bytes), MPI_BYTE, recv,
                           static_cast<int>(bytes), MPI_BYTE, commOf(group));
  return code == MPI_SUCCESS ? 0 : fail("MPI_Allgather", code, error, size);
}

void abortRun(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

void finalize() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (initialised && !finalized)
    MPI_Finalize();
}

// "MPI (Open MPI v4.1.4)".
const char *libraryVersion() {
  static char named[MPI_MAX_LIBRARY_VERSION_STRING + 8];
  int length = 0;
  MPI_Get_library_version(versionText, &length);
  versionText[std::min(length, MPI_MAX_LIBRARY_VERSION_STRING)] = 0;
  if (char *newline = std::strchr(versionText, '\n'))
    *newline = 0;
  if (char *comma = std::strchr(versionText, ','))
    *comma = 0;
  std::snprintf(named, sizeof named, "MPI (%s)", versionText);
  return named;
}

const KilnCommPlugin kPlugin = {
    KILN_COMM_PLUGIN_VERSION, init,      split,    freeGroup,
    allreduceSumF32,          reduceScatterSumF32, allgather,
    abortRun,                 finalize,  libraryVersion,
};

} // namespace

extern "C" __attribute__((visibility("default"))) const KilnCommPlugin *
kiln_comm_plugin() {
  return &kPlugin;
}
