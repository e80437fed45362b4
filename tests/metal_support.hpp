#pragma once
// What the Metal execution tests share: a fresh kernel disk cache per run, and the device,
// or a clear skip where there is none (every platform but Apple's: the reason
// kiln::devices() gives). KILN_REQUIRE_METAL=1 turns the skip into a failure.
// KILN_TEST_MSL_ON_CPU=1 (the `msl-on-cpu:` tests) registers metal:0 as the Metal backend
// over the CPU stand-in (device_on_cpu/metal_on_cpu.hpp), requires it, and runs the
// binary's device tests on Metal only.
#include "device_support.hpp"

#include "kiln/jit/metal/backend.hpp"

#ifdef MSL_ON_CPU_CXX
#include "device_on_cpu/metal_on_cpu.hpp"
#endif

namespace metal_test {
inline device_test::fresh_cache& cache() {
  static device_test::fresh_cache c("kiln-metal-test-");
  return c;
}
inline bool on_cpu() {
  const char* v = std::getenv("KILN_TEST_MSL_ON_CPU");
  return v && std::string(v) == "1";
}
inline const bool ready = [] {
  cache();
#ifdef MSL_ON_CPU_CXX
  if (on_cpu()) {
    ::setenv("KILN_REQUIRE_METAL", "1", 1);
    ::setenv("KILN_TEST_DEVICES", "metal", 1);
    kiln::register_backend(
        {kiln::device_kind::metal,
         [] {
           return std::vector<kiln::device_info>{
               {kiln::device(kiln::device_kind::metal, 0), true, "msl-on-cpu (host threads)"}};
         },
         [](int index) -> std::shared_ptr<kiln::backend> {
           if (index != 0)
             throw kiln::error("device", "no such device", "metal:" + std::to_string(index));
           static const auto rt = std::make_shared<msl_on_cpu::runtime>();
           return kiln::jit::metal::metal_backend::open(index, rt);
         }});
  }
#endif
  return true;
}();
} // namespace metal_test

// The Metal device the tests run on, or nullptr after a warning saying why there is none.
inline const kiln::device* metal_or_skip() {
  if (device_test::left_out("metal")) return nullptr;
  static const auto found = device_test::find_device({kiln::device_kind::metal, 0});
  return device_test::device_or_skip(found, "KILN_REQUIRE_METAL", "skipped, no Metal device");
}
