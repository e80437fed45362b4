#pragma once
// Float ops of the catalog against long double references, for test_ops_f32/f64.
#include "support.hpp"

namespace float_ops {

// Two sizes: 37 elements (the scalar tail) and 100003 (xsimd batches, threads).
inline const std::size_t sizes[] = {37, 100003};

// Ulp bounds vs the long double result rounded to T, over the domains below: 4 for most
// functions, 8 for erf and the inverse hyperbolics, 64 for pow (xsimd computes
// exp(y log x), whose error grows with |y log x|); 0 for exactly rounded ops.
template <class T, class K, class R>
void unary(const char* name, K kfn, R rfn, double lo, double hi, std::uint64_t max_ulp) {
  for (std::size_t n : sizes) {
    const auto v = test::uniform<T>(n, lo, hi);
    const auto t = kiln::from(v, kiln::shape{std::int64_t(n)});
    const auto out = kiln::tensor<T>(kfn(t)).to_vector();
    std::uint64_t worst = 0;
    std::size_t at = 0;
    for (std::size_t i = 0; i < n; ++i) {
      // Exact ops (bound 0) are referenced in T itself: rounding a long double result
      // to double would round twice.
      const T ref = max_ulp == 0 ? static_cast<T>(rfn(v[i]))
                                 : static_cast<T>(rfn(static_cast<long double>(v[i])));
      const auto d = test::ulp_distance(out[i], ref);
      if (d > worst) worst = d, at = i;
    }
    INFO(name << " on " << kiln::name(kiln::dtype_of<T>()) << ", n " << n << ": worst " << worst
              << " ulp at x = " << v[at] << " (got " << out[at] << ")");
    CHECK(worst <= max_ulp);
  }
}

template <class T, class K, class R>
void binary(const char* name, K kfn, R rfn, double lo, double hi, double lo2, double hi2,
            std::uint64_t max_ulp) {
  for (std::size_t n : sizes) {
    const auto a = test::uniform<T>(n, lo, hi), b = test::uniform<T>(n, lo2, hi2);
    const auto ta = kiln::from(a, kiln::shape{std::int64_t(n)});
    const auto tb = kiln::from(b, kiln::shape{std::int64_t(n)});
    const auto out = kiln::tensor<T>(kfn(ta, tb)).to_vector();
    std::uint64_t worst = 0;
    std::size_t at = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const T ref =
          max_ulp == 0
              ? static_cast<T>(rfn(a[i], b[i]))
              : static_cast<T>(rfn(static_cast<long double>(a[i]), static_cast<long double>(b[i])));
      const auto d = test::ulp_distance(out[i], ref);
      if (d > worst) worst = d, at = i;
    }
    INFO(name << " on " << kiln::name(kiln::dtype_of<T>()) << ", n " << n << ": worst " << worst
              << " ulp at (" << a[at] << ", " << b[at] << ")");
    CHECK(worst <= max_ulp);
  }
}

template <class T>
void float_math() {
  unary<T>(
      "exp", [](auto& t) { return kiln::exp(t); }, [](auto x) { return std::exp(x); }, -80, 80, 4);
  unary<T>(
      "exp2", [](auto& t) { return kiln::exp2(t); }, [](auto x) { return std::exp2(x); }, -100, 100,
      4);
  unary<T>(
      "expm1", [](auto& t) { return kiln::expm1(t); }, [](auto x) { return std::expm1(x); }, -5, 5,
      4);
  unary<T>(
      "log", [](auto& t) { return kiln::log(t); }, [](auto x) { return std::log(x); }, 1e-6, 1e6,
      4);
  unary<T>(
      "log2", [](auto& t) { return kiln::log2(t); }, [](auto x) { return std::log2(x); }, 1e-6, 1e6,
      4);
  unary<T>(
      "log10", [](auto& t) { return kiln::log10(t); }, [](auto x) { return std::log10(x); }, 1e-6,
      1e6, 4);
  unary<T>(
      "log1p", [](auto& t) { return kiln::log1p(t); }, [](auto x) { return std::log1p(x); }, -0.9,
      10, 4);
  unary<T>(
      "sqrt", [](auto& t) { return kiln::sqrt(t); }, [](auto x) { return std::sqrt(x); }, 0, 1e6,
      0);
  unary<T>(
      "rsqrt", [](auto& t) { return kiln::rsqrt(t); }, [](auto x) { return 1 / std::sqrt(x); },
      1e-3, 1e6, 1);
  unary<T>(
      "cbrt", [](auto& t) { return kiln::cbrt(t); }, [](auto x) { return std::cbrt(x); }, -1e6, 1e6,
      4);
  unary<T>(
      "sin", [](auto& t) { return kiln::sin(t); }, [](auto x) { return std::sin(x); }, -100, 100,
      4);
  unary<T>(
      "cos", [](auto& t) { return kiln::cos(t); }, [](auto x) { return std::cos(x); }, -100, 100,
      4);
  unary<T>(
      "tan", [](auto& t) { return kiln::tan(t); }, [](auto x) { return std::tan(x); }, -1.5, 1.5,
      4);
  unary<T>(
      "asin", [](auto& t) { return kiln::asin(t); }, [](auto x) { return std::asin(x); }, -1, 1, 4);
  unary<T>(
      "acos", [](auto& t) { return kiln::acos(t); }, [](auto x) { return std::acos(x); }, -1, 1, 4);
  unary<T>(
      "atan", [](auto& t) { return kiln::atan(t); }, [](auto x) { return std::atan(x); }, -50, 50,
      4);
  unary<T>(
      "sinh", [](auto& t) { return kiln::sinh(t); }, [](auto x) { return std::sinh(x); }, -20, 20,
      4);
  unary<T>(
      "cosh", [](auto& t) { return kiln::cosh(t); }, [](auto x) { return std::cosh(x); }, -20, 20,
      4);
  unary<T>(
      "tanh", [](auto& t) { return kiln::tanh(t); }, [](auto x) { return std::tanh(x); }, -10, 10,
      4);
  unary<T>(
      "asinh", [](auto& t) { return kiln::asinh(t); }, [](auto x) { return std::asinh(x); }, -1e3,
      1e3, 8);
  unary<T>(
      "acosh", [](auto& t) { return kiln::acosh(t); }, [](auto x) { return std::acosh(x); }, 1, 1e3,
      8);
  unary<T>(
      "atanh", [](auto& t) { return kiln::atanh(t); }, [](auto x) { return std::atanh(x); }, -0.99,
      0.99, 8);
  unary<T>(
      "erf", [](auto& t) { return kiln::erf(t); }, [](auto x) { return std::erf(x); }, -4, 4, 8);
  unary<T>(
      "erfc", [](auto& t) { return kiln::erfc(t); }, [](auto x) { return std::erfc(x); }, -3, 3, 8);
  unary<T>(
      "sigmoid", [](auto& t) { return kiln::sigmoid(t); },
      [](auto x) { return 1 / (1 + std::exp(-x)); }, -30, 30, 4);
  unary<T>(
      "abs", [](auto& t) { return kiln::abs(t); }, [](auto x) { return std::fabs(x); }, -9, 9, 0);
  unary<T>(
      "neg", [](auto& t) { return -t; }, [](auto x) { return -x; }, -9, 9, 0);
  unary<T>(
      "sign", [](auto& t) { return kiln::sign(t); },
      [](auto x) { return decltype(x)((x > 0) - (x < 0)); }, -9, 9, 0);
  unary<T>(
      "floor", [](auto& t) { return kiln::floor(t); }, [](auto x) { return std::floor(x); }, -1e4,
      1e4, 0);
  unary<T>(
      "ceil", [](auto& t) { return kiln::ceil(t); }, [](auto x) { return std::ceil(x); }, -1e4, 1e4,
      0);
  unary<T>(
      "round", [](auto& t) { return kiln::round(t); }, [](auto x) { return std::round(x); }, -1e4,
      1e4, 0);
  unary<T>(
      "trunc", [](auto& t) { return kiln::trunc(t); }, [](auto x) { return std::trunc(x); }, -1e4,
      1e4, 0);
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
      [](auto a, auto b) { return std::pow(a, b); }, 0.01, 10, -8, 8, 64);
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

} // namespace float_ops
