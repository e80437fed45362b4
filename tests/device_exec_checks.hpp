#pragma once
// What the execution test binaries share (test_cuda_exec.cpp, test_metal_exec.cpp): counts of
// kernels made, a balanced sum of many leaves, and the checks of the backends' shared body
// every device runs: single-flight compiles and the caching arena.
#include "support.hpp"

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

} // namespace device_test
