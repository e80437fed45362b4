#pragma once
// Checks of a GPU backend's shared body that every execution test binary runs on its device
// (test_cuda_exec.cpp, test_metal_exec.cpp): single-flight compiles and the caching arena.
#include "support.hpp"

#include <thread>

namespace device_test {

// Threads needing one new kernel at once share one compile.
inline void check_single_flight(const kiln::device& dev) {
  const auto x = kiln::random::uniform<float>({1 << 12}, 4, 1, 3, dev);
  const auto before = kiln::jit::compile_count().load();
  std::vector<std::thread> ts;
  for (int t = 0; t < 6; ++t)
    ts.emplace_back([&] { (void)kiln::tensor<float>(kiln::cbrt(x) + kiln::log1p(x)).at({0}); });
  for (auto& t : ts)
    t.join();
  CHECK(kiln::jit::compile_count().load() <= before + 1);
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
