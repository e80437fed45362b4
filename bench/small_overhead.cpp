// Host cost of a cached evaluation on a tiny tensor: `z = a * b + c` at 16 f32 elements,
// in ns per statement (building the expression nodes, checking shapes, devices and
// aliasing, and the one fused pass). At 16 elements the arithmetic is a few ns, so this
// is the per-statement overhead that checks added at node build (issue 11, point 5) would
// show up in.
//
// Method: 2000 warm-up statements, then `rounds` rounds of `reps` statements each timed
// with steady_clock; the figure is the median of the per-round means (also min and max).
// Pin to one core for a steadier figure: taskset -c 1 ./bench_small_overhead
//
// Usage: bench_small_overhead [rounds = 201 [reps = 20000]]
#include <kiln/kiln.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 201;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 20000;
  const kiln::device host{};
  const auto a = kiln::random::uniform<float>({16}, 1, 0, 1, host);
  const auto b = kiln::random::uniform<float>({16}, 2, 0, 1, host);
  const auto c = kiln::random::uniform<float>({16}, 3, 0, 1, host);
  kiln::tensor<float> z = kiln::zeros<float>({16}, host);
  for (int i = 0; i < 2000; ++i)
    z = a * b + c;
  std::vector<double> ns;
  for (int r = 0; r < rounds; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i)
      z = a * b + c;
    const auto t1 = std::chrono::steady_clock::now();
    ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / reps);
  }
  // The result must be right, or the figure means nothing.
  const auto av = a.to_vector(), bv = b.to_vector(), cv = c.to_vector(), zv = z.to_vector();
  for (std::size_t i = 0; i < zv.size(); ++i)
    if (zv[i] != av[i] * bv[i] + cv[i] && std::abs(zv[i] - (av[i] * bv[i] + cv[i])) > 1e-6f) {
      std::fprintf(stderr, "wrong result at %zu\n", i);
      return 1;
    }
  std::sort(ns.begin(), ns.end());
  std::printf("z = a * b + c, 16 f32: median %.1f ns/statement (min %.1f, max %.1f; %d rounds "
              "of %d)\n",
              ns[ns.size() / 2], ns.front(), ns.back(), rounds, reps);
  return 0;
}
