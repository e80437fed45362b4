#pragma once
// What every CUDA execution test binary shares: a fresh kernel disk cache per run, and the
// device, or a clear skip where there is none (no driver, no GPU: the reason
// kiln::devices() gives). KILN_REQUIRE_CUDA=1 turns the skip into a failure.
#include "device_support.hpp"

#include "kiln/jit/cuda/backend.hpp"
#include "kiln/jit/cuda/cublas.hpp"

namespace cuda_test {
// KILN_TEST_CUDA_ON_CPU=<library> (the `cuda-on-cpu:` tests, device_on_cpu/cuda_driver.cpp):
// that library is both the CUDA driver and NVRTC (and cuBLAS where asked), the device must
// open, and the binary's device tests run on CUDA only. Set before main(), before anything reads
// the settings.
inline const bool on_cpu_ready = [] {
  if (const char* lib = std::getenv("KILN_TEST_CUDA_ON_CPU"); lib && *lib) {
    ::setenv("KILN_CUDA_DRIVER", lib, 1);
    ::setenv("KILN_NVRTC_LIBRARY", lib, 1);
    ::setenv("KILN_REQUIRE_CUDA", "1", 1);
    ::setenv("KILN_TEST_DEVICES", "cuda", 1);
    // The same library is cuBLAS in the provider's tests (KILN_TEST_CUBLAS=1); the other
    // tests run kiln's kernels, without a provider.
    const char* cublas = std::getenv("KILN_TEST_CUBLAS");
    ::setenv("KILN_CUBLAS_LIBRARY", cublas && *cublas == '1' ? lib : "none", 1);
  } else if (const char* cublas = std::getenv("KILN_TEST_CUBLAS"); !cublas || *cublas != '1') {
    // On a GPU too the tests run kiln's kernels (they count its launches), unless the
    // provider's test asks for cuBLAS or KILN_CUBLAS_LIBRARY names one.
    ::setenv("KILN_CUBLAS_LIBRARY", "none", 0);
  }
  return true;
}();
// Whether cuda:0 is the CPU stand-in (a test may size its work down there).
inline bool on_cpu() {
  const char* lib = std::getenv("KILN_TEST_CUDA_ON_CPU");
  return lib && *lib;
}
inline device_test::fresh_cache& cache() {
  static device_test::fresh_cache c("kiln-cuda-test-");
  return c;
}
inline const bool cache_ready = (cache(), true); // before main(): before a backend reads it
} // namespace cuda_test

// The CUDA device the tests run on, or nullptr after a warning saying why there is none.
inline const kiln::device* cuda_or_skip() {
  if (device_test::left_out("cuda")) return nullptr;
  static const auto found = device_test::find_device({kiln::device_kind::cuda, 0});
  return device_test::device_or_skip(found, "KILN_REQUIRE_CUDA", "skipped, no CUDA device");
}
