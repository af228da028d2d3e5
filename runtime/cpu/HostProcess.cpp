//===- HostProcess.cpp - Running a host tool and capturing its output -----===//

#include "runtime/cpu/HostProcess.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace kiln::rt::cpu {

StatusOr<ProcessResult> runHostProcess(const std::vector<std::string> &argv) {
  if (argv.empty() || argv[0].empty())
    return invalidArgument("no program to run");
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

  pid_t pid = 0;
  int rc = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(),
                          environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    return unavailable("cannot run '", argv[0], "': ", std::strerror(rc));
  }

  ProcessResult result;
  char buffer[4096];
  while (true) {
    ssize_t n = ::read(fds[0], buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    result.output.append(buffer, static_cast<size_t>(n));
  }
  ::close(fds[0]);

  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR)
      return internalError("waitpid failed: ", std::strerror(errno));
  }
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
