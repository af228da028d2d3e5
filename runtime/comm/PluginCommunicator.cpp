//===- PluginCommunicator.cpp - Communicator over a plugin (MPI, Gloo) ----===//

#include "runtime/comm/Communicator.h"
#include "runtime/comm/CommPluginApi.h"
#include "runtime/cuda/DynamicLibrary.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace kiln::rt {

namespace {

using Clock = std::chrono::steady_clock;

// Ends the process when a collective has been waiting longer than the
// timeout: a hung rank would otherwise block every other rank forever.
class CollectiveWatchdog {
public:
  CollectiveWatchdog(int rank, int size, int64_t timeoutSeconds)
      : rank_(rank), size_(size), timeout_(std::chrono::seconds(timeoutSeconds)),
        thread_([this] { watch(); }) {}
  ~CollectiveWatchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  // Watches one collective while it lives (`what` must outlive it).
  class Waiting {
  public:
    Waiting(CollectiveWatchdog &dog, const char *what) : dog_(dog) {
      dog_.what_.store(what);
      dog_.since_.store(Clock::now().time_since_epoch().count());
    }
    ~Waiting() { dog_.since_.store(0); }

  private:
    CollectiveWatchdog &dog_;
  };

private:
  void watch() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!wake_.wait_for(lock, std::chrono::milliseconds(200),
                           [this] { return done_; })) {
      int64_t since = since_.load();
      if (since == 0)
        continue;
      auto waited = Clock::now() - Clock::time_point(Clock::duration(since));
      if (waited < timeout_)
        continue;
      std::fprintf(stderr,
                   "kiln-run: error: rank %d of %d: %s has waited %lld s for "
                   "the other ranks (--comm-timeout): one of them hangs or "
                   "died; ending the run\n",
                   rank_, size_, what_.load(),
                   static_cast<long long>(
                       std::chrono::duration_cast<std::chrono::seconds>(waited)
                           .count()));
      std::fflush(stderr);
      std::_Exit(1); // mpirun ends the other ranks; Gloo's see the connection close
    }
  }

  int rank_, size_;
  Clock::duration timeout_;
  std::atomic<int64_t> since_{0}; // steady-clock ticks; 0: no collective
  std::atomic<const char *> what_{""};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;
  std::thread thread_;
};

class PluginCommunicator final : public Communicator {
public:
  // `group` null: every rank of the run (this communicator finalizes the
  // library when it goes); else a group `split` made (freed when it goes).
  PluginCommunicator(std::shared_ptr<cuda::DynamicLibrary> library,
                     const KilnCommPlugin *plugin, KilnCommGroup *group, int rank,
                     int size, int64_t timeoutSeconds)
      : library_(std::move(library)), plugin_(plugin), group_(group), rank_(rank),
        size_(size), timeoutSeconds_(timeoutSeconds),
        watchdog_(rank, size, timeoutSeconds) {}
  ~PluginCommunicator() override {
    if (group_)
      plugin_->free_group(group_);
    else
      plugin_->finalize();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return plugin_->library_version(); }

  Status allReduce(float *data, size_t count, Reduction reduction) override {
    {
      CollectiveWatchdog::Waiting waiting(watchdog_, "an all-reduce");
      KILN_RETURN_IF_ERROR(check(
          plugin_->allreduce_sum_f32(group_, data, count, error_, sizeof error_)));
    }
    communicatedBytes_ += static_cast<int64_t>(count * sizeof(float));
    if (reduction == Reduction::kMean) {
      // Every rank scales the same sum by the same factor: the ranks stay
      // bit-identical.
      const float inverse = 1.0f / static_cast<float>(size_);
      for (size_t i = 0; i < count; ++i)
        data[i] *= inverse;
    }
    return okStatus();
  }
  Status reduceScatter(const float *in, float *out, size_t count,
                       Reduction reduction) override {
    {
      CollectiveWatchdog::Waiting waiting(watchdog_, "a reduce-scatter");
      KILN_RETURN_IF_ERROR(check(plugin_->reduce_scatter_sum_f32(
          group_, in, out, count, error_, sizeof error_)));
    }
    communicatedBytes_ +=
        static_cast<int64_t>(count * static_cast<size_t>(size_) * sizeof(float));
    if (reduction == Reduction::kMean) {
      const float inverse = 1.0f / static_cast<float>(size_);
      for (size_t i = 0; i < count; ++i)
        out[i] *= inverse;
    }
    return okStatus();
  }
  Status allGatherInto(const float *in, float *out, size_t count) override {
    {
      CollectiveWatchdog::Waiting waiting(watchdog_, "an all-gather");
      KILN_RETURN_IF_ERROR(check(plugin_->allgather(
          group_, in, count * sizeof(float), out, error_, sizeof error_)));
    }
    communicatedBytes_ +=
        static_cast<int64_t>(count * static_cast<size_t>(size_) * sizeof(float));
    return okStatus();
  }
  StatusOr<std::vector<uint8_t>> allGather(const void *data,
                                           size_t bytes) override {
    std::vector<uint8_t> all(bytes * static_cast<size_t>(size_));
    CollectiveWatchdog::Waiting waiting(watchdog_, "an all-gather");
    KILN_RETURN_IF_ERROR(check(
        plugin_->allgather(group_, data, bytes, all.data(), error_, sizeof error_)));
    return all;
  }
  StatusOr<std::unique_ptr<Communicator>> split(int color, int key) override {
    KilnCommGroup *group = nullptr;
    int rank = 0, size = 0;
    {
      CollectiveWatchdog::Waiting waiting(watchdog_, "a split into mesh axes");
      KILN_RETURN_IF_ERROR(check(plugin_->split(color, key, &group, &rank, &size,
                                                error_, sizeof error_)));
    }
    return std::unique_ptr<Communicator>(new PluginCommunicator(
        library_, plugin_, group, rank, size, timeoutSeconds_));
  }
  [[noreturn]] void abortAll(int code) override {
    plugin_->abort(code);
    std::_Exit(code); // the plugin's abort may return (Gloo): still end.
  }

private:
  // runTraining prefixes "rank r of N: " to the errors of a distributed run.
  Status check(int code) {
    return code == 0 ? okStatus() : Status(StatusCode::kUnavailable, error_);
  }

  std::shared_ptr<cuda::DynamicLibrary> library_;
  const KilnCommPlugin *plugin_;
  KilnCommGroup *group_;
  int rank_, size_;
  int64_t timeoutSeconds_;
  char error_[512] = {0};
  CollectiveWatchdog watchdog_;
};

// Opens `soname` (or the file $`override` names) and checks its version.
StatusOr<std::pair<std::unique_ptr<cuda::DynamicLibrary>, const KilnCommPlugin *>>
loadPlugin(const char *what, const char *soname, const char *override) {
  std::unique_ptr<cuda::DynamicLibrary> library;
  if (const char *path = std::getenv(override); path && *path) {
    KILN_ASSIGN_OR_RETURN(library, cuda::DynamicLibrary::openPath(what, path));
  } else {
    KILN_ASSIGN_OR_RETURN(library, cuda::DynamicLibrary::open(what, {soname}));
  }
  KilnCommPluginEntry entry = nullptr;
  KILN_RETURN_IF_ERROR(library->resolve(KILN_COMM_PLUGIN_SYMBOL, entry));
  const KilnCommPlugin *plugin = entry();
  if (!plugin || plugin->version != KILN_COMM_PLUGIN_VERSION)
    return failedPrecondition(library->path(), " has plugin version ",
                              plugin ? plugin->version : -1, ", kiln-run needs ",
                              KILN_COMM_PLUGIN_VERSION, ": rebuild them together");
  return std::make_pair(std::move(library), plugin);
}

} // namespace

StatusOr<std::unique_ptr<Communicator>>
openCommunicator(const LaunchEnv &env, int64_t timeoutSeconds) {
  const bool gloo = env.rendezvous();
  if (!gloo && env.launcher == std::string("torchrun"))
    return failedPrecondition("the torchrun environment (", env.described,
                              ") has no MASTER_ADDR and MASTER_PORT: the ranks meet there");
  auto loaded = gloo ? loadPlugin("Kiln's Gloo plugin", "libkiln_gloo.so", "KILN_GLOO_PLUGIN")
                     : loadPlugin("Kiln's MPI plugin", "libkiln_mpi.so", "KILN_MPI_PLUGIN");
  if (!loaded.ok())
    return loaded.status();
  auto [library, plugin] = std::move(*loaded);
  KilnCommLaunch launch{env.rank, env.size, env.masterAddr.c_str(), env.masterPort,
                        static_cast<int>(std::min<int64_t>(timeoutSeconds, 1 << 30))};
  int rank = 0, size = 0;
  char error[512] = {0};
  if (plugin->init(&launch, &rank, &size, error, sizeof error) != 0)
    return Status(StatusCode::kUnavailable, error);
  if (size != env.size || rank != env.rank) {
    plugin->finalize();
    return failedPrecondition(
        "the ", env.launcher, " environment (", env.described,
        ") says rank ", env.rank, " of ", env.size, " but MPI sees rank ",
        rank, " of ", size,
        ": launch with `mpirun -np ", env.size, " kiln-run ...` (or srun --mpi=pmix), "
        "or set MASTER_ADDR and MASTER_PORT for the ranks to meet there over Gloo");
  }
  return std::unique_ptr<Communicator>(
      new PluginCommunicator(std::move(library), plugin, nullptr, rank, size,
                             timeoutSeconds));
}

} // namespace kiln::rt
