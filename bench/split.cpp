// Whether a host pass gains from a second thread (issue 34, point 8): the heavy expression
// `exp(-a * 0.1f) * sqrt(b) + log(c) * sin(a)` (f32) at 2^12 ... 2^22 elements on 1 thread
// and on 2, in two situations:
//  - interleaved: 500 us of other arithmetic on the calling thread before each call (as other
//    libraries' loops run between kiln's statements), so the helper has gone to sleep;
//  - back to back: the calls follow each other (the helper spins between them).
// 1 and 2 threads alternate round by round; each figure is the median over the rounds of
// the mean time of a call. The target: 2 threads >= 0.98x 1 thread at every size, in both.
// The pool's learnt wake-up and time per unit of work are printed after each size.
//
// Usage: bench_split [rounds = 11] [gap_us = 500]
#include <kiln/kiln.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {
using clk = std::chrono::steady_clock;
volatile double sink;

void other_work(int us) {
  const auto t0 = clk::now();
  double x = 1;
  while (clk::now() - t0 < std::chrono::microseconds(us))
    for (int i = 0; i < 64; ++i)
      x = x * 1.0000001 + 1e-9;
  sink = x;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
} // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 11;
  const int gap = argc > 2 ? std::atoi(argv[2]) : 500;
  auto& pool = kiln::thread_pool::instance();
  std::printf("bench_split: %d rounds, interleaved with %d us of other work\n", rounds, gap);
  std::printf("%9s | %9s %9s %7s | %9s %9s %7s | %9s %9s\n", "n", "inter 1T", "inter 2T", "2T/1T",
              "b2b 1T", "b2b 2T", "2T/1T", "wake us", "ns/unit");
  for (int lg = 12; lg <= 22; lg += 2) {
    const std::int64_t n = std::int64_t{1} << lg;
    const auto a = kiln::random::uniform<float>({n}, 1, 0.5, 2),
               b = kiln::random::uniform<float>({n}, 2, 0.5, 2),
               c = kiln::random::uniform<float>({n}, 3, 0.5, 2);
    kiln::tensor<float> z = kiln::zeros<float>({n});
    const auto call = [&] {
      z = kiln::exp(-a * 0.1f) * kiln::sqrt(b) + kiln::log(c) * kiln::sin(a);
    };
    const int calls =
        static_cast<int>(std::clamp<std::int64_t>((std::int64_t{1} << 23) / n, 10, 400));
    std::vector<double> t[2][2]; // [interleaved?][threads - 1]
    for (int r = 0; r < rounds; ++r)
      for (int inter = 1; inter >= 0; --inter)
        for (int th = 1; th <= 2; ++th) {
          kiln::set_num_threads(th);
          call();
          double sum = 0;
          for (int i = 0; i < calls; ++i) {
            if (inter) other_work(gap);
            const auto t0 = clk::now();
            call();
            sum += std::chrono::duration<double, std::micro>(clk::now() - t0).count();
          }
          t[inter][th - 1].push_back(sum / calls);
        }
    const double i1 = median(t[1][0]), i2 = median(t[1][1]), b1 = median(t[0][0]),
                 b2 = median(t[0][1]);
    std::printf("%9lld | %9.2f %9.2f %6.3fx | %9.2f %9.2f %6.3fx | %9.1f %9.3f\n", (long long)n, i1,
                i2, i1 / i2, b1, b2, b1 / b2, pool.wake_ns() / 1e3, pool.ns_per_work());
  }
  std::printf("(2T/1T: the 1-thread time over the 2-thread one; >= 0.98 is the target)\n");
}
