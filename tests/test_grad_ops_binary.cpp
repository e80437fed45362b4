// Arithmetic ops, pow, atan2, where, cast and the zero-gradient ops against central finite
// differences in f64 (see test_grad_ops.cpp).
#include "grad_ops_support.hpp"

using grad_ops::away_from;
using grad_ops::binary;
using grad_ops::n;
using grad_ops::unary;

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
  // maximum, minimum, clamp: operands a random distance apart, never tied, and away from
  // clamp's constant bounds ±2.5 (a kink there too), redrawn until they are.
  auto xs = any(), ys = any();
  auto apart = [](double a, double b) { return std::fabs(a - b) >= 0.05; };
  for (int i = 0; i < n; ++i)
    while (!apart(xs[i], ys[i]) || !apart(std::fabs(xs[i]), 2.5) || !apart(std::fabs(ys[i]), 2.5)) {
      xs[i] = test::uniform<double>(1, -3, 3)[0];
      ys[i] = test::uniform<double>(1, -3, 3)[0];
    }
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
  // where(x > y, ...) jumps where x = y: the operands are drawn apart.
  auto xv = test::uniform<double>(n, -3, 3), yv = test::uniform<double>(n, -3, 3);
  for (int i = 0; i < n; ++i)
    while (std::fabs(xv[i] - yv[i]) < 0.05)
      yv[i] = test::uniform<double>(1, -3, 3)[0];
  // floor, ceil and trunc jump at integers, round at halves: x away from multiples of 0.5.
  auto off = away_from(-3, 3, 0.5, 0.05);
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
