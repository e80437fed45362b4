#pragma once
// Checks of kiln::error paths shared by test files: an expected error, and environment
// variables set for one scope.
#include "kiln/error.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <exception>
#include <initializer_list>
#include <optional>
#include <string>
#include <typeinfo>

// What f threw (null: nothing) against the expected kiln::error. Out of line: instantiated
// per lambda, these checks were most of the code of the files that test errors.
[[gnu::noinline]] inline void expect_error_outcome(std::exception_ptr thrown, const std::string& op,
                                                   std::initializer_list<std::string> parts) {
  if (!thrown) FAIL("no kiln::error was thrown (expected one from " << op << ")");
  try {
    std::rethrow_exception(thrown);
  } catch (const kiln::error& e) {
    INFO("message: " << e.what());
    CHECK(e.op() == op);
    for (const auto& p : parts)
      CHECK(std::string(e.what()).find(p) != std::string::npos);
  } catch (const std::exception& e) {
    FAIL("a " << typeid(e).name() << " instead of a kiln::error: " << e.what());
  }
}

// Runs f and requires a kiln::error from `op` whose message contains each of `parts`.
template <class F>
void expect_error(F&& f, const std::string& op, std::initializer_list<std::string> parts) {
  std::exception_ptr thrown;
  try {
    f();
  } catch (...) {
    thrown = std::current_exception();
  }
  expect_error_outcome(thrown, op, parts);
}

// Sets an environment variable for one scope (unset: nullptr), restoring the old value.
struct env_override {
  std::string name;
  std::optional<std::string> old;
  env_override(const char* n, const char* v) : name(n) {
    if (const char* o = std::getenv(n)) old = o;
    v ? ::setenv(n, v, 1) : ::unsetenv(n);
  }
  env_override(const char* n, const std::string& v) : env_override(n, v.c_str()) {}
  ~env_override() { old ? ::setenv(name.c_str(), old->c_str(), 1) : ::unsetenv(name.c_str()); }
  env_override(const env_override&) = delete;
  env_override& operator=(const env_override&) = delete;
};
