#pragma once
// Float ops of the catalog against long double references, for test_ops_f32/f64.
#include "support.hpp"

#include <iomanip>
#include <sstream>

namespace float_ops {

template <class T>
inline constexpr std::uint64_t pow_bound = 4; // pow runs on the C library (see ops/math.hpp)

// Two sizes: 37 elements (the scalar tail) and 100003 (xsimd batches, threads).
inline const std::size_t sizes[] = {37, 100003};

// Ulp bounds vs the long double result rounded to T, over the domains below: 4 for most
// functions (pow included), 8 for erf and the inverse hyperbolics; 1 for rsqrt (1/sqrt, two
// roundings); 0 for exactly rounded ops. NaN must be NaN, and infinities and zeros exact,
// the sign of a zero included (C99 Annex F, as numpy gives them).
template <class T>
bool within(T got, T ref, std::uint64_t max_ulp) {
  if (std::isnan(ref) || std::isnan(got)) return std::isnan(ref) && std::isnan(got);
  if (std::isinf(ref) || std::isinf(got) || ref == 0 || got == 0) return test::same_value(got, ref);
  return test::ulp_distance(got, ref) <= max_ulp;
}

// Runs kfn on a tensor of the inputs and compares each element with rfn in long double
// rounded to T; reports the worst element and the first few that miss the bound.
template <class T, class K, class R>
void unary_on(const char* name, K kfn, R rfn, const std::vector<T>& v, std::uint64_t max_ulp) {
  const auto n = std::int64_t(v.size());
  const auto t = kiln::from(v, kiln::shape{n});
  const auto out = kiln::tensor<T>(kfn(t)).to_vector();
  std::uint64_t worst = 0, misses = 0;
  std::size_t at = 0;
  std::ostringstream first;
  for (std::size_t i = 0; i < v.size(); ++i) {
    // Exact ops (bound 0) are referenced in T itself: rounding a long double result
    // to double would round twice.
    const T ref = max_ulp == 0 ? static_cast<T>(rfn(v[i]))
                               : static_cast<T>(rfn(static_cast<long double>(v[i])));
    if (within(out[i], ref, max_ulp)) continue;
    const auto d = test::ulp_distance(out[i], ref);
    if (misses++ < 6)
      first << "\n  x = " << std::setprecision(17) << v[i] << ": got " << out[i] << ", want " << ref
            << " (" << d << " ulp)";
    if (d >= worst) worst = d, at = i;
  }
  INFO(name << " on " << kiln::name(kiln::dtype_of<T>()) << ", n " << n << ": " << misses
            << " outside " << max_ulp << " ulp, worst " << worst << " ulp at x = " << v[at]
            << first.str());
  CHECK(misses == 0);
}

template <class T, class K, class R>
void unary(const char* name, K kfn, R rfn, double lo, double hi, std::uint64_t max_ulp) {
  for (std::size_t n : sizes)
    unary_on<T>(name, kfn, rfn, test::uniform<T>(n, lo, hi), max_ulp);
}

template <class T, class K, class R>
void binary_on(const char* name, K kfn, R rfn, const std::vector<T>& a, const std::vector<T>& b,
               std::uint64_t max_ulp) {
  const auto n = std::int64_t(a.size());
  const auto ta = kiln::from(a, kiln::shape{n});
  const auto tb = kiln::from(b, kiln::shape{n});
  const auto out = kiln::tensor<T>(kfn(ta, tb)).to_vector();
  std::uint64_t worst = 0, misses = 0;
  std::size_t at = 0;
  std::ostringstream first;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const T ref =
        max_ulp == 0
            ? static_cast<T>(rfn(a[i], b[i]))
            : static_cast<T>(rfn(static_cast<long double>(a[i]), static_cast<long double>(b[i])));
    if (within(out[i], ref, max_ulp)) continue;
    const auto d = test::ulp_distance(out[i], ref);
    if (misses++ < 6)
      first << "\n  (" << std::setprecision(17) << a[i] << ", " << b[i] << "): got " << out[i]
            << ", want " << ref << " (" << d << " ulp)";
    if (d >= worst) worst = d, at = i;
  }
  INFO(name << " on " << kiln::name(kiln::dtype_of<T>()) << ", n " << n << ": " << misses
            << " outside " << max_ulp << " ulp, worst " << worst << " ulp at (" << a[at] << ", "
            << b[at] << ")" << first.str());
  CHECK(misses == 0);
}

template <class T, class K, class R>
void binary(const char* name, K kfn, R rfn, double lo, double hi, double lo2, double hi2,
            std::uint64_t max_ulp) {
  for (std::size_t n : sizes)
    binary_on<T>(name, kfn, rfn, test::uniform<T>(n, lo, hi), test::uniform<T>(n, lo2, hi2),
                 max_ulp);
}

// n values with magnitudes log-uniform in [2^lo, 2^hi] (capped at the largest finite T),
// negative half of the time if `both_signs`.
template <class T>
std::vector<T> log_uniform(std::size_t n, double lo, double hi, bool both_signs) {
  std::uniform_real_distribution<double> e(lo, hi);
  std::vector<T> v(n);
  for (auto& x : v) {
    const double m = std::min<double>(std::exp2(e(test::rng())), std::numeric_limits<T>::max());
    x = static_cast<T>(both_signs && test::draw(0, 1) ? -m : m);
  }
  return v;
}

// Inputs that C99 Annex F gives special results for, and ordinary neighbours.
template <class T>
std::vector<T> special_inputs() {
  using L = std::numeric_limits<T>;
  const T big = sizeof(T) == 4 ? T(1e30) : T(1e300);
  std::vector<T> v = {T(0),
                      -T(0),
                      L::infinity(),
                      -L::infinity(),
                      L::quiet_NaN(),
                      L::denorm_min(),
                      -L::denorm_min(),
                      L::min(),
                      -L::min(),
                      L::max(),
                      -L::max(),
                      T(1),
                      T(-1),
                      T(0.5),
                      T(-0.5),
                      T(2),
                      T(-2),
                      T(10),
                      T(-10),
                      T(100),
                      T(-100),
                      big,
                      -big,
                      T(1.5707963267948966),
                      T(3)};
  // Repeated to 37 elements: whole batches and a tail.
  for (std::size_t k = 0; v.size() < 37; ++k)
    v.push_back(v[k]);
  return v;
}

// One entry per unary float op: its name, kiln's function, the reference (called on
// long double, or on T when the bound is 0), the ulp bound, and the main test domain.
#define FLOAT_OP(name, kexpr, rexpr, bound, lo, hi)                                                \
  f(                                                                                               \
      name, [](const auto& t) { return kexpr; }, [](auto x) { return rexpr; }, bound, lo, hi)

template <class T, class F>
void for_each_unary(F&& f) {
  FLOAT_OP("exp", kiln::exp(t), std::exp(x), 4, -80, 80);
  FLOAT_OP("exp2", kiln::exp2(t), std::exp2(x), 4, -100, 100);
  FLOAT_OP("expm1", kiln::expm1(t), std::expm1(x), 4, -5, 5);
  FLOAT_OP("log", kiln::log(t), std::log(x), 4, 1e-6, 1e6);
  FLOAT_OP("log2", kiln::log2(t), std::log2(x), 4, 1e-6, 1e6);
  FLOAT_OP("log10", kiln::log10(t), std::log10(x), 4, 1e-6, 1e6);
  FLOAT_OP("log1p", kiln::log1p(t), std::log1p(x), 4, -0.9, 10);
  FLOAT_OP("sqrt", kiln::sqrt(t), std::sqrt(x), 0, 0, 1e6);
  FLOAT_OP("rsqrt", kiln::rsqrt(t), 1 / std::sqrt(x), 1, 1e-3, 1e6);
  FLOAT_OP("cbrt", kiln::cbrt(t), std::cbrt(x), 4, -1e6, 1e6);
  FLOAT_OP("sin", kiln::sin(t), std::sin(x), 4, -100, 100);
  FLOAT_OP("cos", kiln::cos(t), std::cos(x), 4, -100, 100);
  FLOAT_OP("tan", kiln::tan(t), std::tan(x), 4, -1.5, 1.5);
  FLOAT_OP("asin", kiln::asin(t), std::asin(x), 4, -1, 1);
  FLOAT_OP("acos", kiln::acos(t), std::acos(x), 4, -1, 1);
  FLOAT_OP("atan", kiln::atan(t), std::atan(x), 4, -50, 50);
  FLOAT_OP("sinh", kiln::sinh(t), std::sinh(x), 4, -20, 20);
  FLOAT_OP("cosh", kiln::cosh(t), std::cosh(x), 4, -20, 20);
  FLOAT_OP("tanh", kiln::tanh(t), std::tanh(x), 4, -10, 10);
  FLOAT_OP("asinh", kiln::asinh(t), std::asinh(x), 8, -1e3, 1e3);
  FLOAT_OP("acosh", kiln::acosh(t), std::acosh(x), 8, 1, 1e3);
  FLOAT_OP("atanh", kiln::atanh(t), std::atanh(x), 8, -0.99, 0.99);
  FLOAT_OP("erf", kiln::erf(t), std::erf(x), 8, -4, 4);
  FLOAT_OP("erfc", kiln::erfc(t), std::erfc(x), 8, -3, 3);
  FLOAT_OP("sigmoid", kiln::sigmoid(t), 1 / (1 + std::exp(-x)), 4, -30, 30);
  FLOAT_OP("abs", kiln::abs(t), std::fabs(x), 0, -9, 9);
  FLOAT_OP("neg", -t, -x, 0, -9, 9);
  // sign keeps a zero's sign and NaN (as its SIMD form does; see test_ops.cpp).
  FLOAT_OP("sign", kiln::sign(t), x != x || x == 0 ? x : decltype(x)((x > 0) - (x < 0)), 0, -9, 9);
  FLOAT_OP("floor", kiln::floor(t), std::floor(x), 0, -1e4, 1e4);
  FLOAT_OP("ceil", kiln::ceil(t), std::ceil(x), 0, -1e4, 1e4);
  FLOAT_OP("round", kiln::round(t), std::round(x), 0, -1e4, 1e4);
  FLOAT_OP("trunc", kiln::trunc(t), std::trunc(x), 0, -1e4, 1e4);
}
#undef FLOAT_OP

template <class T>
void float_math() {
  for_each_unary<T>([](const char* name, auto k, auto r, std::uint64_t bound, double lo,
                       double hi) { unary<T>(name, k, r, lo, hi, bound); });
  // Arithmetic rounds once in T, so the reference rounds the exact result once too.
  binary<T>(
      "add", [](auto& a, auto& b) { return a + b; }, [](auto a, auto b) { return a + b; }, -1e3,
      1e3, -1e3, 1e3, 0);
  binary<T>(
      "sub", [](auto& a, auto& b) { return a - b; }, [](auto a, auto b) { return a - b; }, -1e3,
      1e3, -1e3, 1e3, 0);
  binary<T>(
      "mul", [](auto& a, auto& b) { return a * b; }, [](auto a, auto b) { return a * b; }, -1e3,
      1e3, -1e3, 1e3, 0);
  binary<T>(
      "div", [](auto& a, auto& b) { return a / b; }, [](auto a, auto b) { return a / b; }, -1e3,
      1e3, 0.01, 1e3, 0);
  binary<T>(
      "pow", [](auto& a, auto& b) { return kiln::pow(a, b); },
      [](auto a, auto b) { return std::pow(a, b); }, 0.01, 10, -8, 8, pow_bound<T>);
  binary<T>(
      "atan2", [](auto& a, auto& b) { return kiln::atan2(a, b); },
      [](auto a, auto b) { return std::atan2(a, b); }, -5, 5, -5, 5, 4);
  // fmod is exact in IEEE arithmetic, and so is kiln's.
  binary<T>(
      "fmod", [](auto& a, auto& b) { return kiln::fmod(a, b); },
      [](auto a, auto b) { return std::fmod(a, b); }, -100, 100, 0.5, 7, 0);
  binary<T>(
      "mod", [](auto& a, auto& b) { return a % b; }, [](auto a, auto b) { return std::fmod(a, b); },
      -100, 100, -7, -0.5, 0);
  binary<T>(
      "maximum", [](auto& a, auto& b) { return kiln::maximum(a, b); },
      [](auto a, auto b) { return std::max(a, b); }, -5, 5, -5, 5, 0);
  binary<T>(
      "minimum", [](auto& a, auto& b) { return kiln::minimum(a, b); },
      [](auto a, auto b) { return std::min(a, b); }, -5, 5, -5, 5, 0);
  binary<T>(
      "clamp", [](auto& a, auto& b) { return kiln::clamp(a, b, b + T(1)); },
      [](auto a, auto b) { return std::clamp(a, b, decltype(b)(b + 1)); }, -5, 5, -5, 5, 0);
}

// Every unary op at the special inputs (±0, ±Inf, NaN, the extremes of T, ...).
template <class T>
void float_specials() {
  for_each_unary<T>([](const char* name, auto k, auto r, std::uint64_t bound, double, double) {
    unary_on<T>(name, k, r, special_inputs<T>(), bound);
  });
}

// pow, atan2, fmod, %, maximum, minimum on a grid of special pairs.
template <class T>
void binary_specials() {
  const T inf = std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
  auto grid = [](const std::vector<T>& vals, std::vector<T>& a, std::vector<T>& b) {
    for (T x : vals)
      for (T y : vals) {
        a.push_back(x);
        b.push_back(y);
      }
  };
  std::vector<T> a, b;
  grid(
      {T(0), -T(0), T(1), T(-1), T(0.5), T(-0.5), T(2), T(-2), T(3), T(-3), T(2.5), inf, -inf, nan},
      a, b);
  binary_on<T>(
      "pow", [](auto& x, auto& y) { return kiln::pow(x, y); },
      [](auto x, auto y) { return std::pow(x, y); }, a, b, pow_bound<T>);
  a.clear(), b.clear();
  grid({T(0), -T(0), T(1), T(-1), T(2.5), T(-1e-30), inf, -inf, nan}, a, b);
  binary_on<T>(
      "atan2", [](auto& x, auto& y) { return kiln::atan2(x, y); },
      [](auto x, auto y) { return std::atan2(x, y); }, a, b, 4);
  a.clear(), b.clear();
  grid({T(0), -T(0), T(1), T(-1), T(2.5), T(-7.25), inf, -inf, nan}, a, b);
  binary_on<T>(
      "fmod", [](auto& x, auto& y) { return kiln::fmod(x, y); },
      [](auto x, auto y) { return std::fmod(x, y); }, a, b, 0);
  binary_on<T>(
      "mod", [](auto& x, auto& y) { return x % y; }, [](auto x, auto y) { return std::fmod(x, y); },
      a, b, 0);
  a.clear(), b.clear();
  grid({T(0), T(1), T(-2), inf, -inf, nan}, a, b); // no -0: maximum(-0, +0) is either
  auto nan_max = [](auto x, auto y) { return x != x || y != y ? x + y : std::max(x, y); };
  auto nan_min = [](auto x, auto y) { return x != x || y != y ? x + y : std::min(x, y); };
  binary_on<T>(
      "maximum", [](auto& x, auto& y) { return kiln::maximum(x, y); }, nan_max, a, b, 0);
  binary_on<T>(
      "minimum", [](auto& x, auto& y) { return kiln::minimum(x, y); }, nan_min, a, b, 0);
}

// Each function over its whole domain, magnitudes log-uniform from 2^-30 to the largest
// finite value (or to where the result overflows), both signs where defined.
template <class T>
void float_whole_range() {
  constexpr bool f32 = sizeof(T) == 4;
  const double top = f32 ? 128 : 1024;
  const std::size_t n = 100003;
  auto lu = [&](double lo, double hi, bool sym) { return log_uniform<T>(n, lo, hi, sym); };
  for_each_unary<T>(
      [&](std::string_view name, auto k, auto r, std::uint64_t bound, double, double) {
        const char* nm = name.data();
        if (name == "log" || name == "log2" || name == "log10" || name == "sqrt" || name == "rsqrt")
          unary_on<T>(nm, k, r, lu(f32 ? -126 : -1022, top, false), bound);
        else if (name == "cbrt" || name == "atan" || name == "asinh" || name == "floor" ||
                 name == "ceil" || name == "round" || name == "trunc" || name == "abs")
          unary_on<T>(nm, k, r, lu(-30, top, true), bound);
        else if (name == "log1p") {
          unary_on<T>(nm, k, r, lu(-30, top, false), bound);
          auto v = lu(-30, -1e-9, false); // (-1, 0)
          for (auto& x : v)
            x = -x;
          unary_on<T>(nm, k, r, v, bound);
        } else if (name == "expm1" || name == "tanh" || name == "erf" || name == "sin" ||
                   name == "tan" || name == "asin" || name == "atanh")
          unary_on<T>(nm, k, r, lu(-30, name == "sin" || name == "tan" ? 20 : -1e-9, true), bound);
        else if (name == "cos")
          unary_on<T>(nm, k, r, lu(-30, 20, true), bound);
        else if (name == "sinh" || name == "cosh") // up to where the result overflows
          unary_on<T>(nm, k, r, lu(-30, std::log2(f32 ? 89.4 : 710.4), true), bound);
        else if (name == "acosh")
          unary_on<T>(nm, k, r, lu(0, top, false), bound);
        else if (name == "erfc")
          unary_on<T>(nm, k, r, test::uniform<T>(n, -6, f32 ? 10 : 26), bound);
        if (name == "floor" || name == "ceil" || name == "round" || name == "trunc") {
          // Exact halves (round goes away from zero), their neighbours, and values around
          // 2^(digits-1), above which every value is an integer.
          const double edge = std::ldexp(1.0, std::numeric_limits<T>::digits - 1);
          std::uniform_real_distribution<double> big(edge / 4, edge * 4);
          std::vector<T> v;
          for (std::size_t i = 0; i < 20000; ++i) {
            const T half = static_cast<T>(test::draw(-1000000, 1000000) + 0.5);
            const T e = static_cast<T>(big(test::rng()));
            v.insert(v.end(), {half, std::nextafter(half, T(0)), std::nextafter(half, T(2) * half),
                               test::draw(0, 1) ? e : -e});
          }
          unary_on<T>(nm, k, r, v, bound);
        }
      });
}

// An element's result must not depend on the elements beside it: the SIMD kernels take
// per-batch branches (a fast path when every lane is in range), and a lane computed by
// another lane's path may be off by an ulp or more. Each op runs on inputs over its whole
// range, then on the same inputs rotated by a few places (other neighbours, other lane
// positions, another tail), and every element must come out bit for bit the same.
template <class T>
void lane_independent() {
  auto v = special_inputs<T>();
  // Up to 2^10 (f32) and 2^21 (f64): past the trig reduction's bounds (64 pi, 2^18 pi) and
  // the exponentials' overflow, mixed with ordinary lanes.
  const auto wide = log_uniform<T>(4099, -30, sizeof(T) == 4 ? 10 : 21, true);
  v.insert(v.end(), wide.begin(), wide.end());
  for_each_unary<T>([&](const char* name, auto k, auto, std::uint64_t, double, double) {
    const auto once = [&](const std::vector<T>& in) {
      return kiln::tensor<T>(k(kiln::from(in, kiln::shape{std::int64_t(in.size())}))).to_vector();
    };
    const auto base = once(v);
    for (const std::size_t by : {1, 3, 7, 13}) {
      auto w = v;
      std::rotate(w.begin(), w.begin() + by, w.end());
      const auto got = once(w);
      std::size_t differ = 0, first = 0;
      for (std::size_t i = 0; i < v.size(); ++i)
        if (!test::same_value(got[(i + v.size() - by) % v.size()], base[i]) &&
            !(std::isnan(base[i]) && std::isnan(got[(i + v.size() - by) % v.size()])))
          if (differ++ == 0) first = i;
      INFO(name << " on " << kiln::name(kiln::dtype_of<T>()) << ", rotated by " << by << ": "
                << differ << " elements changed, the first at x = " << std::setprecision(17)
                << v[first]);
      CHECK(differ == 0);
    }
  });
}

// The exponentials from deep in gradual underflow up to the edge of overflow: the result
// is finite up to log(max) (88.72 in f32, 709.78 in f64) and subnormal below log(min).
template <class T>
void exp_edges() {
  constexpr bool f32 = sizeof(T) == 4;
  const std::size_t n = 100003;
  for_each_unary<T>([&](std::string_view name, auto k, auto r, std::uint64_t bound, double,
                        double) {
    if (name == "exp") {
      unary_on<T>("exp", k, r, test::uniform<T>(n, f32 ? -103.9 : -745.1, f32 ? 88.72 : 709.78),
                  bound);
      // Past both edges (+0 below, inf above), and the values around the edges.
      unary_on<T>("exp", k, r, test::uniform<T>(n, f32 ? -110 : -760, f32 ? -103 : -740), bound);
      unary_on<T>("exp", k, r, test::uniform<T>(n, f32 ? 88 : 709, f32 ? 95 : 720), bound);
    } else if (name == "exp2")
      unary_on<T>("exp2", k, r, test::uniform<T>(n, f32 ? -149 : -1074, f32 ? 127.99 : 1023.99),
                  bound);
    else if (name == "expm1")
      unary_on<T>("expm1", k, r, test::uniform<T>(n, -40, f32 ? 88.72 : 709.78), bound);
    else if (name == "sigmoid")
      unary_on<T>("sigmoid", k, r, test::uniform<T>(n, f32 ? -103.9 : -745.1, 40), bound);
  });
}

// Subnormal inputs: the results below are normal or subnormal, never garbage.
template <class T>
void subnormal_inputs() {
  constexpr bool f32 = sizeof(T) == 4;
  const std::size_t n = 20011;
  const double lo = f32 ? -149 : -1074, hi = f32 ? -126.01 : -1022.01;
  for_each_unary<T>([&](std::string_view name, auto k, auto r, std::uint64_t bound, double,
                        double) {
    const char* nm = name.data();
    if (name == "log" || name == "log2" || name == "log10" || name == "sqrt" || name == "rsqrt")
      unary_on<T>(nm, k, r, log_uniform<T>(n, lo, hi, false), bound);
    else if (name == "cbrt" || name == "sin" || name == "tan" || name == "tanh" || name == "sinh" ||
             name == "asinh" || name == "atanh" || name == "atan" || name == "asin" ||
             name == "erf" || name == "expm1" || name == "log1p" || name == "abs" ||
             name == "floor" || name == "ceil" || name == "round" || name == "trunc")
      unary_on<T>(nm, k, r, log_uniform<T>(n, lo, hi, true), bound);
  });
}

// pow beyond the main domain: bases near 1 with large exponents (f32: the documented
// 64 ulp bound), and large and small bases with moderate ones.
template <class T>
void pow_wide() {
  const std::size_t n = 100003;
  auto k = [](auto& a, auto& b) { return kiln::pow(a, b); };
  auto r = [](auto a, auto b) { return std::pow(a, b); };
  binary_on<T>("pow", k, r, test::uniform<T>(n, 0.5, 2), test::uniform<T>(n, -100, 100),
               pow_bound<T>);
  binary_on<T>("pow", k, r, test::uniform<T>(n, 1e-3, 1e3), test::uniform<T>(n, -2, 2),
               pow_bound<T>);
  // Negative bases with integer exponents.
  auto y = test::uniform<T>(n, -20, 20);
  for (auto& v : y)
    v = std::round(v);
  binary_on<T>("pow", k, r, test::uniform<T>(n, -3, -0.3), y, pow_bound<T>);
}

} // namespace float_ops
