// The activations of include/kiln/ops/activation.hpp on the host: values against long double
// references written here (not kiln's formulas), at random inputs, at special values and deep
// in the tails; derivatives against the analytic ones and finite differences; softmax and
// log_softmax along each axis against double loops. Device values are checked against the
// host in test_device_catalog_math.cpp, and the generated code of every dialect compiles in
// the catalog tests (catalog_exprs.hpp).
#include "grad_support.hpp"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace {

using L = long double;

// The references: each a different computation of the same function, in long double. gelu,
// gelu_tanh and silu tend to 0 at -inf (kiln gives that limit, not -inf times 0).
bool minus_inf(L x) { return std::isinf(x) && x < 0; }
L ref_relu(L x) { return x < 0 ? L(0) : x; }
L ref_gelu(L x) { return minus_inf(x) ? -L(0) : x / 2 * std::erfc(-x / std::sqrt(L(2))); }
L ref_gelu_tanh(L x) { // 0.5 x (1 + tanh(u)) = x / (1 + e^(-2u)), u = sqrt(2/pi)(x + 0.044715x^3)
  const L u = std::sqrt(L(2) / std::acos(L(-1))) * (x + L(0.044715) * x * x * x);
  return minus_inf(x) ? -L(0) : x / (1 + std::exp(-2 * u));
}
L ref_silu(L x) { return minus_inf(x) ? -L(0) : x / (1 + std::exp(-x)); }
L ref_softplus(L x) { return x > 40 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }

// Their derivatives, written from the definitions.
L d_gelu(L x) {
  const L pi = std::acos(L(-1));
  return std::erfc(-x / std::sqrt(L(2))) / 2 + x * std::exp(-x * x / 2) / std::sqrt(2 * pi);
}
L d_gelu_tanh(L x) { // (1 + tanh u)/2 = s = sigmoid(2u), (1 - tanh^2 u)/2 = 2 s (1 - s)
  const L c = std::sqrt(L(2) / std::acos(L(-1))), u = c * (x + L(0.044715) * x * x * x);
  const L s = 1 / (1 + std::exp(-2 * u)), s1 = 1 / (1 + std::exp(2 * u));
  return s + x * 2 * s * s1 * c * (1 + 3 * L(0.044715) * x * x);
}
L d_silu(L x) {
  const L s = 1 / (1 + std::exp(-x));
  return s + x * s * (1 - s);
}
L d_softplus(L x) { return 1 / (1 + std::exp(-x)); }

struct activation {
  const char* name;
  L (*ref)(L);
  L (*deriv)(L); // null: piecewise linear (checked apart)
  double lo, hi; // the domain drawn
};

template <class T>
T ulp_of(T v) {
  const T a = std::fabs(v);
  return std::nextafter(a, std::numeric_limits<T>::infinity()) - a;
}

// got is f(x) within `ulps` of rounding, plus the error of `ulps` ulps of x carried through f
// (|f'(x)| ulp(x)): the functions whose argument is computed (gelu's -x/sqrt 2, the tanh form's
// cubic) are as accurate as their condition number allows, not better; plus |x| times the
// least subnormal, where x multiplies a probability that underflowed (e^x below -87 in f32).
template <class T>
bool close(T got, T x, L want, L deriv, int ulps) {
  if (std::isnan(want)) return std::isnan(got);
  const T w = static_cast<T>(want);
  if (test::same_value(got, w)) return true;
  if (std::isinf(want) || !std::isfinite(x)) return false;
  const L tol = ulps * (L(ulp_of(w)) + std::fabs(deriv) * L(ulp_of(x)) +
                        std::fabs(L(x)) * L(std::numeric_limits<T>::denorm_min()));
  return std::fabs(L(got) - want) <= tol;
}

template <class T, class F>
void check_values(const activation& a, F&& fn, const std::vector<T>& xs, int ulps) {
  const kiln::tensor<T> x = kiln::from(xs);
  const std::vector<T> got = kiln::tensor<T>(fn(x)).to_vector();
  REQUIRE(got.size() == xs.size());
  int bad = 0;
  for (std::size_t i = 0; i < xs.size() && bad < 5; ++i) {
    const L want = a.ref(xs[i]), d = a.deriv ? a.deriv(xs[i]) : L(1);
    if (!close(got[i], xs[i], want, d, ulps)) {
      ++bad;
      FAIL_CHECK(a.name << "(" << double(xs[i]) << ") = " << double(got[i]) << ", want "
                        << double(want));
    }
  }
}

template <class T>
std::vector<T> specials() {
  using N = std::numeric_limits<T>;
  return {T(0),     -T(0),     N::infinity(),   -N::infinity(), N::quiet_NaN(), N::min(), -N::min(),
          N::max(), -N::max(), N::denorm_min(), T(1),           T(-1),          T(1e-30), T(-1e-30),
          T(88),    T(-88),    T(709),          T(-709),        T(-745),        T(1000)};
}

template <class T>
void all_values() {
  const activation acts[] = {{"relu", ref_relu, nullptr, -50, 50},
                             {"gelu", ref_gelu, d_gelu, -12, 12},
                             {"gelu_tanh", ref_gelu_tanh, d_gelu_tanh, -12, 12},
                             {"silu", ref_silu, d_silu, -100, 100},
                             {"softplus", ref_softplus, d_softplus, -100, 100}};
  for (const auto& a : acts) {
    INFO(a.name << " in " << (sizeof(T) == 4 ? "f32" : "f64"));
    const std::string n = a.name;
    auto fn = [&](const kiln::tensor<T>& x) -> kiln::tensor<T> {
      if (n == "relu") return kiln::relu(x);
      if (n == "gelu") return kiln::gelu(x);
      if (n == "gelu_tanh") return kiln::gelu_tanh(x);
      if (n == "silu") return kiln::silu(x);
      return kiln::softplus(x);
    };
    const int ulps = n == "relu" ? 0 : 8;
    check_values<T>(a, fn, test::uniform<T>(4099, a.lo, a.hi), ulps); // batches and a tail
    check_values<T>(a, fn, test::uniform<T>(1031, -3, 3), ulps);
    check_values<T>(a, fn, specials<T>(), ulps);
  }
}

} // namespace

TEST_CASE("activations: relu, gelu, gelu_tanh, silu, softplus against long double references, "
          "special values and tails included",
          "[ops][activation]") {
  all_values<float>();
  all_values<double>();
}

TEST_CASE("activations: relu keeps integers and -0, leaky_relu's slope is a parameter",
          "[ops][activation]") {
  const auto iv = test::integers<std::int32_t>(300, -1000, 1000);
  const auto ri = kiln::tensor<std::int32_t>(kiln::relu(kiln::from(iv))).to_vector();
  for (std::size_t i = 0; i < iv.size(); ++i)
    CHECK(ri[i] == std::max(iv[i], 0));
  const auto r0 = kiln::tensor<double>(kiln::relu(kiln::from(std::vector<double>{-0.0}))).item();
  CHECK(std::signbit(r0));

  for (double slope : {0.01, 0.2, -0.5}) {
    const auto xv = test::uniform<float>(517, -20, 20);
    const kiln::tensor<float> x = kiln::from(xv);
    const auto y =
        kiln::tensor<float>(slope == 0.01 ? kiln::leaky_relu(x) : kiln::leaky_relu(x, slope))
            .to_vector();
    const float s = static_cast<float>(slope);
    for (std::size_t i = 0; i < xv.size(); ++i)
      CHECK(y[i] == (xv[i] < 0 ? s * xv[i] : xv[i])); // one rounding, as the reference
  }
  // The slope as a tensor operand (it broadcasts like any other).
  const auto xv = test::uniform<double>(40, -5, 5), sv = test::uniform<double>(8, 0, 1);
  const auto y =
      kiln::tensor<double>(kiln::leaky_relu(kiln::from(xv, {5, 8}), kiln::from(sv))).to_vector();
  for (std::size_t i = 0; i < xv.size(); ++i)
    CHECK(y[i] == (xv[i] < 0 ? sv[i % 8] * xv[i] : xv[i]));
}

TEST_CASE("activations: gradients against the analytic derivatives and finite differences",
          "[ops][activation][grad]") {
  const auto xv = test::uniform<double>(257, -6, 6);
  const kiln::tensor<double> x = kiln::from(xv);
  auto check = [&](const char* name, const auto& f, L (*d)(L)) {
    INFO(name);
    auto [dx] = kiln::grad(kiln::sum(f(x)), x);
    const auto got = kiln::tensor<double>(dx).to_vector();
    std::vector<double> want(xv.size());
    for (std::size_t i = 0; i < xv.size(); ++i)
      want[i] = double(d(xv[i]));
    grad_test::check_close(got, want, 1e-13, std::string(name) + " analytic");
    grad_test::check_close(got, grad_test::fd_grad(kiln::sum(f(x)), x), 1e-8,
                           std::string(name) + " finite differences");
  };
  check(
      "gelu", [](const auto& t) { return kiln::gelu(t); }, d_gelu);
  check(
      "gelu_tanh", [](const auto& t) { return kiln::gelu_tanh(t); }, d_gelu_tanh);
  check(
      "silu", [](const auto& t) { return kiln::silu(t); }, d_silu);
  check(
      "softplus", [](const auto& t) { return kiln::softplus(t); }, d_softplus);

  // Piecewise linear: relu' is 1 above 0 and 0 below; leaky_relu's in x and in its slope.
  const kiln::tensor<double> s = kiln::from(std::vector<double>{0.3});
  auto [rx] = kiln::grad(kiln::sum(kiln::relu(x) * x), x);
  auto [lx, ls] = kiln::grad(kiln::sum(kiln::leaky_relu(x, s) * 2.0), x, s);
  const auto grx = kiln::tensor<double>(rx).to_vector(), glx = kiln::tensor<double>(lx).to_vector();
  double want_s = 0;
  for (std::size_t i = 0; i < xv.size(); ++i) {
    CHECK(grx[i] == (xv[i] > 0 ? 2 * xv[i] : 0.0));
    CHECK(glx[i] == (xv[i] < 0 ? 0.6 : 2.0));
    want_s += xv[i] < 0 ? 2 * xv[i] : 0;
  }
  CHECK(std::abs(kiln::tensor<double>(ls).item() - want_s) <= 1e-12 * (1 + std::abs(want_s)));

  // Second order through gelu (grad of the sum of the gradient): d/dx of gelu'(x).
  auto [g1] = kiln::grad(kiln::sum(kiln::gelu(x)), x);
  auto [g2] = kiln::grad(kiln::sum(g1), x);
  const auto got2 = kiln::tensor<double>(g2).to_vector();
  std::vector<double> want2(xv.size());
  for (std::size_t i = 0; i < xv.size(); ++i) // gelu'' = phi(x) (2 - x^2)
    want2[i] = std::exp(-xv[i] * xv[i] / 2) / std::sqrt(2 * M_PI) * (2 - xv[i] * xv[i]);
  grad_test::check_close(got2, want2, 1e-12, "gelu''");
}

TEST_CASE("activations: softmax and log_softmax along each axis against double loops",
          "[ops][activation]") {
  for (int round = 0; round < 6; ++round) {
    const std::int64_t R = test::draw(1, 7), C = test::draw(1, 9);
    // Wide values: a max that is not subtracted first overflows e^x in f32.
    auto xv = test::uniform<float>(std::size_t(R * C), -120, 120);
    if (round % 2) xv[0] = -INFINITY; // one -inf entry: its probability is 0
    const kiln::tensor<float> x = kiln::from(xv, {R, C});
    for (int axis : {0, 1, -1, -2}) {
      INFO("shape [" << R << ", " << C << "], axis " << axis);
      const int ax = axis < 0 ? axis + 2 : axis;
      const auto sm = kiln::tensor<float>(kiln::softmax(x, axis)).to_vector();
      const auto ls = kiln::tensor<float>(kiln::log_softmax(x, axis)).to_vector();
      for (std::int64_t r = 0; r < R; ++r)
        for (std::int64_t c = 0; c < C; ++c) {
          // The max and the sum over the other elements of this one's row (axis 1) or column.
          double m = -INFINITY, s = 0;
          const std::int64_t n = ax == 1 ? C : R;
          auto at = [&](std::int64_t k) {
            return double(ax == 1 ? xv[std::size_t(r * C + k)] : xv[std::size_t(k * C + c)]);
          };
          for (std::int64_t k = 0; k < n; ++k)
            m = std::max(m, at(k));
          if (m == -INFINITY) { // a row of -inf only: NaN, as numpy's
            CHECK(std::isnan(sm[std::size_t(r * C + c)]));
            CHECK(std::isnan(ls[std::size_t(r * C + c)]));
            continue;
          }
          for (std::int64_t k = 0; k < n; ++k)
            s += std::exp(at(k) - m);
          const double v = xv[std::size_t(r * C + c)], want_l = v - m - std::log(s);
          const double want = std::exp(want_l);
          const double got = sm[std::size_t(r * C + c)], got_l = ls[std::size_t(r * C + c)];
          // x - max rounds in f32 by up to ulp(|x - max|): e^(x - max) carries that relative
          // error, so the bound grows with the distance from the row's max.
          INFO("softmax " << got << " want " << want);
          const double eps = std::numeric_limits<float>::epsilon();
          if (std::isinf(v))
            CHECK(got == 0); // a -inf entry
          else
            CHECK(std::abs(got - want) <=
                  want * eps * (8 + 2 * std::abs(v - m) + double(n)) + 1e-37);
          if (std::isinf(want_l))
            CHECK(got_l == want_l);
          else
            CHECK(std::abs(got_l - want_l) <= 1e-5 * (1 + std::abs(want_l)));
        }
    }
  }
  // Gradients of a cross-entropy through log_softmax: softmax(x) - onehot, per row.
  const std::int64_t R = 4, C = 5;
  const auto xv = test::uniform<double>(R * C, -3, 3);
  const kiln::tensor<double> x = kiln::from(xv, {R, C});
  std::vector<double> onehot(R * C, 0.0);
  for (std::int64_t r = 0; r < R; ++r)
    onehot[std::size_t(r * C + test::draw(0, int(C) - 1))] = 1;
  const kiln::tensor<double> y = kiln::from(onehot, {R, C});
  auto [dx] = kiln::grad(-kiln::sum(y * kiln::log_softmax(x, 1)), x);
  const auto got = kiln::tensor<double>(dx).to_vector();
  const auto p = kiln::tensor<double>(kiln::softmax(x, 1)).to_vector();
  std::vector<double> want(R * C);
  for (std::size_t i = 0; i < want.size(); ++i)
    want[i] = p[i] - onehot[i];
  grad_test::check_close(got, want, 1e-13, "d cross-entropy / dx");
}
