#pragma once
// What every CUDA execution test binary shares: a fresh kernel disk cache per run, and the
// device, or a clear skip where there is none (no driver, no GPU: the reason
// kiln::devices() gives). KILN_REQUIRE_CUDA=1 turns the skip into a failure.
#include "device_support.hpp"

#include "kiln/jit/cuda/backend.hpp"

namespace cuda_test {
inline device_test::fresh_cache& cache() {
  static device_test::fresh_cache c("kiln-cuda-test-");
  return c;
}
inline const bool cache_ready = (cache(), true); // before main(): before a backend reads it
} // namespace cuda_test

// The CUDA device the tests run on, or nullptr after a warning saying why there is none.
inline const kiln::device* cuda_or_skip() {
  static const auto found = device_test::find_device({kiln::device_kind::cuda, 0});
  return device_test::device_or_skip(found, "KILN_REQUIRE_CUDA", "skipped, no CUDA device");
}
