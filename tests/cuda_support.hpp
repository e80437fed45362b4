#pragma once
// What every CUDA execution test binary shares: the device, or a clear skip where there is
// none (no driver, no GPU: the reason kiln::devices() gives), and a fresh kernel disk cache
// per run, so a kernel a test makes is compiled (and counted) rather than found where an
// earlier run left it. KILN_REQUIRE_CUDA=1 turns the skip into a failure, for machines
// that must have the device.
#include "support.hpp"

#include "kiln/kiln.hpp"

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

namespace cuda_test {

struct environment {
  std::string cache_dir;
  environment() {
    if (const char* d = std::getenv("KILN_CACHE_DIR"); d && *d) return;
    std::error_code ec;
    const auto tmp = std::filesystem::temp_directory_path(ec);
    std::string pattern = (ec ? std::filesystem::path("/tmp") : tmp) / "kiln-cuda-test-XXXXXX";
    if (::mkdtemp(pattern.data())) {
      cache_dir = pattern;
      ::setenv("KILN_CACHE_DIR", cache_dir.c_str(), 1);
    }
  }
  ~environment() {
    std::error_code ec;
    if (!cache_dir.empty()) std::filesystem::remove_all(cache_dir, ec);
  }
  environment(const environment&) = delete;
  environment& operator=(const environment&) = delete;
};
inline environment& env() {
  static environment e;
  return e;
}
inline const bool environment_ready = (env(), true);

struct lookup {
  std::optional<kiln::device> device;
  std::string why_not;
};
inline const lookup& find_cuda() {
  static const lookup found = [] {
    lookup r;
    const kiln::device want(kiln::device_kind::cuda, 0);
    for (const auto& i : kiln::devices())
      if (i.device == want) {
        if (i.available)
          r.device = want;
        else
          r.why_not = i.description;
      }
    if (!r.device && r.why_not.empty()) r.why_not = "cuda:0 is not among kiln::devices()";
    return r;
  }();
  return found;
}

} // namespace cuda_test

// The CUDA device the tests run on, or nullptr after a warning saying why there is none.
inline const kiln::device* cuda_or_skip() {
  const auto& found = cuda_test::find_cuda();
  if (found.device) return &*found.device;
  const char* require = std::getenv("KILN_REQUIRE_CUDA");
  if (require && std::string(require) == "1")
    FAIL_CHECK("no CUDA device (KILN_REQUIRE_CUDA=1): " << found.why_not);
  else
    WARN("skipped, no CUDA device: " << found.why_not);
  return nullptr;
}
