#pragma once
// What the GPU test binaries (vulkan_support.hpp, cuda_support.hpp) share: a fresh kernel
// disk cache per run, so a kernel a test makes is compiled (and counted) rather than found
// where an earlier run left it; and the device under test, or a visible skip with the
// reason kiln::devices() gives (a variable such as KILN_REQUIRE_VULKAN=1 turns the skip
// into a failure, for machines that must have the device).
#include "support.hpp"

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>

namespace device_test {

// KILN_CACHE_DIR for this run: the one set, else a new temporary directory, removed at exit.
struct fresh_cache {
  std::string dir;
  bool made = false; // the directory was made for this run (empty at the start)
  explicit fresh_cache(const char* prefix) {
    if (const char* d = std::getenv("KILN_CACHE_DIR"); d && *d) {
      dir = d;
      return;
    }
    std::error_code ec;
    const auto tmp = std::filesystem::temp_directory_path(ec);
    std::string pattern =
        (ec ? std::filesystem::path("/tmp") : tmp) / (prefix + std::string("XXXXXX"));
    if (::mkdtemp(pattern.data())) {
      dir = pattern;
      made = true;
      ::setenv("KILN_CACHE_DIR", dir.c_str(), 1);
    }
  }
  ~fresh_cache() {
    std::error_code ec;
    if (made) std::filesystem::remove_all(dir, ec);
  }
  fresh_cache(const fresh_cache&) = delete;
  fresh_cache& operator=(const fresh_cache&) = delete;
};

struct lookup {
  std::optional<kiln::device> device;
  std::string why_not;
};

inline lookup find_device(const kiln::device& want) {
  lookup r;
  for (const auto& i : kiln::devices())
    if (i.device == want) {
      if (i.available)
        r.device = want;
      else
        r.why_not = i.description;
    }
  if (!r.device && r.why_not.empty()) r.why_not = want.str() + " is not among kiln::devices()";
  return r;
}

// KILN_TEST_DEVICES=cuda (a comma list of backends) runs a binary's device tests on those
// backends only: the `cuda-on-cpu:` tests run the catalog, shared with Vulkan, for CUDA.
inline bool left_out(const char* backend) {
  const char* v = std::getenv("KILN_TEST_DEVICES");
  if (!v || !*v) return false;
  const std::string list = std::string(",") + v + ",";
  return list.find(std::string(",") + backend + ",") == std::string::npos;
}

// The device found, or nullptr after a warning "<none>: <why>" (a failure when the
// variable `require` is 1).
inline const kiln::device* device_or_skip(const lookup& found, const char* require,
                                          const char* none) {
  if (found.device) return &*found.device;
  const char* v = std::getenv(require);
  if (v && std::string(v) == "1")
    FAIL_CHECK(none << " (" << require << "=1): " << found.why_not);
  else
    WARN(none << ": " << found.why_not);
  return nullptr;
}

} // namespace device_test
