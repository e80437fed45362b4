#pragma once
// Runs this test binary again in a fresh process, only the hidden test case `tag`, with
// variables of the environment set ("NAME=value") or removed ("-NAME"): what a program
// sees at its start (settings read once, libraries opened once). Its exit status, or 100
// when it did not exit (a signal).
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace test {

inline int run_child(const std::vector<std::string>& env, const std::string& tag) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    for (const auto& e : env) {
      if (e[0] == '-') {
        ::unsetenv(e.c_str() + 1);
        continue;
      }
      const auto eq = e.find('=');
      ::setenv(e.substr(0, eq).c_str(), e.substr(eq + 1).c_str(), 1);
    }
    ::execl("/proc/self/exe", "kiln-test-child", tag.c_str(), nullptr);
    ::_exit(99);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

} // namespace test
