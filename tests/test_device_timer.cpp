// The device's own clock (jit_backend::device_timer, timer_begin, timer_end_ns) on vulkan:0
// (lavapipe here: timestamp queries): an empty region takes next to nothing, a large kernel
// takes about what the wall clock says and no more, four runs about four times one, and a
// region spanning a batch submit (more than 64 commands) is still measured whole.
#include "vulkan_support.hpp"

#include "kiln/jit/backend/jit_backend.hpp"
#include "kiln/jit/vulkan/backend.hpp"

#include <algorithm>
#include <chrono>

namespace {

kiln::jit::jit_backend& jit_of(const kiln::device& d) {
  auto* be = dynamic_cast<kiln::jit::jit_backend*>(kiln::backend_for(d).get());
  REQUIRE(be);
  return *be;
}

double wall_ns(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - since).count();
}

// Device nanoseconds of `f` (the queue drained before it starts).
template <class F>
double device_ns(kiln::jit::jit_backend& be, F&& f) {
  be.synchronize();
  be.timer_begin();
  f();
  return be.timer_end_ns();
}

// The smallest of three measurements: other processes only ever add time.
template <class F>
double least_device_ns(kiln::jit::jit_backend& be, F&& f) {
  double best = device_ns(be, f);
  for (int i = 0; i < 2; ++i)
    best = std::min(best, device_ns(be, f));
  return best;
}

} // namespace

TEST_CASE("vulkan: the device timer measures an empty region as next to nothing",
          "[vulkan][timer]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  auto& be = jit_of(*dev);
  REQUIRE(be.device_timer());
  CHECK(be.timer_end_ns() == -1); // no timer_begin: nothing to measure
  const double ns = least_device_ns(be, [] {});
  INFO("empty region: " << ns << " ns");
  CHECK(ns >= 0);
  CHECK(ns < 2e6); // ~20-30 us on lavapipe; the rest is room for a loaded machine
}

TEST_CASE("vulkan: the device timer agrees with the wall clock on a large kernel, and four "
          "runs take about four times one",
          "[vulkan][timer]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  auto& be = jit_of(*dev);
  const auto x = kiln::random::uniform<float>({std::int64_t{1} << 22}, 7, -1, 1, *dev);
  auto y = kiln::empty<float>({std::int64_t{1} << 22}, *dev);
  auto run = [&] { y = kiln::exp(kiln::sin(x) * 0.5f) + kiln::sin(kiln::exp(x) * 1.5f) * x; };
  run(); // compiles the kernel
  be.synchronize();

  // Wall time around the same region, waited for: the device's time cannot be much more.
  double device = 0, wall = 0;
  for (int i = 0; i < 3; ++i) {
    be.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    be.timer_begin();
    run();
    const double d = be.timer_end_ns();
    const double w = wall_ns(t0);
    if (i == 0 || d < device) {
      device = d;
      wall = w;
    }
  }
  INFO("2^22 floats: device " << device / 1e6 << " ms, wall " << wall / 1e6 << " ms");
  CHECK(device > 0);
  CHECK(device <= 1.5 * wall + 1e6);
  CHECK(device >= wall / 10);

  const double one = least_device_ns(be, run);
  const double four = least_device_ns(be, [&] {
    for (int i = 0; i < 4; ++i)
      run();
  });
  INFO("one run " << one / 1e6 << " ms, four " << four / 1e6 << " ms: x" << four / one);
  CHECK(four >= 2 * one);
  CHECK(four <= 8 * one);
}

TEST_CASE("vulkan: the device timer measures a region across a batch submit", "[vulkan][timer]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  auto& be = jit_of(*dev);
  const auto& ctx = *static_cast<kiln::jit::vk::vulkan_backend&>(be).ctx();
  const auto x = kiln::random::uniform<float>({std::int64_t{1} << 16}, 3, -1, 1, *dev);
  auto y = kiln::empty<float>({std::int64_t{1} << 16}, *dev);
  auto run = [&](int times) {
    for (int i = 0; i < times; ++i)
      y = kiln::exp(x) * 2.0f + 1.0f; // one dispatch each
  };
  run(1); // compiles the kernel
  be.synchronize();

  be.timer_begin();
  const auto submitted = ctx.submitted_epoch();
  run(100); // the context submits every 64 commands
  const bool submitted_between = ctx.submitted_epoch() > submitted;
  const double many = be.timer_end_ns();
  const double few = least_device_ns(be, [&] { run(5); });
  INFO("100 kernels: " << many / 1e6 << " ms; 5 kernels: " << few / 1e6 << " ms");
  CHECK(submitted_between);
  CHECK(many > few);
  CHECK(few > 0);
}
