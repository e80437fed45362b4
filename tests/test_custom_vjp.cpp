// Composites with their own derivative (kiln::custom_vjp, JAX's custom_vjp): the forward is
// the composite's expression, fused as it is; grad, vjp, jvp and second order go through the
// given rule. Checked against finite differences and closed forms in double precision, on
// the host and vulkan:0, including where the composite's own ops would give no usable
// gradient (a norm at 0, a log-sum-exp at 1000, round's zero gradient).
#include "grad_support.hpp"
#include "vulkan_support.hpp"

#include "kiln/kiln.hpp"

#include <algorithm>
#include <cmath>

namespace mylib {

// softplus(x) = log(1 + e^x), computed without overflow; its derivative sigmoid(x).
struct softplus_rule {
  template <class D, class G, class Out, class X>
  static auto vjp(const G& g, const Out&, const X& x) {
    return D::tuple(D::mul(g, kiln::sigmoid(x)));
  }
};
template <class X>
auto softplus(const X& x) {
  return kiln::custom_vjp(
      softplus_rule{},
      [](const auto& v) { return kiln::maximum(v, 0.0) + kiln::log1p(kiln::exp(-kiln::abs(v))); },
      x);
}

// log(sum(exp(x))) over the last axis, the max taken out; the rule is the softmax
// exp(x - out), which uses the composite's own value (and so, differentiated again, the
// rule again).
struct lse_rule {
  template <class D, class G, class Out, class X>
  static auto vjp(const G& g, const Out& out, const X& x) {
    return D::tuple(D::mul(g, kiln::exp(x - out)));
  }
};
template <class X>
auto lse(const X& x) {
  return kiln::custom_vjp(
      lse_rule{},
      [](const auto& v) {
        const auto m = kiln::max(v, {-1}, true);
        return kiln::log(kiln::sum(kiln::exp(v - m), {-1}, true)) + m;
      },
      x);
}

// |x|_2 with the subgradient 0 at x = 0 (the composite's own ops give 0/0 there).
struct safe_norm_rule {
  template <class D, class G, class Out, class X>
  static auto vjp(const G& g, const Out& n, const X& x) {
    return D::tuple(D::mul(g, kiln::where(n != 0.0, x / n, 0.0)));
  }
};
template <class X>
auto safe_norm(const X& x) {
  return kiln::custom_vjp(
      safe_norm_rule{}, [](const auto& v) { return kiln::sqrt(kiln::sum(v * v)); }, x);
}

// round(x) with the identity's gradient (straight-through estimator).
struct straight_through {
  template <class D, class G, class Out, class X>
  static auto vjp(const G& g, const Out&, const X&) {
    return D::tuple(g);
  }
};
template <class X>
auto st_round(const X& x) {
  return kiln::custom_vjp(
      straight_through{}, [](const auto& v) { return kiln::round(v); }, x);
}

// The identity whose gradient is clipped to [-c, c]: a rule with state.
struct clip_grad {
  double c;
  template <class D, class G, class Out, class X>
  auto vjp(const G& g, const Out&, const X&) const {
    return D::tuple(kiln::clamp(D::expr(g), -c, c));
  }
};

// x * y, whose rule gives only x a gradient (y is held constant: D::zero).
struct only_first {
  template <class D, class G, class Out, class X, class Y>
  static auto vjp(const G& g, const Out&, const X&, const Y& y) {
    return D::tuple(D::mul(g, y), D::zero);
  }
};

// A broken rule: an adjoint of shape {3, 2}, whatever its argument's shape.
struct wrong_shape {
  template <class D, class G, class Out, class X>
  static auto vjp(const G&, const Out&, const X&) {
    return D::tuple(kiln::ones<double>({3, 2}));
  }
};

} // namespace mylib

namespace {

double softplus_ref(double x) { return std::max(x, 0.0) + std::log1p(std::exp(-std::fabs(x))); }
double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }

std::vector<double> values(const kiln::tensor<double>& t) { return t.to_vector(); }

} // namespace

TEST_CASE("custom_vjp: softplus's value fuses as its expression, its gradient is the rule's, "
          "finite at |x| = 1000",
          "[custom_vjp][grad]") {
  constexpr int n = 41;
  auto xv = test::uniform<double>(n, -8, 8);
  xv[0] = 1000, xv[1] = -1000, xv[2] = 0;
  const auto wv = test::uniform<double>(n, -2, 2);
  const auto x = kiln::from(xv, kiln::shape{n}), w = kiln::from(wv, kiln::shape{n});
  const auto sp = mylib::softplus(x);
  // What evaluators see: the composite's own expression type, nothing added.
  using node = std::remove_cvref_t<decltype(sp)>;
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(materialize(sp))>,
                               std::remove_cvref_t<decltype(materialize(sp.fwd))>>);
  static_assert(kiln::detail::plain_tree<decltype(sp.fwd)>);
  static_assert(kiln::expression<node>);
  const auto v = values(sp * 2.0);
  for (int i = 0; i < n; ++i)
    CHECK(v[std::size_t(i)] == Approx(2 * softplus_ref(xv[std::size_t(i)])).epsilon(1e-14));
  auto [dx] = kiln::grad(kiln::sum(w * sp), x);
  const auto got = values(dx);
  std::vector<double> want(n);
  for (int i = 0; i < n; ++i)
    want[std::size_t(i)] = wv[std::size_t(i)] * sigmoid_ref(xv[std::size_t(i)]);
  grad_test::check_close(got, want, 1e-14, "softplus' = sigmoid");
  // Against finite differences where those are accurate (away from the huge values).
  const auto fd = grad_test::fd_grad(kiln::sum(w * mylib::softplus(x)), x);
  grad_test::check_close(std::vector<double>(got.begin() + 3, got.end()),
                         std::vector<double>(fd.begin() + 3, fd.end()), 1e-8, "softplus vs FD");
}

TEST_CASE("custom_vjp: second order, vjp and jvp go through the rule", "[custom_vjp][grad]") {
  constexpr int n = 29;
  const auto xv = test::uniform<double>(n, -4, 4), wv = test::uniform<double>(n, -2, 2),
             dv = test::uniform<double>(n, -1, 1);
  const auto x = kiln::from(xv, kiln::shape{n}), w = kiln::from(wv, kiln::shape{n}),
             dxv = kiln::from(dv, kiln::shape{n});
  // grad of sum(softplus'): sigmoid' = s (1 - s), through the rule's kiln::sigmoid.
  auto [d1] = kiln::grad(kiln::sum(mylib::softplus(x)), x);
  auto [d2] = kiln::grad(kiln::sum(d1), x);
  std::vector<double> want2(n);
  for (int i = 0; i < n; ++i) {
    const double s = sigmoid_ref(xv[std::size_t(i)]);
    want2[std::size_t(i)] = s * (1 - s);
  }
  grad_test::check_close(values(d2), want2, 1e-13, "softplus''");
  // vjp with a seed, and jvp (J dx = sigmoid(x) dx).
  auto [v] = kiln::vjp(mylib::softplus(x), w, x);
  const auto j = kiln::jvp(mylib::softplus(x), kiln::tangent<double>{x, dxv}).eval();
  std::vector<double> wantv(n), wantj(n);
  for (int i = 0; i < n; ++i) {
    const auto k = std::size_t(i);
    wantv[k] = wv[k] * sigmoid_ref(xv[k]);
    wantj[k] = dv[k] * sigmoid_ref(xv[k]);
  }
  grad_test::check_close(values(v), wantv, 1e-14, "vjp");
  grad_test::check_close(values(j), wantj, 1e-14, "jvp");
}

TEST_CASE("custom_vjp: a rule using the composite's value, a reduction inside, first and "
          "second order against finite differences at x ~ 1000",
          "[custom_vjp][grad]") {
  constexpr int rows = 3, cols = 7;
  auto xv = test::uniform<double>(rows * cols, -3, 3);
  for (int c = 0; c < cols; ++c) // a row far out, where exp(x) overflows a double
    xv[std::size_t(cols + c)] += 1000;
  const auto wv = test::uniform<double>(rows, -2, 2);
  const auto x = kiln::from(xv, kiln::shape{rows, cols});
  const auto w = kiln::from(wv, kiln::shape{rows, 1});
  const auto f = kiln::sum(w * mylib::lse(x));
  auto [g] = kiln::grad(f, x);
  const auto got = values(g);
  std::vector<double> soft(rows * cols), want(rows * cols), want2(rows * cols);
  for (int r = 0; r < rows; ++r) {
    double m = -INFINITY, s = 0;
    for (int c = 0; c < cols; ++c)
      m = std::max(m, xv[std::size_t(r * cols + c)]);
    for (int c = 0; c < cols; ++c)
      s += std::exp(xv[std::size_t(r * cols + c)] - m);
    for (int c = 0; c < cols; ++c) {
      const auto k = std::size_t(r * cols + c);
      soft[k] = std::exp(xv[k] - m) / s;
      want[k] = wv[std::size_t(r)] * soft[k];
    }
  }
  grad_test::check_close(got, want, 1e-13, "lse' = softmax");
  CHECK(std::all_of(got.begin(), got.end(), [](double v) { return std::isfinite(v); }));
  // Second order: d/dx_j of sum_i u_i softmax_i = softmax_j (u_j - sum_i u_i softmax_i), with
  // the rule's `out` differentiated through the rule again.
  const auto uv = test::uniform<double>(rows * cols, -1, 1);
  const auto u = kiln::from(uv, kiln::shape{rows, cols});
  auto [g1] = kiln::grad(kiln::sum(mylib::lse(x)), x);
  auto [h] = kiln::grad(kiln::sum(u * g1), x);
  for (int r = 0; r < rows; ++r) {
    double dot = 0;
    for (int c = 0; c < cols; ++c)
      dot += uv[std::size_t(r * cols + c)] * soft[std::size_t(r * cols + c)];
    for (int c = 0; c < cols; ++c) {
      const auto k = std::size_t(r * cols + c);
      want2[k] = soft[k] * (uv[k] - dot);
    }
  }
  grad_test::check_close(values(h), want2, 1e-12, "lse'' u");
  // And the gradient against finite differences (rows near 0 only: at 1000 the step is lost).
  std::vector<double> near0(xv.begin(), xv.begin() + cols);
  const auto x0 = kiln::from(near0, kiln::shape{cols});
  auto [g0] = kiln::grad(kiln::sum(mylib::lse(x0)), x0);
  grad_test::check_close(values(g0), grad_test::fd_grad(kiln::sum(mylib::lse(x0)), x0), 1e-8,
                         "lse vs FD");
}

TEST_CASE("custom_vjp: the norm's subgradient at 0, a straight-through round, a clipped "
          "gradient, an argument the rule holds constant",
          "[custom_vjp][grad]") {
  constexpr int n = 17;
  const auto xv = test::uniform<double>(n, -2, 2), wv = test::uniform<double>(n, -3, 3),
             yv = test::uniform<double>(n, -2, 2);
  const auto x = kiln::from(xv, kiln::shape{n}), w = kiln::from(wv, kiln::shape{n}),
             y = kiln::from(yv, kiln::shape{n});
  {
    auto [g] = kiln::grad(mylib::safe_norm(x), x);
    grad_test::check_close(values(g), grad_test::fd_grad(mylib::safe_norm(x), x), 1e-8, "norm");
    const auto z = kiln::from(std::vector<double>(n, 0.0), kiln::shape{n});
    auto [g0] = kiln::grad(mylib::safe_norm(z), z);
    CHECK(values(g0) == std::vector<double>(n, 0.0));
    auto [plain] = kiln::grad(kiln::sqrt(kiln::sum(z * z)), z); // what the ops alone give
    CHECK(std::isnan(values(plain)[0]));
  }
  {
    auto [g] = kiln::grad(kiln::sum(w * mylib::st_round(x * 3.0)), x);
    std::vector<double> want(n);
    for (int i = 0; i < n; ++i)
      want[std::size_t(i)] = 3 * wv[std::size_t(i)];
    grad_test::check_close(values(g), want, 1e-15, "straight-through");
    CHECK(values(mylib::st_round(x * 3.0).eval()) == values(kiln::round(x * 3.0).eval()));
  }
  {
    const double c = 1.25;
    auto [g] = kiln::grad(
        kiln::sum(w * kiln::custom_vjp(
                          mylib::clip_grad{c}, [](const auto& v) { return v * 1.0; }, x)),
        x);
    std::vector<double> want(n);
    for (int i = 0; i < n; ++i)
      want[std::size_t(i)] = std::clamp(wv[std::size_t(i)], -c, c);
    grad_test::check_close(values(g), want, 1e-15, "clipped");
  }
  {
    const auto p = kiln::custom_vjp(
        mylib::only_first{}, [](const auto& a, const auto& b) { return a * b; }, x, y);
    auto [gx, gy] = kiln::grad(kiln::sum(w * p), x, y);
    std::vector<double> want(n);
    for (int i = 0; i < n; ++i)
      want[std::size_t(i)] = wv[std::size_t(i)] * yv[std::size_t(i)];
    grad_test::check_close(values(gx), want, 1e-15, "d/dx");
    CHECK(values(gy) == std::vector<double>(n, 0.0));
  }
}

TEST_CASE("custom_vjp: a rule whose adjoint does not fit its argument is a kiln::error",
          "[custom_vjp][grad]") {
  const auto x = kiln::from(test::uniform<double>(5, -1, 1), kiln::shape{5});
  const auto f = kiln::custom_vjp(
      mylib::wrong_shape{}, [](const auto& v) { return v * 2.0; }, x);
  try {
    (void)kiln::grad(kiln::sum(f), x);
    FAIL("a rule's adjoint of shape {3, 2} for an argument of shape {5} did not throw");
  } catch (const kiln::error& e) {
    INFO(e.what());
    CHECK(e.op() == "custom_vjp");
    CHECK(std::string(e.what()).find("argument shape [5]") != std::string::npos);
  }
}

TEST_CASE("custom_vjp: on vulkan:0, value and gradient against the host",
          "[custom_vjp][grad][vulkan]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  constexpr int n = 300;
  const auto xv = test::uniform<float>(n, -30, 30), wv = test::uniform<float>(n, -2, 2);
  const auto x = kiln::from(xv, kiln::shape{n}, *dev), w = kiln::from(wv, kiln::shape{n}, *dev);
  const auto value = (mylib::softplus(x) * w).to_vector();
  auto [g] = kiln::grad(kiln::sum(w * mylib::softplus(x)), x);
  const auto grad = kiln::tensor<float>(g).to_vector();
  std::size_t wrong = 0;
  for (int i = 0; i < n; ++i) {
    const auto k = std::size_t(i);
    const double sp = softplus_ref(xv[k]) * wv[k], d = wv[k] * sigmoid_ref(xv[k]);
    wrong += std::fabs(value[k] - sp) > 4e-6 * std::max(1.0, std::fabs(sp));
    wrong += std::fabs(grad[k] - d) > 4e-6 * std::max(1.0, std::fabs(d));
  }
  INFO(wrong << " of " << 2 * n << " values beyond 4e-6 (relative, floor 1)");
  CHECK(wrong == 0);
}
