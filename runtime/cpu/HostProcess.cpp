//===- HostProcess.cpp - Running a host tool and capturing its output -----===//

#include "runtime/cpu/HostProcess.h"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <mutex>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace kiln::rt::cpu {

namespace {

// The host tools running now (0: a free slot). A SIGTERM, SIGINT or SIGHUP
// that ends kiln-run while they run (a scheduler's job kill during a cold
// kernel compile) would otherwise leave a compiler per core running, orphans
// of init, for as long as the compile takes: the signal ends them too.
constexpr int kMaxChildren = 64;
std::atomic<pid_t> gChildren[kMaxChildren];

void endChildrenAndDie(int signal) {
  // Each child leads a process group of its own: the compiler driver and
  // the cc1plus and as it runs (a driver killed alone leaves them running).
  for (std::atomic<pid_t> &slot : gChildren)
    if (pid_t pid = slot.load(); pid > 0)
      ::kill(-pid, SIGTERM);
  // Then what the signal did before: terminate.
  ::signal(signal, SIG_DFL);
  ::raise(signal);
}

// Once, for each of the signals whose action is still the default: a
// handler installed by the run (StopSignals' checkpoint-and-stop) or an
// ignored SIGHUP (nohup) is left as it is.
void endChildrenOnSignals() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int signal : {SIGTERM, SIGINT, SIGHUP}) {
      struct sigaction current = {};
      if (::sigaction(signal, nullptr, &current) != 0 || current.sa_handler != SIG_DFL)
        continue;
      struct sigaction action = {};
      action.sa_handler = endChildrenAndDie;
      sigemptyset(&action.sa_mask);
      ::sigaction(signal, &action, nullptr);
    }
  });
}

// A running child in a slot of gChildren from construction until it is
// reaped (the destructor frees the slot, on every return).
class TrackedChild {
public:
  explicit TrackedChild(pid_t pid) {
    for (int i = 0; i < kMaxChildren && slot_ < 0; ++i) {
      pid_t free = 0;
      if (gChildren[i].compare_exchange_strong(free, pid))
        slot_ = i;
    }
    // More at once than slots: this one is not ended by a signal.
  }
  ~TrackedChild() {
    if (slot_ >= 0)
      gChildren[slot_].store(0);
  }
  TrackedChild(const TrackedChild &) = delete;
  TrackedChild &operator=(const TrackedChild &) = delete;

private:
  int slot_ = -1;
};

// Reads the child's output from `fd` (closing it) until it ends, then reaps
// it: its wait status in `status`. It is tracked until reaped.
Status collectChild(pid_t pid, int fd, std::string &output, int &status) {
  TrackedChild tracked(pid);
  char buffer[4096];
  while (true) {
    ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    output.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      return internalError("waitpid failed: ", std::strerror(errno));
  return okStatus();
}

} // namespace

StatusOr<ProcessResult> runHostProcess(const std::vector<std::string> &argv) {
  if (argv.empty() || argv[0].empty())
    return invalidArgument("no program to run");
  endChildrenOnSignals();
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    return internalError("pipe failed: ", std::strerror(errno));

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // The child's stdout and stderr both go into the pipe; dup2 clears
  // O_CLOEXEC on the duplicates.
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);

  std::vector<char *> args;
  for (const std::string &arg : argv)
    args.push_back(const_cast<char *>(arg.c_str()));
  args.push_back(nullptr);

  // Its own process group (see endChildrenAndDie).
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);

  pid_t pid = 0;
  int rc = ::posix_spawnp(&pid, args[0], &actions, &attributes, args.data(),
                          environ);
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    return unavailable("cannot run '", argv[0], "': ", std::strerror(rc));
  }

  ProcessResult result;
  int status = 0;
  KILN_RETURN_IF_ERROR(collectChild(pid, fds[0], result.output, status));
  if (WIFEXITED(status))
    result.exitCode = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    result.exitCode = 128 + WTERMSIG(status);
  // posix_spawnp reports a missing program as exit 127 from the child.
  if (result.exitCode == 127 && result.output.empty())
    return unavailable("cannot run '", argv[0], "' (not found in $PATH)");
  return result;
}

std::string lastLines(const std::string &text, size_t maxLines) {
  size_t end = text.size();
  while (end > 0 && text[end - 1] == '\n')
    --end;
  size_t pos = end;
  size_t lines = 0;
  while (pos > 0) {
    if (text[pos - 1] == '\n' && ++lines == maxLines)
      break;
    --pos;
  }
  std::string tail = text.substr(pos, end - pos);
  return pos > 0 ? "...\n" + tail : tail;
}

} // namespace kiln::rt::cpu
