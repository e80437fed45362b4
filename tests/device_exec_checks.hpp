#pragma once
// What the execution test binaries share (test_cuda_exec.cpp, test_metal_exec.cpp): counts of
// kernels made, a balanced sum of many leaves, and the checks of the backends' shared body
// every device runs: several outputs and views, single-flight compiles and the caching arena.
#include "support.hpp"

#include <cmath>
#include <thread>

namespace device_test {

// Kernels compiled, and compiled or found in the disk cache, so far.
inline std::uint64_t compiles() { return kiln::jit::compile_count().load(); }
inline std::uint64_t made() { return compiles() + kiln::jit::disk_hit_count().load(); }

template <class T>
std::vector<T> on_host(const kiln::tensor<T>& t) {
  return t.to(kiln::device{}).to_vector();
}

// v[Lo] + ... + v[Hi - 1] as a balanced tree (a 200-deep chain is slow to compile).
template <std::size_t Lo, std::size_t Hi, class V>
auto tree_sum(const V& v) {
  if constexpr (Hi - Lo == 1)
    return v[Lo];
  else
    return tree_sum<Lo, (Lo + Hi) / 2>(v) + tree_sum<(Lo + Hi) / 2, Hi>(v);
}

// N distinct tensors of `size` integers summed in one expression, more than one kernel binds:
// run as several stages, the sum exact.
template <class T, std::size_t N>
void check_many_leaves(const kiln::device& dev, std::int64_t size) {
  std::vector<kiln::tensor<T>> hs, ds;
  for (std::size_t i = 0; i < N; ++i) {
    hs.push_back(
        kiln::from(test::integers<T>(std::size_t(size), -1 << 20, 1 << 20), kiln::shape{size}));
    ds.push_back(hs.back().to(dev));
  }
  const kiln::tensor<T> got = tree_sum<0, N>(ds);
  CHECK(on_host(got) == kiln::tensor<T>(tree_sum<0, N>(hs)).to_vector());
}

// Threads needing one new kernel at once share one compile.
inline void check_single_flight(const kiln::device& dev) {
  const auto x = kiln::random::uniform<float>({1 << 12}, 4, 1, 3, dev);
  const auto before = compiles();
  std::vector<std::thread> ts;
  for (int t = 0; t < 6; ++t)
    ts.emplace_back([&] { (void)kiln::tensor<float>(kiln::cbrt(x) + kiln::log1p(x)).at({0}); });
  for (auto& t : ts)
    t.join();
  CHECK(compiles() <= before + 1);
}

// Several outputs from one kernel (at most one kernel made) with broadcasting, each output
// pre-filled so that an element left unwritten fails; then a transposed narrow view read, a
// strided slice written and an in-place update; all against the host.
inline void check_outputs_and_views(const kiln::device& dev) {
  const auto xh = kiln::random::uniform<float>({9, 4}, test::draw(1, 99), -3, 3);
  const auto rh = kiln::random::uniform<float>({4}, test::draw(1, 99), -3, 3);
  const auto x = xh.to(dev), r = rh.to(dev);
  auto o1 = kiln::full<float>({9, 4}, std::nanf(""), dev);
  auto o2 = kiln::full<kiln::half>({9, 4}, kiln::half(1.0f), dev);
  auto o3 = kiln::full<bool>({9, 4}, true, dev);
  const auto before = made();
  kiln::eval(o1 = kiln::maximum(x, r) - r, o2 = kiln::cast<kiln::half>(x * r), o3 = x > r);
  CHECK(made() <= before + 1);
  CHECK(on_host(o1) == kiln::tensor<float>(kiln::maximum(xh, rh) - rh).to_vector());
  CHECK(on_host(o2) == kiln::tensor<kiln::half>(kiln::cast<kiln::half>(xh * rh)).to_vector());
  CHECK(on_host(o3) == kiln::tensor<bool>(xh > rh).to_vector());
  auto t = kiln::zeros<float>({4, 12}, dev);
  auto th = kiln::zeros<float>({4, 12});
  t.slice(1, 0, 12, 3) = x.transpose().narrow(1, 2, 4) + 0.5f;
  th.slice(1, 0, 12, 3) = xh.transpose().narrow(1, 2, 4) + 0.5f;
  CHECK(on_host(t) == th.to_vector());
  t = t * 4.0f - 1.0f;
  th = th * 4.0f - 1.0f;
  CHECK(on_host(t) == th.to_vector());
}

// Blocks freed are handed out again: 20 tensors of 256 KiB, one after another, reserve one.
inline void check_arena_reuse(const kiln::device& dev) {
  kiln::synchronize(dev);
  const auto start = kiln::memory_stats(dev);
  for (int k = 0; k < 20; ++k) {
    const auto t = kiln::zeros<float>({1 << 16}, dev);
    (void)t;
  }
  kiln::synchronize(dev);
  const auto end = kiln::memory_stats(dev);
  CHECK(end.in_use == start.in_use);
  CHECK(end.reserved <= start.reserved + (std::uint64_t{1} << 20));
  kiln::empty_cache(dev);
}

// A captured plan on the device: its passes' and reductions' launches recorded at the
// capture and replayed (the device's batch issues them), bit for bit what the statements
// compute as written, with the arguments' roles traded between calls and a parameter that
// changes (a stage split's temporaries kept by the plan: more views than a kernel binds).
inline void check_plan_replay(const kiln::device& dev) {
  using kiln::tensor;
  const auto body = [](tensor<float>& y, tensor<float>& rows, const tensor<float>& x,
                       const tensor<float>& w, kiln::param<float> s) {
    rows = kiln::sum(x * s, 1);
    y = x * w + s;
    y = kiln::exp(-y * y) + kiln::mean(x * w);
  };
  auto plan = kiln::capture(body, {.name = "device plan"});
  const std::int64_t m = test::draw(3, 40), n = test::draw(2, 300);
  const auto draw = [&](std::int64_t seed) {
    return kiln::random::uniform<float>({m, n}, std::uint64_t(seed), -1, 1, dev);
  };
  const tensor<float> a = draw(test::draw(1, 1000)), b = draw(test::draw(1, 1000));
  tensor<float> y = kiln::zeros<float>({m, n}, dev), rows = kiln::zeros<float>({m}, dev);
  tensor<float> yr = y.clone(), rr = rows.clone();
  for (int i = 0; i < 6; ++i) {
    const float s = i < 3 ? 0.5f : test::uniform<float>(1, -2, 2)[0];
    const tensor<float>& x = i % 2 ? a : b;
    const tensor<float>& w = i % 2 ? b : a;
    plan(y, rows, x, w, s);
    body(yr, rr, x, w, kiln::param<float>(s));
    REQUIRE(y.to_vector() == yr.to_vector());
    REQUIRE(rows.to_vector() == rr.to_vector());
  }
  CHECK(plan.steps() >= 3);
}

} // namespace device_test
