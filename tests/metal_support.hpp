#pragma once
// What the Metal execution tests share: a fresh kernel disk cache per run, and the device,
// or a clear skip where there is none (the reason kiln::devices() gives: every platform but
// Apple's). KILN_REQUIRE_METAL=1 turns the skip into a failure.
// KILN_TEST_MSL_ON_CPU=<library> (the `msl-on-cpu:` tests) makes that library the Metal
// framework (KILN_METAL_FRAMEWORK: device_on_cpu/metal_framework.cpp runs MSL on CPU
// threads), requires metal:0, and runs the binary's device tests on Metal only.
#include "device_support.hpp"

#include <cstdlib>
#include <string>

namespace metal_test {
inline device_test::fresh_cache& cache() {
  static device_test::fresh_cache c("kiln-metal-test-");
  return c;
}
inline bool on_cpu() {
  const char* v = std::getenv("KILN_TEST_MSL_ON_CPU");
  return v && *v;
}
inline const bool ready = [] {
  cache();
  if (on_cpu()) {
    ::setenv("KILN_METAL_FRAMEWORK", std::getenv("KILN_TEST_MSL_ON_CPU"), 1);
    ::setenv("KILN_REQUIRE_METAL", "1", 1);
    ::setenv("KILN_TEST_DEVICES", "metal", 1);
  }
  return true;
}();
} // namespace metal_test

// The Metal device the tests run on, or nullptr after a warning saying why there is none.
inline const kiln::device* metal_or_skip() {
  if (device_test::left_out("metal")) return nullptr;
  static const auto found = device_test::find_device({kiln::device_kind::metal, 0});
  return device_test::device_or_skip(found, "KILN_REQUIRE_METAL", "skipped, no Metal device");
}
