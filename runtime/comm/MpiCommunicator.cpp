//===- MpiCommunicator.cpp - Communicator over libkiln_mpi.so -------------===//

#include "runtime/comm/Communicator.h"
#include "runtime/comm/MpiPluginApi.h"
#include "runtime/cuda/DynamicLibrary.h"

#include <cstdlib>

namespace kiln::rt {

namespace {

class MpiCommunicator final : public Communicator {
public:
  MpiCommunicator(std::unique_ptr<cuda::DynamicLibrary> library,
                  const KilnMpiPlugin *plugin, int rank, int size)
      : library_(std::move(library)), plugin_(plugin), rank_(rank),
        size_(size) {}
  ~MpiCommunicator() override { plugin_->finalize(); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override {
    return std::string("MPI (") + plugin_->library_version() + ")";
  }

  Status allReduce(float *data, size_t count, Reduction reduction) override {
    KILN_RETURN_IF_ERROR(check(plugin_->allreduce_sum_f32(
        data, count, error_, sizeof error_)));
    allReducedBytes_ += static_cast<int64_t>(count * sizeof(float));
    if (reduction == Reduction::kMean) {
      // Every rank scales the same sum by the same factor: the ranks stay
      // bit-identical.
      const float inverse = 1.0f / static_cast<float>(size_);
      for (size_t i = 0; i < count; ++i)
        data[i] *= inverse;
    }
    return okStatus();
  }
  Status broadcast(void *data, size_t bytes, int root) override {
    return check(plugin_->broadcast(data, bytes, root, error_, sizeof error_));
  }
  StatusOr<std::vector<uint8_t>> allGather(const void *data,
                                           size_t bytes) override {
    std::vector<uint8_t> all(bytes * static_cast<size_t>(size_));
    KILN_RETURN_IF_ERROR(check(
        plugin_->allgather(data, bytes, all.data(), error_, sizeof error_)));
    return all;
  }
  Status barrier() override {
    return check(plugin_->barrier(error_, sizeof error_));
  }
  [[noreturn]] void abortAll(int code) override {
    plugin_->abort(code);
    std::_Exit(code); // MPI_Abort does not return; should it, still end.
  }

private:
  Status check(int code) {
    if (code == 0)
      return okStatus();
    return Status(StatusCode::kUnavailable,
                  detail::concat("rank ", rank_, ": ", error_));
  }

  std::unique_ptr<cuda::DynamicLibrary> library_;
  const KilnMpiPlugin *plugin_;
  int rank_, size_;
  char error_[512] = {0};
};

} // namespace

StatusOr<std::unique_ptr<Communicator>> openMpiCommunicator(const LaunchEnv &env) {
  std::unique_ptr<cuda::DynamicLibrary> library;
  if (const char *path = std::getenv("KILN_MPI_PLUGIN"); path && *path) {
    KILN_ASSIGN_OR_RETURN(library,
                          cuda::DynamicLibrary::openPath("Kiln's MPI plugin", path));
  } else {
    KILN_ASSIGN_OR_RETURN(library, cuda::DynamicLibrary::open(
                                       "Kiln's MPI plugin", {"libkiln_mpi.so"}));
  }
  KilnMpiPluginEntry entry = nullptr;
  KILN_RETURN_IF_ERROR(library->resolve(KILN_MPI_PLUGIN_SYMBOL, entry));
  const KilnMpiPlugin *plugin = entry();
  if (!plugin || plugin->version != KILN_MPI_PLUGIN_VERSION)
    return failedPrecondition(library->path(), " has plugin version ",
                              plugin ? plugin->version : -1, ", kiln-run needs ",
                              KILN_MPI_PLUGIN_VERSION,
                              ": rebuild them together");
  int rank = 0, size = 0;
  char error[512] = {0};
  if (plugin->init(&rank, &size, error, sizeof error) != 0)
    return Status(StatusCode::kUnavailable, error);
  if (size != env.size || rank != env.rank) {
    plugin->finalize();
    return failedPrecondition(
        "the ", env.launcher, " environment (", env.described,
        ") says rank ", env.rank, " of ", env.size, " but MPI sees rank ",
        rank, " of ", size,
        ": CPU artifacts communicate over MPI, so launch them with "
        "`mpirun -np ", env.size, " kiln-run ...` (or srun --mpi=pmix)");
  }
  return std::unique_ptr<Communicator>(
      new MpiCommunicator(std::move(library), plugin, rank, size));
}

} // namespace kiln::rt
