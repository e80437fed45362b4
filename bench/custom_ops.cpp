// Custom ops, fused or not (issue 14, point 7). Three figures, each against its peer measured
// in the same run:
//  1. an expression with a user's op inside, softsign(x) * y + z, evaluated as ONE fused
//     pass (kiln) against the op evaluated on its own into a temporary and then combined
//     (t = softsign(x); r = t * y + z: CuPy's ElementwiseKernel way), and against the same
//     formula in built-in ops; the same for a raw-source op (smoothstep); on the host and on
//     vulkan:0 (lavapipe) where there is one;
//  2. the host cost of one cached evaluation at 16 elements, with the user's op against the
//     same expression in built-in ops (target: at most 1.1x);
//  3. (bench/custom_ops_compile.sh: the C++ compile time of a program with ten custom ops.)
//
// Method: the contenders alternate within each round (so drift hits them alike); the figure
// is the median over rounds, with the interquartile range. Every result is checked against
// a double-precision loop before anything is timed.
//
// Usage: bench_custom_ops [rounds = 31]
#include <kiln/kiln.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace mylib {
namespace ops {
struct softsign : kiln::op_base {
  static constexpr const char* name = "softsign";
  using rule = kiln::rules::floating;
  static constexpr int cost = 10; // in adds: a division and an abs, not a math function
  template <class T>
  static T host(T x) {
    return x / (T(1) + std::fabs(x));
  }
  template <class T>
  static constexpr bool simd_for = std::is_same_v<T, float> || std::is_same_v<T, double>;
  template <class B>
  static B simd(const B& x) {
    return x / (B(1) + xsimd::abs(x));
  }
  static constexpr kiln::spelling device{.any = "($0 / ($T(1) + ($0 < $T(0) ? -$0 : $0)))"};
};
struct smoothstep : kiln::op_base {
  static constexpr const char* name = "smoothstep";
  static constexpr const char* inputs = "x";
  static constexpr const char* output = "y";
  static constexpr const char* body = R"(
  $T t = x < $T(0) ? $T(0) : (x > $T(1) ? $T(1) : x);
  y = t * t * ($T(3) - $T(2) * t);
)";
  using rule = kiln::rules::floating;
  template <class T>
  static T host(T x) {
    const T t = x < T(0) ? T(0) : (x > T(1) ? T(1) : x);
    return t * t * (T(3) - T(2) * t);
  }
};
} // namespace ops
KILN_UNARY_FUNCTION(softsign, ops::softsign)
KILN_UNARY_FUNCTION(smoothstep, ops::smoothstep)
} // namespace mylib

namespace {

using clock_type = std::chrono::steady_clock;

struct stats {
  double median, q1, q3;
};
stats summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return {v[n / 2], v[n / 4], v[(3 * n) / 4]};
}

// Times each contender once per round, alternating, in microseconds per evaluation.
std::vector<stats> race(const std::vector<std::function<void()>>& fs, int rounds, int reps,
                        const kiln::device& dev) {
  std::vector<std::vector<double>> t(fs.size());
  for (auto& f : fs) // warm: kernels compiled, memory pooled
    f(), f();
  kiln::synchronize(dev);
  for (int r = 0; r < rounds; ++r)
    for (std::size_t k = 0; k < fs.size(); ++k) {
      const auto t0 = clock_type::now();
      for (int i = 0; i < reps; ++i)
        fs[k]();
      kiln::synchronize(dev);
      t[k].push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count() /
                     reps);
    }
  std::vector<stats> s;
  for (auto& v : t)
    s.push_back(summarize(v));
  return s;
}

bool close(const kiln::tensor<float>& got, const std::vector<double>& want) {
  const auto g = got.to_vector();
  for (std::size_t i = 0; i < g.size(); ++i)
    if (std::fabs(g[i] - want[i]) > 1e-5 * (1 + std::fabs(want[i]))) {
      std::fprintf(stderr, "wrong value at %zu: %g, want %g\n", i, double(g[i]), want[i]);
      return false;
    }
  return true;
}

int fused_vs_separate(const kiln::device& dev, std::int64_t n, int rounds) {
  const auto xh = kiln::random::uniform<float>({n}, 1, -4, 4).eval();
  const auto yh = kiln::random::uniform<float>({n}, 2, -1, 1).eval();
  const auto zh = kiln::random::uniform<float>({n}, 3, -1, 1).eval();
  const auto x = xh.to(dev), y = yh.to(dev), z = zh.to(dev);
  kiln::tensor<float> r(kiln::shape{n}, dev), t(kiln::shape{n}, dev);
  const auto xv = xh.to_vector(), yv = yh.to_vector(), zv = zh.to_vector();
  const std::size_t m = static_cast<std::size_t>(n);
  std::vector<double> want_soft(m), want_smooth(m);
  for (std::size_t i = 0; i < std::size_t(n); ++i) {
    const double v = xv[i], c = std::fmin(std::fmax(v * 0.25 + 0.5, 0.0), 1.0);
    want_soft[i] = v / (1 + std::fabs(v)) * yv[i] + zv[i];
    want_smooth[i] = c * c * (3 - 2 * c) * yv[i] + zv[i];
  }
  const std::vector<std::function<void()>> soft = {
      [&] { r = mylib::softsign(x) * y + z; }, // fused
      [&] {
        t = mylib::softsign(x);
        r = t * y + z;
      },                                                        // separate
      [&] { r = x / (1.0f + kiln::abs(x)) * y + z; },           // built-in ops, fused
      [&] { r = mylib::smoothstep(x * 0.25f + 0.5f) * y + z; }, // raw op, fused
      [&] {
        t = mylib::smoothstep(x * 0.25f + 0.5f);
        r = t * y + z;
      }}; // raw op, separate
  // Each contender's result, checked before it is timed.
  for (std::size_t k = 0; k < soft.size(); ++k) {
    soft[k]();
    if (!close(r, k < 3 ? want_soft : want_smooth)) return 1;
  }
  const int reps = dev.is_host() ? std::max<int>(1, int((1 << 24) / n)) : 3;
  const auto s = race(soft, rounds, reps, dev);
  const char* names[] = {"softsign(x) * y + z, fused", "softsign(x) alone, then * y + z",
                         "x / (1 + |x|) * y + z (built-in ops)", "smoothstep raw op, fused",
                         "smoothstep raw op alone, then * y + z"};
  for (std::size_t k = 0; k < s.size(); ++k)
    std::printf("| %s | 2^%d | %s | %.1f | %.1f-%.1f | %.2f |\n", dev.str().c_str(),
                int(std::log2(double(n))), names[k], s[k].median, s[k].q1, s[k].q3,
                s[k].median / s[k < 3 ? 0 : 3].median);
  return 0;
}

int small_statement(int rounds) {
  const kiln::device host{};
  const auto a = kiln::random::uniform<float>({16}, 1, -2, 2, host).eval();
  const auto b = kiln::random::uniform<float>({16}, 2, 0, 1, host).eval();
  const auto c = kiln::random::uniform<float>({16}, 3, 0, 1, host).eval();
  kiln::tensor<float> z = kiln::zeros<float>({16}, host);
  const std::vector<std::function<void()>> fs = {[&] {
                                                   for (int i = 0; i < 1000; ++i)
                                                     z = mylib::softsign(a) * b + c;
                                                 },
                                                 [&] {
                                                   for (int i = 0; i < 1000; ++i)
                                                     z = a / (1.0f + kiln::abs(a)) * b + c;
                                                 }};
  const auto s = race(fs, rounds * 4, 20, host);
  std::printf("| host | 16 | softsign(a) * b + c (user's op) | %.1f ns | %.1f-%.1f |\n",
              s[0].median, s[0].q1, s[0].q3);
  std::printf("| host | 16 | a / (1 + |a|) * b + c (built-in ops) | %.1f ns | %.1f-%.1f |\n",
              s[1].median, s[1].q1, s[1].q3);
  std::printf("user's op / built-in ops: %.3f\n", s[0].median / s[1].median);
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 31;
  std::printf(
      "| device | n | expression | median us | IQR | vs fused |\n|---|---|---|---|---|---|\n");
  for (const std::int64_t n : {std::int64_t(1) << 16, std::int64_t(1) << 20, std::int64_t(1) << 24})
    if (fused_vs_separate(kiln::device{}, n, rounds)) return 1;
  for (const auto& d : kiln::devices())
    if (d.available && d.device.kind() == kiln::device_kind::vulkan) {
      for (const std::int64_t n : {std::int64_t(1) << 16, std::int64_t(1) << 20})
        if (fused_vs_separate(d.device, n, std::min(rounds, 11))) return 1;
      break;
    }
  std::printf("\nHost cost of one cached evaluation (ns per statement, 1000 statements per "
              "sample):\n\n| device | n | statement | median | IQR |\n|---|---|---|---|---|\n");
  return small_statement(rounds);
}
