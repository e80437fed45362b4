// Device loops are bounded: results on vulkan:0 (lavapipe, whose shader loops stop without
// an error after 65,535 iterations per invocation) equal the host's for reductions and
// elementwise kernels far past 64 x 65,535 elements, up to the largest buffer the device
// binds, and with the smallest launch settings. The grid arithmetic itself is checked for
// every size (and for CUDA's limits) by test_launch_grid.
#include "vulkan_support.hpp"

#include "kiln/jit/vulkan/backend.hpp"

#include <cstdlib>

namespace {

template <class T>
std::vector<T> host_values(const kiln::tensor<T>& t) {
  return t.to(kiln::device{}).to_vector();
}

// The largest number of T one buffer of the device can hold.
std::int64_t largest(const kiln::device& d, std::size_t bytes_per_element) {
  auto b = kiln::backend_for(d);
  const auto& vb = static_cast<kiln::jit::vk::vulkan_backend&>(*b);
  return static_cast<std::int64_t>(vb.ctx()->info().limits.max_storage_buffer_range /
                                   bytes_per_element);
}

// The reductions of x over `ax` on the host and on the device (x's copy there).
template <class T>
void reductions_of(const kiln::tensor<T>& h, const kiln::tensor<T>& d, const kiln::axes& ax,
                   double rel) {
  auto close = [&](const auto& a, const auto& b, double tol = -1) {
    if (tol < 0) tol = rel;
    const auto va = host_values(kiln::tensor<kiln::value_t<decltype(a)>>(a));
    const auto vb = host_values(kiln::tensor<kiln::value_t<decltype(b)>>(b));
    REQUIRE(va.size() == vb.size());
    std::size_t bad = 0;
    for (std::size_t i = 0; i < va.size(); ++i) {
      const double x = static_cast<double>(va[i]), y = static_cast<double>(vb[i]);
      if (!(std::abs(x - y) <= tol * std::abs(x))) {
        if (++bad <= 3) FAIL_CHECK("element " << i << ": host " << x << ", device " << y);
      }
    }
    CHECK(bad == 0);
  };
  close(kiln::sum(h, ax), kiln::sum(d, ax));
  close(kiln::prod(h, ax), kiln::prod(d, ax));
  close(kiln::mean(h, ax), kiln::mean(d, ax));
  close(kiln::max(h, ax), kiln::max(d, ax));
  close(kiln::min(h, ax), kiln::min(d, ax));
  close(kiln::argmax(h, ax), kiln::argmax(d, ax)); // exact: the first index of ties
  close(kiln::argmin(h, ax), kiln::argmin(d, ax));
  close(kiln::all(h, ax), kiln::all(d, ax));
  close(kiln::any(h, ax), kiln::any(d, ax));
  // The reductions of two-value states (reductions/*.hpp) through the same stages; their
  // f64 results depend on the merge order, so integers get a tolerance too.
  const double wide = std::max(rel, 1e-11);
  close(kiln::count_nonzero(h, ax), kiln::count_nonzero(d, ax));
  close(kiln::logsumexp(h, ax), kiln::logsumexp(d, ax), wide);
  close(kiln::var(h, ax), kiln::var(d, ax), wide);
  close(kiln::norm(h, ax), kiln::norm(d, ax), wide);
}

// Over all elements, one axis (contiguous and strided) and two axes of the n elements.
template <class T>
void every_axis(const kiln::tensor<T>& h, const kiln::tensor<T>& d, std::int64_t n, double rel) {
  {
    INFO("all elements");
    reductions_of(h, d, kiln::axes{}, rel);
  }
  {
    INFO("the last axis");
    reductions_of(h.reshape({4, n / 4}), d.reshape({4, n / 4}), 1, rel);
  }
  {
    INFO("the first axis (strided)");
    reductions_of(h.reshape({n / 4, 4}), d.reshape({n / 4, 4}), 0, rel);
  }
  {
    INFO("two axes");
    const std::int64_t a = n / 4 / 4096;
    reductions_of(h.reshape({a, 4, 4096}), d.reshape({a, 4, 4096}), {0, 2}, rel);
  }
}

} // namespace

TEST_CASE("vulkan: every reduction of 2^25 f32 (the largest buffer) equals the host's",
          "[vulkan][reduce][bounds]") {
  const kiln::device* gpu = vulkan_or_skip();
  if (!gpu) return;
  const std::int64_t n = std::int64_t{1} << 25;
  REQUIRE(largest(*gpu, 4) >= n);
  // Near 1, so that products of 2^23 of them stay finite; a random sign on a few.
  const auto h = kiln::tensor<float>(
      kiln::random::uniform<float>({n}, test::draw(1, 1 << 30), 0.999f, 1.001f) - 1.0f);
  kiln::tensor<float> x = kiln::where(h > 0.0009995f, -(h + 1.0f), h + 1.0f);
  // Sums of 2^25 values: the device's accumulation order differs from the host's (both in
  // f64): the f32 results may differ in the last place.
  every_axis(x, x.to(*gpu), n, 2e-6);
}

TEST_CASE("vulkan: every reduction of 2^24 i64 (the largest buffer) equals the host's",
          "[vulkan][reduce][bounds]") {
  const kiln::device* gpu = vulkan_or_skip();
  if (!gpu) return;
  const std::int64_t n = std::int64_t{1} << 24;
  REQUIRE(largest(*gpu, 8) >= n);
  // Few distinct values: argmax/argmin ties across chunks pick the first index; products
  // of +-1 with a few 2s stay exact.
  auto v = test::integers<std::int64_t>(static_cast<std::size_t>(n), -50, 50);
  for (auto& e : v)
    e = e == 50 || e == -50 ? e : e % 7;
  kiln::tensor<std::int64_t> x = kiln::from(v, kiln::shape{n});
  every_axis(x, x.to(*gpu), n, 0);
}

TEST_CASE("vulkan: reductions of 2^27 u8 (the largest buffer of bytes) equal the host's",
          "[vulkan][reduce][bounds]") {
  const kiln::device* gpu = vulkan_or_skip();
  if (!gpu) return;
  const std::int64_t n = largest(*gpu, 1);
  REQUIRE(n >= (std::int64_t{1} << 27));
  const auto h = kiln::tensor<std::uint8_t>(
      kiln::cast<std::uint8_t>(kiln::random::uniform<float>({n}, test::draw(1, 1 << 30), 1, 200)));
  const auto d = h.to(*gpu);
  CHECK(kiln::sum(d).item() == kiln::sum(h).item());
  CHECK(kiln::max(d).item() == kiln::max(h).item());
  CHECK(kiln::argmax(d).item() == kiln::argmax(h).item());
  CHECK(kiln::argmin(d).item() == kiln::argmin(h).item());
  CHECK(kiln::all(d).item());
  CHECK_FALSE(kiln::any(d == std::uint8_t{0}).item());
}

TEST_CASE("vulkan: the sizes that were cut off at 64 x 65535 elements",
          "[vulkan][reduce][bounds]") {
  const kiln::device* gpu = vulkan_or_skip();
  if (!gpu) return;
  CHECK(kiln::sum(kiln::ones<float>({4'300'000}, *gpu)).item() == 4'300'000.0f);
  CHECK(kiln::sum(kiln::ones<float>({10'000'000}, *gpu)).item() == 10'000'000.0f);
  CHECK(kiln::sum(kiln::full<float>({10'000'000}, 0.1f, *gpu)).item() == Approx(1e6).epsilon(1e-6));
  const auto r = kiln::arange<float>(0, 5'000'000).to(*gpu);
  CHECK(kiln::max(r).item() == 4'999'999.0f);
  CHECK(kiln::argmax(r).item() == 4'999'999);
  CHECK(host_values(kiln::tensor<float>(kiln::sum(kiln::ones<float>({2, 5'000'000}, *gpu), 1))) ==
        std::vector<float>{5e6f, 5e6f});
}

// Run by CTest with KILN_VK_MAX_GROUPS=1 KILN_VK_WORKGROUP=1 (tests/CMakeLists.txt), so
// one invocation would walk every element: the grid grows to keep its loop in budget.
TEST_CASE("vulkan: elementwise and reductions with the smallest launch settings",
          "[.][small-launch]") {
  const char* g = std::getenv("KILN_VK_MAX_GROUPS");
  const char* w = std::getenv("KILN_VK_WORKGROUP");
  REQUIRE((g && std::string(g) == "1" && w && std::string(w) == "1"));
  const kiln::device* gpu = vulkan_or_skip();
  if (!gpu) return;
  const std::int64_t n = 1'000'000;
  const auto x = kiln::random::uniform<float>({n}, test::draw(1, 1 << 30), -4, 4);
  const auto i = kiln::arange<std::int32_t>(0, n);
  const auto xd = x.to(*gpu);
  const auto id = i.to(*gpu);
  kiln::tensor<float> y = xd * 2.0f - xd; // exact in f32: y == x
  kiln::tensor<std::int32_t> j = id * 3 + 1;
  CHECK(host_values(y) == x.to_vector());
  const auto jv = host_values(j);
  std::int64_t bad = 0;
  for (std::int64_t k = 0; k < n; ++k)
    bad += jv[static_cast<std::size_t>(k)] != 3 * k + 1;
  CHECK(bad == 0);
  CHECK(kiln::sum(id).item() == std::int64_t{n} * (n - 1) / 2);
  CHECK(kiln::argmax(xd).item() == kiln::argmax(x).item());
}
