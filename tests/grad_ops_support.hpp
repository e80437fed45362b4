#pragma once
// The op tests' shared part: f = sum(w * op(x)) (or op(x, y)) with random weights w, so that
// d f / d x_i = w_i op'(x_i), checked against central finite differences of the scalar
// function in f64.
#include "grad_support.hpp"

namespace grad_ops {

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
inline std::vector<double> away_from(double lo, double hi, double step, double gap) {
  auto v = test::uniform<double>(n, lo, hi);
  for (auto& x : v)
    while (std::fabs(x / step - std::round(x / step)) * step < gap)
      x = test::uniform<double>(1, lo, hi)[0];
  return v;
}

} // namespace grad_ops
