// The reductions added on the one-definition scheme (reductions/*.hpp): logsumexp, var and
// stddev with ddof, norm<1>, norm<2>, norm<inf_norm>, count_nonzero. Each against a
// double-precision reference loop over random shapes, axes and keepdims; the edges (huge,
// tiny and special values, empty reductions, bad ddof); on vulkan:0 through every kernel
// stage against the same reference; and gradients against finite differences.
#include "vulkan_support.hpp"

#include "grad_support.hpp"

#include <cmath>
#include <limits>
#include <random>

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

// A random shape and a random set of axes (or everything).
struct reduce_case {
  kiln::shape shape;
  std::vector<bool> mask;
  kiln::axes axes;
  bool keepdims = false;
};

// At most 2^18 elements: rank 4 with extents of 300 would be 8e9 (65 GB of doubles).
reduce_case random_case(std::int64_t max_extent = 9) {
  reduce_case c;
  const int rank = test::draw(1, 4);
  do {
    c.shape = kiln::shape{};
    for (int d = 0; d < rank; ++d)
      c.shape.push_back(test::draw(1, static_cast<int>(max_extent)));
  } while (kiln::numel(c.shape) > (std::int64_t{1} << 18));
  c.keepdims = test::draw(0, 1) == 1;
  if (test::draw(0, 4) == 0) {
    c.mask.assign(rank, true);
    return c;
  }
  c.mask.assign(rank, false);
  c.axes.everything = false;
  for (int d = 0; d < rank; ++d)
    if (test::draw(0, 1)) {
      c.mask[d] = true;
      c.axes.list.push_back(test::draw(0, 1) ? d : d - rank); // negative axes too
    }
  return c;
}

// The values of v (row-major over shape) grouped per output, in row-major order within
// each group.
std::vector<std::vector<double>> groups(const std::vector<double>& v, const kiln::shape& shape,
                                        const std::vector<bool>& mask) {
  std::int64_t nout = 1;
  for (int d = 0; d < shape.size(); ++d)
    if (!mask[d]) nout *= shape[d];
  std::vector<std::vector<double>> g(static_cast<std::size_t>(nout));
  std::vector<std::int64_t> idx(shape.size(), 0);
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::int64_t o = 0;
    for (int d = 0; d < shape.size(); ++d)
      if (!mask[d]) o = o * shape[d] + idx[d];
    g[static_cast<std::size_t>(o)].push_back(v[i]);
    for (int d = shape.size() - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return g;
}

// References, in long double where it matters.
double ref_logsumexp(const std::vector<double>& g) {
  double m = -inf;
  for (double x : g)
    m = std::max(m, x);
  if (!std::isfinite(m)) m = 0;
  long double s = 0;
  for (double x : g)
    s += std::exp(static_cast<long double>(x) - m);
  return static_cast<double>(m + std::log(s));
}
double ref_var(const std::vector<double>& g, int ddof) {
  long double mean = 0;
  for (double x : g)
    mean += x;
  mean /= static_cast<long double>(g.size());
  long double s = 0;
  for (double x : g)
    s += (x - mean) * (x - mean);
  return static_cast<double>(s /
                             static_cast<long double>(static_cast<std::int64_t>(g.size()) - ddof));
}
double ref_norm(const std::vector<double>& g, int ord) {
  long double s = 0;
  for (double x : g)
    s = ord == 1   ? s + std::fabs(x)
        : ord == 2 ? s + static_cast<long double>(x) * x
                   : std::max(s, static_cast<long double>(std::fabs(x)));
  return static_cast<double>(ord == 2 ? std::sqrt(s) : s);
}
double ref_count(const std::vector<double>& g) {
  double n = 0;
  for (double x : g)
    n += x != 0;
  return n;
}

kiln::shape out_shape(const reduce_case& c) {
  kiln::shape s;
  for (int d = 0; d < c.shape.size(); ++d)
    if (!c.mask[d])
      s.push_back(c.shape[d]);
    else if (c.keepdims)
      s.push_back(1);
  return s;
}

template <class T>
std::vector<double> as_double(const kiln::tensor<T>& t) {
  const auto v = t.to(kiln::device{}).to_vector();
  return std::vector<double>(v.begin(), v.end());
}

// Every reduction of x (on its device) against the reference, within rel (relative, with a
// floor of abs_floor).
template <class T>
void check_all(const kiln::tensor<T>& x, const std::vector<double>& values, const reduce_case& c,
               double rel) {
  const auto gs = groups(values, c.shape, c.mask);
  const kiln::shape want_shape = out_shape(c);
  auto check = [&](const char* what, const auto& got_expr, auto ref) {
    using R = kiln::value_t<std::remove_cvref_t<decltype(got_expr)>>;
    const kiln::tensor<R> got = got_expr;
    INFO(what << " over shape " << c.shape.str() << " keepdims " << c.keepdims);
    REQUIRE(got.shape() == want_shape);
    const auto g = as_double(got);
    for (std::size_t o = 0; o < gs.size(); ++o) {
      const double want = ref(gs[o]);
      INFO("output " << o << ": got " << g[o] << ", want " << want);
      CHECK(std::fabs(g[o] - want) <= rel * std::max(1.0, std::fabs(want)));
    }
  };
  check("logsumexp", kiln::logsumexp(x, c.axes, c.keepdims), ref_logsumexp);
  for (int ddof : {0, 1}) {
    bool enough = true;
    for (const auto& g : gs)
      enough = enough && static_cast<std::int64_t>(g.size()) > ddof;
    if (!enough) continue;
    check("var", kiln::var(x, c.axes, c.keepdims, kiln::ddof(ddof)),
          [&](const auto& g) { return ref_var(g, ddof); });
    check("stddev", kiln::stddev(x, c.axes, c.keepdims, kiln::ddof(ddof)),
          [&](const auto& g) { return std::sqrt(ref_var(g, ddof)); });
  }
  check("norm<1>", kiln::norm<1>(x, c.axes, c.keepdims),
        [](const auto& g) { return ref_norm(g, 1); });
  check("norm<2>", kiln::norm<2>(x, c.axes, c.keepdims),
        [](const auto& g) { return ref_norm(g, 2); });
  check("norm<inf>", kiln::norm<kiln::inf_norm>(x, c.axes, c.keepdims),
        [](const auto& g) { return ref_norm(g, 0); });
  check("count_nonzero", kiln::count_nonzero(x, c.axes, c.keepdims), ref_count);
}

// Random values, a third of them 0 (for count_nonzero), rounded to T.
template <class T>
std::vector<T> draw_values(std::int64_t n, double lo, double hi) {
  auto v = test::uniform<T>(static_cast<std::size_t>(n), lo, hi);
  for (auto& e : v)
    if (test::draw(0, 2) == 0) e = T(0);
  return v;
}

template <class T>
void random_checks(const kiln::device& dev, int cases, std::int64_t max_extent, double rel) {
  for (int k = 0; k < cases; ++k) {
    const reduce_case c = random_case(max_extent);
    const auto v = draw_values<T>(kiln::numel(c.shape), -3, 3);
    const auto x = kiln::from(v, c.shape).to(dev);
    check_all(x, std::vector<double>(v.begin(), v.end()), c, rel);
  }
}

} // namespace

TEST_CASE("logsumexp, var, stddev, norms and count_nonzero over random axes match a double "
          "reference on the host",
          "[reduce][stats]") {
  random_checks<double>(kiln::device{}, 60, 9, 1e-12);
  random_checks<float>(kiln::device{}, 60, 9, 2e-6);
  // Reductions long enough to be split over the host's threads, merged in order.
  random_checks<double>(kiln::device{}, 4, 300, 1e-11);
}

TEST_CASE("the new reductions are stable where the naive formulas fail", "[reduce][stats]") {
  // var: a large mean against a small spread (sum(x^2) - n mean^2 cancels to noise).
  std::vector<double> v(10000);
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = 1e9 + static_cast<double>(test::draw(-1000, 1000)) * 1e-3;
  const auto x = kiln::from(v, kiln::shape{10000});
  const double want = ref_var(v, 1);
  CHECK(std::fabs(kiln::tensor<double>(kiln::var(x, {}, kiln::ddof(1))).item() - want) <=
        1e-6 * want);
  // f32 values near 1e4 with spread 1: accumulated in double, no cancellation.
  std::vector<float> f(5000);
  for (auto& e : f)
    e = 1e4f + static_cast<float>(test::draw(-500, 500)) * 2e-3f;
  const double wf = ref_var(std::vector<double>(f.begin(), f.end()), 0);
  CHECK(std::fabs(kiln::tensor<float>(kiln::var(kiln::from(f, kiln::shape{5000}))).item() - wf) <=
        1e-5 * wf);
  // logsumexp of values whose exp overflows or underflows double.
  const auto big = kiln::from(std::vector<double>{1000, 1001, 999}, kiln::shape{3});
  CHECK(kiln::tensor<double>(kiln::logsumexp(big)).item() ==
        Approx(1001 + std::log(1 + std::exp(-1.0) + std::exp(-2.0))).epsilon(1e-14));
  const auto small = kiln::from(std::vector<double>{-1000, -1001}, kiln::shape{2});
  CHECK(kiln::tensor<double>(kiln::logsumexp(small)).item() ==
        Approx(-1000 + std::log1p(std::exp(-1.0))).epsilon(1e-14));
  // norm<2> of values whose squares overflow or underflow double.
  const auto huge = kiln::from(std::vector<double>{3e200, 4e200}, kiln::shape{2});
  CHECK(kiln::tensor<double>(kiln::norm(huge)).item() == Approx(5e200).epsilon(1e-14));
  const auto tiny = kiln::from(std::vector<double>{3e-200, -4e-200}, kiln::shape{2});
  CHECK(kiln::tensor<double>(kiln::norm(tiny)).item() == Approx(5e-200).epsilon(1e-14));
}

TEST_CASE("the new reductions on infinities, NaN and empty axes", "[reduce][stats]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto one = [](const auto& e) { return kiln::tensor<double>(e).item(); };
  auto vec = [](std::vector<double> v) {
    const auto n = static_cast<std::int64_t>(v.size());
    return kiln::from(std::move(v), kiln::shape{n});
  };
  CHECK(one(kiln::logsumexp(vec({-inf, -inf}))) == -inf);
  CHECK(one(kiln::logsumexp(vec({-inf, 2.0}))) == Approx(2.0));
  CHECK(one(kiln::logsumexp(vec({1.0, inf, inf}))) == inf);
  CHECK(std::isnan(one(kiln::logsumexp(vec({1.0, nan, inf})))));
  CHECK(one(kiln::norm(vec({1.0, inf, -inf}))) == inf);
  CHECK(std::isnan(one(kiln::norm(vec({nan, 1.0, inf})))));
  CHECK(one(kiln::norm(vec({0.0, 0.0}))) == 0.0);
  CHECK(one(kiln::norm<kiln::inf_norm>(vec({1.0, -inf}))) == inf);
  CHECK(std::isnan(one(kiln::var(vec({1.0, nan, 2.0})))));
  CHECK(kiln::tensor<std::int64_t>(kiln::count_nonzero(vec({nan, 0.0, -0.0, inf}))).item() == 2);
  // Empty reductions: the identities where there is one.
  const kiln::tensor<double> empty(kiln::shape{3, 0});
  CHECK(kiln::tensor<double>(kiln::logsumexp(empty, {1})).to_vector() ==
        std::vector<double>(3, -inf));
  CHECK(kiln::tensor<double>(kiln::norm(empty, {1})).to_vector() == std::vector<double>(3, 0.0));
  CHECK(kiln::tensor<std::int64_t>(kiln::count_nonzero(empty, {1})).to_vector() ==
        std::vector<std::int64_t>(3, 0));
  CHECK(kiln::tensor<double>(kiln::var(empty, {0})).shape() == kiln::shape{0});
}

TEST_CASE("bad ddof and empty infinity norms are kiln::errors", "[reduce][stats][errors]") {
  const auto x = kiln::from(test::uniform<double>(6, -1, 1), kiln::shape{2, 3});
  REQUIRE_THROWS_WITH(
      kiln::var(x, {1}, kiln::ddof(3)),
      Catch::Contains("kiln::var: ddof must be less than the number of elements "
                      "reduced (ddof 3, 3 elements per output, input shape [2, 3])"));
  REQUIRE_THROWS_WITH(kiln::stddev(x, {0}, false, kiln::ddof(-1)),
                      Catch::Contains("kiln::var: ddof must not be negative (ddof -1)"));
  const kiln::tensor<double> empty(kiln::shape{3, 0});
  REQUIRE_THROWS_WITH(kiln::tensor<double>(kiln::var(empty, {1})),
                      Catch::Contains("ddof must be less than the number of elements reduced"));
  REQUIRE_THROWS_WITH(kiln::tensor<double>(kiln::norm<kiln::inf_norm>(empty, {1})),
                      Catch::Contains("kiln::max: reduction over an empty axis has no identity"));
  REQUIRE_THROWS_WITH(kiln::logsumexp(x, {2}), Catch::Contains("kiln::logsumexp"));
  REQUIRE_THROWS_WITH(kiln::norm(x, {0, 0}), Catch::Contains("axis repeated"));
}

TEST_CASE("gradients of logsumexp, var, stddev and the norms against finite differences",
          "[reduce][stats][grad]") {
  const kiln::shape s{3, 5};
  for (int k = 0; k < 3; ++k) {
    const auto x = kiln::from(test::uniform<double>(15, -2, 2), s);
    const auto w = kiln::from(test::uniform<double>(3, -1, 1), kiln::shape{3});
    const bool keep = k == 1;
    auto weigh = [&](const auto& r) {
      if (keep) return kiln::sum(r * kiln::from(w.to_vector(), kiln::shape{3, 1}));
      return kiln::sum(r * w);
    };
    // kinks: where two entries of a row tie within a step (max), or one is within a step of
    // 0 (abs), finite differences are off; those elements are left out.
    auto check = [&](const char* what, const auto& f, bool kinks = false) {
      INFO(what << ", keepdims " << keep);
      auto [g] = kiln::grad(f(x), x);
      const kiln::tensor<double> got = g;
      if (kinks)
        grad_test::check_close_where_smooth(got.to_vector(), f(x), x, 1e-7, what);
      else
        grad_test::check_close(got.to_vector(), grad_test::fd_grad(f(x), x), 1e-7, what);
    };
    check("logsumexp", [&](const auto& a) { return weigh(kiln::logsumexp(a * 3.0, {1}, keep)); });
    check("var", [&](const auto& a) { return weigh(kiln::var(a, {1}, keep, kiln::ddof(1))); });
    check("stddev", [&](const auto& a) { return weigh(kiln::stddev(a, {1}, keep)); });
    check("norm<2>", [&](const auto& a) { return weigh(kiln::norm(a, {1}, keep)); });
    check(
        "norm<1>", [&](const auto& a) { return weigh(kiln::norm<1>(a, {1}, keep)); }, true);
    check(
        "norm<inf>", [&](const auto& a) { return weigh(kiln::norm<kiln::inf_norm>(a, {1}, keep)); },
        true);
  }
  // The 2-norm's subgradient at zero is 0, not NaN.
  const auto z = kiln::from(std::vector<double>(4, 0.0), kiln::shape{4});
  auto [gz] = kiln::grad(kiln::norm(z), z);
  CHECK(kiln::tensor<double>(gz).to_vector() == std::vector<double>(4, 0.0));
}

TEST_CASE("vulkan: the new reductions through every kernel stage match the reference",
          "[reduce][stats][vulkan]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  // Short reductions (an invocation per output) and long ones (a workgroup per output, and
  // two passes through partials where an output spans several chunks).
  random_checks<float>(*dev, 12, 9, 2e-6);
  random_checks<double>(*dev, 6, 9, 1e-12);
  for (std::int64_t n : {1000, 200000}) {
    reduce_case c;
    c.shape = {3, n};
    c.mask = {false, true};
    c.axes.everything = false;
    c.axes.list = {1};
    const auto v = draw_values<float>(3 * n, -3, 3);
    check_all(kiln::from(v, c.shape).to(*dev), std::vector<double>(v.begin(), v.end()), c, 1e-5);
  }
  // Specials on the device: the same as on the host.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> sp = {1.0, inf, -inf, nan, 0.0, -2.0, inf, 3.0};
  const auto xh = kiln::from(sp, kiln::shape{4, 2});
  const auto xd = xh.to(*dev);
  auto same = [](const auto& a, const auto& b) {
    const auto va = as_double(kiln::tensor<double>(a)), vb = as_double(kiln::tensor<double>(b));
    REQUIRE(va.size() == vb.size());
    for (std::size_t i = 0; i < va.size(); ++i) {
      INFO("element " << i << ": " << va[i] << " vs " << vb[i]);
      CHECK((va[i] == vb[i] || (std::isnan(va[i]) && std::isnan(vb[i])) ||
             std::fabs(va[i] - vb[i]) <= 1e-14 * std::fabs(vb[i])));
    }
  };
  same(kiln::logsumexp(xd, {1}), kiln::logsumexp(xh, {1}));
  same(kiln::norm(xd, {1}), kiln::norm(xh, {1}));
  same(kiln::var(xd, {1}), kiln::var(xh, {1}));
  same(kiln::logsumexp(xd, {0}), kiln::logsumexp(xh, {0}));
  same(kiln::norm(xd, {0}), kiln::norm(xh, {0}));
  // A gradient on the device against the host's.
  const auto ah = kiln::from(test::uniform<float>(40, -2, 2), kiln::shape{4, 10});
  const auto ad = ah.to(*dev);
  auto f = [](const auto& a) {
    return kiln::sum(kiln::logsumexp(a, {1}) + kiln::stddev(a, {1}) + kiln::norm(a, {1}));
  };
  auto [gd] = kiln::grad(f(ad), ad);
  auto [gh] = kiln::grad(f(ah), ah);
  const auto vd = as_double(kiln::tensor<float>(gd)), vh = as_double(kiln::tensor<float>(gh));
  for (std::size_t i = 0; i < vd.size(); ++i)
    CHECK(std::fabs(vd[i] - vh[i]) <= 1e-5 * std::max(1.0, std::fabs(vh[i])));
}
