// Every differentiable op of the catalog against central finite differences in f64, at
// random points of its domain (drawn per run; Catch prints the seed): f = sum(w * op(x)),
// with random weights w, so that d f / d x_i = w_i op'(x_i).
#include "grad_support.hpp"

namespace {

constexpr int n = 37; // not a multiple of a SIMD width: the tail is checked too
constexpr double tol = 1e-6;

template <class K, class S>
void unary(const char* name, double lo, double hi, K kfn, S sfn) {
  const auto xv = test::uniform<double>(n, lo, hi), wv = test::uniform<double>(n, -2, 2);
  const auto x = grad_test::from(xv, {n}), w = grad_test::from(wv, {n});
  auto [dx] = kiln::grad(kiln::sum(w * kfn(x)), x);
  std::vector<double> want(n);
  for (int i = 0; i < n; ++i)
    want[i] = wv[i] * grad_test::fd1([&](double v) { return sfn(v); }, xv[i]);
  grad_test::check_close(kiln::tensor<double>(dx).to_vector(), want, tol, name);
}

template <class K, class S>
void binary(const char* name, std::vector<double> xv, std::vector<double> yv, K kfn, S sfn) {
  const auto wv = test::uniform<double>(n, -2, 2);
  const auto x = grad_test::from(xv, {n}), y = grad_test::from(yv, {n}),
             w = grad_test::from(wv, {n});
  auto [dx, dy] = kiln::grad(kiln::sum(w * kfn(x, y)), x, y);
  std::vector<double> wx(n), wy(n);
  for (int i = 0; i < n; ++i) {
    wx[i] = wv[i] * grad_test::fd1([&](double v) { return sfn(v, yv[i]); }, xv[i]);
    wy[i] = wv[i] * grad_test::fd1([&](double v) { return sfn(xv[i], v); }, yv[i]);
  }
  grad_test::check_close(kiln::tensor<double>(dx).to_vector(), wx, tol,
                         std::string(name) + " d/dx");
  grad_test::check_close(kiln::tensor<double>(dy).to_vector(), wy, tol,
                         std::string(name) + " d/dy");
}

// Values in [lo, hi] at least `gap` away from every multiple of `step` (for ops with jumps
// or kinks there, where finite differences mean nothing).
std::vector<double> away_from(double lo, double hi, double step, double gap) {
  auto v = test::uniform<double>(n, lo, hi);
  for (auto& x : v)
    while (std::fabs(x / step - std::round(x / step)) * step < gap)
      x = test::uniform<double>(1, lo, hi)[0];
  return v;
}

} // namespace

TEST_CASE("grad of exp and log ops against finite differences", "[grad]") {
  unary(
      "exp", -3, 3, [](auto x) { return kiln::exp(x); }, [](double v) { return std::exp(v); });
  unary(
      "exp2", -3, 3, [](auto x) { return kiln::exp2(x); }, [](double v) { return std::exp2(v); });
  unary(
      "expm1", -3, 3, [](auto x) { return kiln::expm1(x); },
      [](double v) { return std::expm1(v); });
  unary(
      "log", 0.2, 5, [](auto x) { return kiln::log(x); }, [](double v) { return std::log(v); });
  unary(
      "log2", 0.2, 5, [](auto x) { return kiln::log2(x); }, [](double v) { return std::log2(v); });
  unary(
      "log10", 0.2, 5, [](auto x) { return kiln::log10(x); },
      [](double v) { return std::log10(v); });
  unary(
      "log1p", -0.7, 5, [](auto x) { return kiln::log1p(x); },
      [](double v) { return std::log1p(v); });
  unary(
      "sqrt", 0.2, 5, [](auto x) { return kiln::sqrt(x); }, [](double v) { return std::sqrt(v); });
  unary(
      "rsqrt", 0.2, 5, [](auto x) { return kiln::rsqrt(x); },
      [](double v) { return 1 / std::sqrt(v); });
  unary(
      "cbrt", 0.2, 5, [](auto x) { return kiln::cbrt(x); }, [](double v) { return std::cbrt(v); });
  unary(
      "cbrt of negatives", -5, -0.2, [](auto x) { return kiln::cbrt(x); },
      [](double v) { return std::cbrt(v); });
}

TEST_CASE("grad of trigonometric and hyperbolic ops against finite differences", "[grad]") {
  unary(
      "sin", -4, 4, [](auto x) { return kiln::sin(x); }, [](double v) { return std::sin(v); });
  unary(
      "cos", -4, 4, [](auto x) { return kiln::cos(x); }, [](double v) { return std::cos(v); });
  unary(
      "tan", -1.2, 1.2, [](auto x) { return kiln::tan(x); }, [](double v) { return std::tan(v); });
  unary(
      "asin", -0.9, 0.9, [](auto x) { return kiln::asin(x); },
      [](double v) { return std::asin(v); });
  unary(
      "acos", -0.9, 0.9, [](auto x) { return kiln::acos(x); },
      [](double v) { return std::acos(v); });
  unary(
      "atan", -3, 3, [](auto x) { return kiln::atan(x); }, [](double v) { return std::atan(v); });
  unary(
      "sinh", -3, 3, [](auto x) { return kiln::sinh(x); }, [](double v) { return std::sinh(v); });
  unary(
      "cosh", -3, 3, [](auto x) { return kiln::cosh(x); }, [](double v) { return std::cosh(v); });
  unary(
      "tanh", -3, 3, [](auto x) { return kiln::tanh(x); }, [](double v) { return std::tanh(v); });
  unary(
      "asinh", -3, 3, [](auto x) { return kiln::asinh(x); },
      [](double v) { return std::asinh(v); });
  unary(
      "acosh", 1.2, 5, [](auto x) { return kiln::acosh(x); },
      [](double v) { return std::acosh(v); });
  unary(
      "atanh", -0.9, 0.9, [](auto x) { return kiln::atanh(x); },
      [](double v) { return std::atanh(v); });
  unary(
      "sigmoid", -6, 6, [](auto x) { return kiln::sigmoid(x); },
      [](double v) { return 1 / (1 + std::exp(-v)); });
  unary(
      "erf", -2.5, 2.5, [](auto x) { return kiln::erf(x); }, [](double v) { return std::erf(v); });
  unary(
      "erfc", -2.5, 2.5, [](auto x) { return kiln::erfc(x); },
      [](double v) { return std::erfc(v); });
}

TEST_CASE("grad of arithmetic ops against finite differences", "[grad]") {
  auto any = [] { return test::uniform<double>(n, -3, 3); };
  binary(
      "add", any(), any(), [](auto x, auto y) { return x + y; },
      [](double a, double b) { return a + b; });
  binary(
      "sub", any(), any(), [](auto x, auto y) { return x - y; },
      [](double a, double b) { return a - b; });
  binary(
      "mul", any(), any(), [](auto x, auto y) { return x * y; },
      [](double a, double b) { return a * b; });
  binary(
      "div", any(), away_from(-3, 3, 1e9, 0.3), [](auto x, auto y) { return x / y; },
      [](double a, double b) { return a / b; });
  unary(
      "neg", -3, 3, [](auto x) { return -x; }, [](double v) { return -v; });
  // |x| and sign: away from 0, where they are smooth.
  const auto off0 = away_from(-3, 3, 1e9, 0.05);
  binary(
      "abs", off0, any(), [](auto x, auto y) { return kiln::abs(x) * y; },
      [](double a, double b) { return std::fabs(a) * b; });
  binary(
      "sign (zero gradient)", off0, any(), [](auto x, auto y) { return kiln::sign(x) * y; },
      [](double a, double b) { return (a > 0 ? 1.0 : -1.0) * b; });
  // maximum, minimum, clamp: operands a random distance apart, never tied.
  auto xs = any(), ys = any();
  for (int i = 0; i < n; ++i)
    if (std::fabs(xs[i] - ys[i]) < 0.05) ys[i] = xs[i] + (i % 2 ? 0.5 : -0.5);
  binary(
      "maximum", xs, ys, [](auto x, auto y) { return kiln::maximum(x, y); },
      [](double a, double b) { return std::max(a, b); });
  binary(
      "minimum", xs, ys, [](auto x, auto y) { return kiln::minimum(x, y); },
      [](double a, double b) { return std::min(a, b); });
  binary(
      "clamp of x and lo", xs, ys, [](auto x, auto y) { return kiln::clamp(x, y, 2.5); },
      [](double a, double b) { return std::min(std::max(a, b), 2.5); });
  binary(
      "clamp of x and hi", xs, ys, [](auto x, auto y) { return kiln::clamp(x, -2.5, y); },
      [](double a, double b) { return std::min(std::max(a, -2.5), b); });
  // % and fmod away from their jumps (where x / y is an integer).
  std::vector<double> m = test::uniform<double>(n, 0.7, 2), q(n);
  for (int i = 0; i < n; ++i) {
    q[i] = test::uniform<double>(1, -3.8, 3.8)[0];
    if (std::fabs(q[i] - std::round(q[i])) < 0.05) q[i] += 0.3;
    q[i] *= m[i];
  }
  binary(
      "mod", q, m, [](auto x, auto y) { return x % y; },
      [](double a, double b) { return std::fmod(a, b); });
  binary(
      "fmod", q, m, [](auto x, auto y) { return kiln::fmod(x, y); },
      [](double a, double b) { return std::fmod(a, b); });
}

TEST_CASE("grad of pow and atan2 against finite differences", "[grad]") {
  binary(
      "pow", test::uniform<double>(n, 0.2, 3), test::uniform<double>(n, -2.5, 2.5),
      [](auto x, auto y) { return kiln::pow(x, y); },
      [](double a, double b) { return std::pow(a, b); });
  auto ys = test::uniform<double>(n, -2, 2), xs = test::uniform<double>(n, -2, 2);
  for (int i = 0; i < n; ++i)
    if (std::hypot(xs[i], ys[i]) < 0.3 || (xs[i] < 0 && std::fabs(ys[i]) < 0.1)) xs[i] = 1.0;
  binary(
      "atan2", ys, xs, [](auto y, auto x) { return kiln::atan2(y, x); },
      [](double a, double b) { return std::atan2(a, b); });
}

TEST_CASE("grad through where, cast and the zero-gradient ops", "[grad]") {
  const auto xv = test::uniform<double>(n, -3, 3), yv = test::uniform<double>(n, -3, 3);
  auto off = away_from(-3, 3, 1.0, 0.05); // floor & co. are flat between integers
  binary(
      "where", xv, yv, [](auto x, auto y) { return kiln::where(x > y, x * x, kiln::sin(y)); },
      [](double a, double b) { return a > b ? a * a : std::sin(b); });
  binary(
      "cast through f32 and back", xv, yv,
      [](auto x, auto y) { return kiln::cast<double>(kiln::cast<float>(x)) * y; },
      [](double a, double b) { return a * b; }); // cast's derivative is 1, not a rounding step
  binary(
      "floor, ceil, round, trunc", off, yv,
      [](auto x, auto y) {
        return (kiln::floor(x) + kiln::ceil(x) + kiln::round(x) + kiln::trunc(x)) * y + x;
      },
      [](double a, double b) {
        return (std::floor(a) + std::ceil(a) + std::round(a) + std::trunc(a)) * b + a;
      });
  binary(
      "comparisons and logical ops", xv, yv,
      [](auto x, auto y) {
        return kiln::cast<double>((x < y) || !(x == y)) * y + kiln::cast<double>(isnan(x));
      },
      [](double a, double b) { return double((a < b) || !(a == b)) * b; });
}
