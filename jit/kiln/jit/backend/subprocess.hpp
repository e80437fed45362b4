#pragma once
// Running a helper program (glslc, spirv-val) the fast, safe way: posix_spawn (no shell, no
// fork of a big process), pipes for its stdout and stderr, a deadline after which it is
// killed, and temp files that are removed whatever happens.
//
// Threads: every descriptor made here is close-on-exec, so a program started by one thread
// never inherits another thread's pipe or temp file (an inherited write end would keep the
// other reader waiting for EOF until that unrelated child exits).
#include "kiln/error.hpp"
#include "kiln/settings.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern "C" char** environ; // POSIX: the environment handed on to programs we start

namespace kiln::jit {

// Where a program is, or why it is not there.
struct program_location {
  std::string path;    // absolute or as given; empty when not found
  std::string why_not; // set when path is empty
};

namespace detail {

inline bool is_executable_file(const std::string& path, std::string& why_not) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    why_not = path + ": " + std::strerror(errno);
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    why_not = path + ": not a regular file";
    return false;
  }
  if (::access(path.c_str(), X_OK) != 0) {
    why_not = path + ": not executable (" + std::strerror(errno) + ")";
    return false;
  }
  return true;
}

inline program_location search_path(std::string_view name) {
  const std::string path_list = settings::text("PATH").value_or("/usr/local/bin:/usr/bin:/bin");
  std::size_t begin = 0;
  while (begin <= path_list.size()) {
    std::size_t end = path_list.find(':', begin);
    if (end == std::string::npos) end = path_list.size();
    const std::string dir = path_list.substr(begin, end - begin);
    begin = end + 1;
    if (dir.empty()) continue; // an empty entry means ".": never run programs from the cwd
    std::string candidate = dir + "/" + std::string(name), ignored;
    if (is_executable_file(candidate, ignored)) return {std::move(candidate), {}};
  }
  return {{}, std::string(name) + " not found on PATH (" + path_list + ")"};
}

// A file descriptor closed when it goes out of scope.
class unique_fd {
public:
  explicit unique_fd(int fd = -1) noexcept : fd_(fd) {}
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  ~unique_fd() { reset(); }
  int get() const noexcept { return fd_; }
  void reset() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

private:
  int fd_;
};

} // namespace detail

// The program `value` names: a path when it has a '/', else a name looked up on PATH.
inline program_location locate_program(const std::string& value) {
  if (value.find('/') == std::string::npos) return detail::search_path(value);
  program_location found;
  if (detail::is_executable_file(value, found.why_not)) found.path = value;
  return found;
}

// The program `env_var` names when that variable is set (only it: an explicit choice that
// does not work is a kiln::error naming the variable, not replaced), else `name` found on
// PATH (or not: then why_not says so).
inline program_location find_program(std::string_view name,
                                     settings::key_of<settings::kind::program> env_var) {
  if (const auto v = settings::text(env_var)) {
    program_location found = locate_program(*v);
    if (found.path.empty())
      throw kiln::error(env_var.name(), "names no usable program",
                        std::string(env_var.name()) + "=" + *v + ": " + found.why_not);
    return found;
  }
  return detail::search_path(name);
}

// A temp file <TMPDIR or /tmp>/kiln-XXXXXX<suffix>, created exclusively and removed by the
// destructor (also when an exception unwinds).
class temp_file {
public:
  temp_file(std::string_view suffix, const char* op) {
    path_ = settings::text("TMPDIR").value_or("/tmp") + "/kiln-XXXXXX" + std::string(suffix);
    fd_ = ::mkostemps(path_.data(), static_cast<int>(suffix.size()), O_CLOEXEC);
    if (fd_ < 0)
      throw kiln::error(op, "cannot create a temporary file", path_ + ": " + std::strerror(errno));
  }
  temp_file(const temp_file&) = delete;
  temp_file& operator=(const temp_file&) = delete;
  ~temp_file() {
    if (fd_ >= 0) ::close(fd_);
    ::unlink(path_.c_str());
  }

  const std::string& path() const noexcept { return path_; }

  // Writes everything and closes the file, so a reader sees all of it; throws on a short
  // write (a full disk) rather than handing a truncated file to a program.
  void write_and_close(std::span<const std::byte> data, const char* op) {
    const char* p = reinterpret_cast<const char*>(data.data());
    std::size_t left = data.size();
    while (left > 0) {
      const ssize_t n = ::write(fd_, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw kiln::error(op, "cannot write a temporary file", failure());
      p += n;
      left -= static_cast<std::size_t>(n);
    }
    const int fd = std::exchange(fd_, -1);
    if (::close(fd) != 0) throw kiln::error(op, "cannot write a temporary file", failure());
  }

private:
  std::string failure() const { return path_ + ": " + std::strerror(errno); }
  std::string path_;
  int fd_ = -1;
};

// How a program ended and what it printed.
struct program_result {
  int exit_code = -1; // valid when it exited by itself
  int signal = 0;     // the signal that ended it, 0 when none
  bool timed_out = false;
  std::string out, err;

  bool succeeded() const noexcept { return !timed_out && signal == 0 && exit_code == 0; }
  std::string ending() const {
    if (timed_out) return "timed out and was killed";
    if (signal != 0) return "killed by signal " + std::to_string(signal);
    return "exit code " + std::to_string(exit_code);
  }
};

// Runs `path` with `args` (argv[0] is the path), stdin from /dev/null, stdout and stderr
// captured. After `timeout` the program is killed and timed_out is set. Throws
// kiln::error(op, ...) when the program cannot be started at all.
inline program_result run_program(const std::string& path, const std::vector<std::string>& args,
                                  std::chrono::milliseconds timeout, const char* op) {
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0)
    throw kiln::error(op, "cannot create a pipe", std::strerror(errno));
  detail::unique_fd out_read(out_pipe[0]), out_write(out_pipe[1]);
  if (::pipe2(err_pipe, O_CLOEXEC) != 0)
    throw kiln::error(op, "cannot create a pipe", std::strerror(errno));
  detail::unique_fd err_read(err_pipe[0]), err_write(err_pipe[1]);

  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(path.c_str()));
  for (const std::string& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawnattr_init(&attr);
  ::posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  ::posix_spawn_file_actions_adddup2(&actions, out_write.get(), 1); // dup2 clears CLOEXEC
  ::posix_spawn_file_actions_adddup2(&actions, err_write.get(), 2);
  // The child starts with no blocked signals and SIGPIPE at its default, whatever the
  // calling thread has set up.
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  ::posix_spawnattr_setsigmask(&attr, &none);
  ::posix_spawnattr_setsigdefault(&attr, &defaults);
  ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  const int spawn_error = ::posix_spawn(&pid, path.c_str(), &actions, &attr, argv.data(), environ);
  ::posix_spawn_file_actions_destroy(&actions);
  ::posix_spawnattr_destroy(&attr);
  if (spawn_error != 0)
    throw kiln::error(op, "cannot start a program", path + ": " + std::strerror(spawn_error));
  out_write.reset(); // only the child writes now: EOF arrives when it exits
  err_write.reset();

  program_result result;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  try {
    char buffer[65536];
    pollfd fds[2] = {{out_read.get(), POLLIN, 0}, {err_read.get(), POLLIN, 0}};
    std::string* sinks[2] = {&result.out, &result.err};
    while (fds[0].fd >= 0 || fds[1].fd >= 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        result.timed_out = true;
        ::kill(pid, SIGKILL);
        break;
      }
      const int ready = ::poll(fds, 2, static_cast<int>(std::min<long long>(left.count(), 60000)));
      if (ready < 0 && errno != EINTR)
        throw kiln::error(op, "cannot read a program's output", std::strerror(errno));
      for (int i = 0; i < 2 && ready > 0; ++i) {
        if (fds[i].fd < 0 || fds[i].revents == 0) continue;
        const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
        if (n > 0)
          sinks[i]->append(buffer, static_cast<std::size_t>(n));
        else if (n == 0 || errno != EINTR)
          fds[i].fd = -1; // EOF (or a broken pipe)
      }
    }
  } catch (...) {
    ::kill(pid, SIGKILL); // never leave a child running or unreaped
    int ignored;
    while (::waitpid(pid, &ignored, 0) < 0 && errno == EINTR) {
    }
    throw;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno == EINTR) continue;
    throw kiln::error(op, "cannot wait for a program",
                      path + ": " + std::strerror(errno) +
                          (errno == ECHILD ? " (is SIGCHLD ignored in this process?)" : ""));
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

} // namespace kiln::jit
