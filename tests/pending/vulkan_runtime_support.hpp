#pragma once
// What test_vulkan_runtime.cpp needs around the runtime: the validation layer on for the
// whole run (a message fails the test case it appears in, and one at exit fails the run),
// the device or a visible skip, the context variants (mapped / staging copies / descriptor
// pools), GLSL compiled by glslc, and random draws replayable with --rng-seed.
// Include in one translation unit, before any other include of Catch (the listener needs
// CATCH_CONFIG_EXTERNAL_INTERFACES). Only the runtime is included: not kiln.hpp.
#define CATCH_CONFIG_EXTERNAL_INTERFACES
#include <catch2/catch.hpp>

#include "kiln/jit/vulkan/context.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <spawn.h>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace vkt {
namespace vk = kiln::jit::vk;

#if defined(__SANITIZE_ADDRESS__)
#define KILN_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KILN_TEST_ASAN 1
#endif
#endif

// Made during static initialization, so before the first context: turns validation on and
// makes the validation log first (so it outlives the instance). At exit, after every
// device and the instance are gone, a message reported during shutdown fails the run.
// Synchronization validation is on too (=sync): lavapipe runs commands one after another,
// so a missing barrier shows only there (a run without barriers: thousands of SYNC-HAZARDs).
// Not under ASan: Debian's layer (1.3.239) leaks ~360 KB in synchronization validation,
// which LeakSanitizer reports at exit. A value the caller set is kept.
struct validation_guard {
  validation_guard() {
#ifdef KILN_TEST_ASAN
    const char* level = "1";
#else
    const char* level = "sync";
#endif
    ::setenv("KILN_VK_VALIDATION", level, 0);
    const char* v = std::getenv("KILN_VK_VALIDATION");
    if (std::string(v) != "1" && std::string(v) != "sync") ::setenv("KILN_VK_VALIDATION", "1", 1);
    (void)vk::validation_message_count();
  }
  ~validation_guard() {
    if (const std::size_t n = vk::validation_message_count(); n > 0) {
      std::fprintf(stderr, "FAILED: %zu Vulkan validation message(s) in this run\n", n);
      std::_Exit(1);
    }
  }
};
inline const validation_guard guard;

inline std::string last_messages(std::size_t n) {
  const auto all = vk::validation_messages();
  std::string s;
  for (std::size_t i = all.size() - std::min(n, all.size()); i < all.size(); ++i)
    s += "\n  " + all[i];
  return s;
}

// Fails the test case during which the validation layer said anything.
struct validation_listener : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  int depth = 0;
  std::size_t at_start = 0;
  void sectionStarting(Catch::SectionInfo const& info) override {
    if (depth++ == 0) at_start = vk::validation_message_count();
    TestEventListenerBase::sectionStarting(info);
  }
  void sectionEnded(Catch::SectionStats const& stats) override {
    if (--depth == 0) {
      const std::size_t now = vk::validation_message_count();
      if (now != at_start)
        FAIL_CHECK("the Vulkan validation layer reported "
                   << now - at_start << " message(s) in \"" << stats.sectionInfo.name
                   << "\":" << last_messages(now - at_start));
    }
    TestEventListenerBase::sectionEnded(stats);
  }
};
CATCH_REGISTER_LISTENER(validation_listener)

inline std::mt19937_64& rng() {
  static std::mt19937_64 g(Catch::rngSeed());
  return g;
}
inline std::size_t draw(std::size_t lo, std::size_t hi) {
  return std::uniform_int_distribution<std::size_t>(lo, hi)(rng());
}
inline std::vector<std::byte> random_bytes(std::size_t n) {
  std::vector<std::byte> v(n);
  std::uniform_int_distribution<int> d(0, 255);
  for (auto& b : v)
    b = static_cast<std::byte>(d(rng()));
  return v;
}
template <class T>
std::vector<T> uniform(std::size_t n, double lo, double hi) {
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<T> v(n);
  for (auto& x : v)
    x = static_cast<T>(d(rng()));
  return v;
}

// The device the tests run on: lavapipe where present, else vulkan:0; -1 after a warning
// when there is none (KILN_REQUIRE_VULKAN=1 makes that a failure).
inline int device_index() {
  static const std::pair<int, std::string> found = [] {
    std::string why;
    const auto devices = vk::enumerate_devices(&why);
    for (std::size_t i = 0; i < devices.size(); ++i)
      if (devices[i].name.find("llvmpipe") != std::string::npos)
        return std::pair<int, std::string>(static_cast<int>(i), "");
    return devices.empty() ? std::pair<int, std::string>(-1, why)
                           : std::pair<int, std::string>(0, "");
  }();
  if (found.first < 0) {
    const char* require = std::getenv("KILN_REQUIRE_VULKAN");
    if (require && std::string(require) == "1")
      FAIL_CHECK("no Vulkan device (KILN_REQUIRE_VULKAN=1): " << found.second);
    else
      WARN("SKIPPED: no Vulkan device: " << found.second);
  }
  return found.first;
}

// How a context moves data and binds buffers; each variant is made once per run.
enum class mode { mapped, staging, pools, staging_pools };
inline const char* name(mode m) {
  switch (m) {
  case mode::mapped:
    return "mapped memory, push descriptors (context::get)";
  case mode::staging:
    return "staging copies";
  case mode::pools:
    return "descriptor pools";
  case mode::staging_pools:
    return "staging copies and descriptor pools";
  }
  return "?";
}
inline std::shared_ptr<vk::context> context_for(mode m) {
  const int index = device_index();
  if (index < 0) return nullptr;
  if (m == mode::mapped) return vk::context::get(index);
  static std::mutex lock;
  static std::map<mode, std::shared_ptr<vk::context>> made;
  std::lock_guard l(lock);
  auto& c = made[m];
  if (!c) {
    vk::context_options o;
    o.force_staging = m == mode::staging || m == mode::staging_pools;
    o.push_descriptors = !(m == mode::pools || m == mode::staging_pools);
    c = vk::context::create(index, o);
  }
  return c;
}

// SPIR-V from GLSL through glslc (temp files), cached by source; empty after a warning
// when glslc cannot be started (not installed).
inline std::vector<std::uint32_t> compile_glsl(const std::string& source) {
  static std::mutex lock;
  static std::map<std::string, std::vector<std::uint32_t>> done;
  std::lock_guard l(lock);
  if (auto it = done.find(source); it != done.end()) return it->second;
  std::string dir = (std::filesystem::temp_directory_path() / "kiln-vk-runtime-XXXXXX").string();
  REQUIRE(::mkdtemp(dir.data()) != nullptr);
  const std::string src = dir + "/kernel.comp", out = dir + "/kernel.spv", log = dir + "/log";
  std::ofstream(src) << source;
  // posix_spawn, not std::system: a fork of an ASan process copies its huge mappings.
  std::vector<std::string> args = {
      "glslc", "--target-env=vulkan1.2", "-fshader-stage=compute", "-o", out, src};
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  int status = posix_spawnp(&pid, "glslc", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  const bool missing = status != 0;
  if (!missing) {
    int wstatus = 0;
    while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
    status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128;
  }
  std::stringstream messages;
  messages << std::ifstream(log).rdbuf();
  std::vector<std::uint32_t> words;
  if (status == 0) {
    std::ifstream in(out, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    words.resize(bytes.size() / 4);
    std::memcpy(words.data(), bytes.data(), words.size() * 4);
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (missing) {
    WARN("SKIPPED: glslc could not be started: " << std::strerror(status));
    return {};
  }
  INFO(messages.str() << "\n" << source);
  REQUIRE(status == 0);
  REQUIRE(words.size() > 5);
  done[source] = words;
  return words;
}

// y[i] = a * x[i] + b for i < n; a, b, n in push constants.
inline const char* saxpy_glsl = R"(#version 450
layout(local_size_x_id = 0) in;
layout(push_constant) uniform Params { float a; float b; uint n; } p;
layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Y { float y[]; };
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < p.n) y[i] = p.a * x[i] + p.b;
}
)";
struct saxpy_params {
  float a, b;
  std::uint32_t n;
};
inline std::span<const std::byte> bytes_of(const saxpy_params& p) {
  return std::as_bytes(std::span(&p, 1));
}
inline bool close_to(float got, double want, double scale) {
  return std::abs(static_cast<double>(got) - want) <= 4e-7 * scale + 1e-30;
}

} // namespace vkt
