// Host cost of a cached evaluation on a tiny tensor: `z = a * b + c` at 16 f32 elements,
// and a reduction read back, `s = sum(a * b, 0).item()`, in ns per statement (building the
// expression nodes, checking shapes, devices and aliasing, and the one fused pass). At 16 elements
// the arithmetic is a few ns, so this is the per-statement overhead that checks added at node build
// (issue 11, point 5) would show up in.
//
// Method: 2000 warm-up statements, then `rounds` rounds of `reps` statements each timed
// with steady_clock; the figure is the median of the per-round means (also min and max).
// Pin to one core for a steadier figure: taskset -c 1 ./bench_small_overhead
//
// Usage: bench_small_overhead [rounds = 201 [reps = 20000]]
#include <kiln/kiln.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
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
  // The median, min and max of `rounds` rounds' mean ns per statement.
  const auto time = [&](auto&& statement) {
    std::vector<double> ns;
    for (int r = 0; r < rounds; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < reps; ++i)
        statement();
      const auto t1 = std::chrono::steady_clock::now();
      ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / reps);
    }
    std::sort(ns.begin(), ns.end());
    return std::array<double, 3>{ns[ns.size() / 2], ns.front(), ns.back()};
  };
  const auto t = time([&] { z = a * b + c; });
  // A reduction statement read back on the host: the node, its axis, the fused pass, item().
  double s = 0;
  for (int i = 0; i < 2000; ++i)
    s = kiln::sum(a * b, 0).item();
  const auto tr = time([&] { s = kiln::sum(a * b, 0).item(); });
  // The results must be right, or the figures mean nothing.
  const auto av = a.to_vector(), bv = b.to_vector(), cv = c.to_vector(), zv = z.to_vector();
  double want = 0;
  for (std::size_t i = 0; i < zv.size(); ++i) {
    if (zv[i] != av[i] * bv[i] + cv[i] && std::abs(zv[i] - (av[i] * bv[i] + cv[i])) > 1e-6f) {
      std::fprintf(stderr, "wrong result at %zu\n", i);
      return 1;
    }
    want += double(av[i]) * double(bv[i]);
  }
  if (!(std::abs(s - want) <= 1e-5 * (1 + std::abs(want)))) {
    std::fprintf(stderr, "wrong sum %.9g, want %.9g\n", s, want);
    return 1;
  }
  std::printf("z = a * b + c, 16 f32: median %.1f ns/statement (min %.1f, max %.1f; %d rounds "
              "of %d)\n",
              t[0], t[1], t[2], rounds, reps);
  std::printf("s = sum(a * b, 0).item(), 16 f32: median %.1f ns/statement (min %.1f, max %.1f)\n",
              tr[0], tr[1], tr[2]);
  return 0;
}
