// Device lifetime under the validation layer: a program may end with work queued and never
// read, drop tensors whose work is pending, or get an error after work was queued, and the
// validation layer reports nothing — during the test (the listener of vulkan_support.hpp)
// or at exit, when the device shuts down (CTest runs each case as its own process and fails
// it on any "kiln[vulkan validation]" line: tests/CMakeLists.txt).
#include "vulkan_support.hpp"

TEST_CASE("vulkan: a program may end with work queued and never read", "[vulkan][lifetime]") {
  const kiln::device* gpu = vulkan_or_skip();
  if (!gpu) return;
  auto x = kiln::ones<float>({8}, *gpu);
  kiln::tensor<float> y = kiln::sin(x) * 2.0f; // queued; the process ends before any read
  CHECK(y.device() == *gpu);
}

TEST_CASE("vulkan: tensors dropped with their work pending, then the cache emptied",
          "[vulkan][lifetime]") {
  const kiln::device* gpu = vulkan_or_skip();
  if (!gpu) return;
  const auto h = kiln::random::uniform<float>({1000}, test::draw(1, 1 << 30), -1, 1);
  const auto x = h.to(*gpu);
  for (int i = 0; i < 10; ++i) {
    kiln::tensor<float> a = x * float(i);
    kiln::tensor<float> b = a + x; // a and b are dropped with their kernels still queued
  }
  kiln::empty_cache(*gpu);
  kiln::tensor<float> c = x * 3.0f;
  const auto got = c.to(kiln::device{}).to_vector();
  const auto want = h.to_vector();
  for (std::size_t i = 0; i < want.size(); ++i)
    CHECK(got[i] == want[i] * 3.0f);
  kiln::tensor<float> d = c - x; // left queued at exit
}

TEST_CASE("vulkan: an error after work was queued leaves the device usable", "[vulkan][lifetime]") {
  const kiln::device* gpu = vulkan_or_skip();
  if (!gpu) return;
  const auto x = kiln::arange<float>(0, 64).to(*gpu);
  kiln::tensor<float> y = x * 2.0f;
  const auto bad = kiln::ones<float>({3}, *gpu);
  CHECK_THROWS_AS([&] { kiln::tensor<float> z = y + bad; }(), kiln::error);
  kiln::tensor<float> z = y + 1.0f;
  CHECK(kiln::sum(z).item() == Approx(64.0 * 63.0 + 64.0));
  kiln::tensor<float> w = z * z; // left queued at exit
}
