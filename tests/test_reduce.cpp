// Reductions against double-precision reference loops, over random shapes and random
// subsets of axes, with and without keepdims, with the reduced expression fused in.
#include <kiln/kiln.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <random>

namespace {

std::mt19937_64 rng() { return std::mt19937_64(Catch::rngSeed()); }

// Reference: folds v (row-major over `shape`) over the axes in mask with f.
template <class Acc, class F>
std::vector<Acc> ref_reduce(const std::vector<double>& v, const kiln::shape& shape,
                            const std::vector<bool>& mask, Acc init, F f, kiln::shape& out_shape) {
  out_shape = {};
  for (int d = 0; d < shape.size(); ++d)
    if (!mask[d]) out_shape.push_back(shape[d]);
  std::vector<Acc> out(static_cast<std::size_t>(kiln::numel(out_shape)), init);
  std::vector<std::int64_t> idx(shape.size(), 0);
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::int64_t o = 0, r = 0;
    for (int d = 0; d < shape.size(); ++d) {
      if (!mask[d])
        o = o * shape[d] + idx[d];
      else
        r = r * shape[d] + idx[d];
    }
    out[o] = f(out[o], v[i], r);
    for (int d = shape.size() - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

struct draw {
  kiln::shape shape;
  std::vector<bool> mask;
  kiln::axes axes;
};

draw random_case(std::mt19937_64& g) {
  draw c;
  const int rank = std::uniform_int_distribution<int>(1, 4)(g);
  for (int d = 0; d < rank; ++d)
    c.shape.push_back(std::uniform_int_distribution<int>(1, 9)(g));
  c.mask.assign(rank, false);
  const bool everything = std::uniform_int_distribution<int>(0, 4)(g) == 0;
  if (everything) {
    c.mask.assign(rank, true);
    return c;
  }
  c.axes = kiln::axes{};
  c.axes.everything = false;
  for (int d = 0; d < rank; ++d)
    if (std::uniform_int_distribution<int>(0, 1)(g)) {
      c.mask[d] = true;
      // Name the axis either way round, as users do.
      c.axes.list.push_back(std::uniform_int_distribution<int>(0, 1)(g) ? d : d - rank);
    }
  if (c.axes.list.empty()) {
    c.mask[0] = true;
    c.axes.list.push_back(0);
  }
  return c;
}

kiln::shape keep_shape(const kiln::shape& s, const std::vector<bool>& mask) {
  kiln::shape r;
  for (int d = 0; d < s.size(); ++d)
    r.push_back(mask[d] ? 1 : s[d]);
  return r;
}

} // namespace

TEST_CASE("sum, mean, prod, max, min over random axes match a double reference", "[reduce]") {
  auto g = rng();
  std::uniform_real_distribution<float> u(-2, 2);
  for (int iter = 0; iter < 60; ++iter) {
    const draw c = random_case(g);
    std::vector<float> a(static_cast<std::size_t>(kiln::numel(c.shape))), b(a.size());
    for (auto& x : a)
      x = u(g);
    for (auto& x : b)
      x = u(g);
    const auto ta = kiln::from(a, c.shape), tb = kiln::from(b, c.shape);
    // Reference of the fused expression a*b + sin(a), in double.
    std::vector<double> e(a.size());
    for (std::size_t i = 0; i < a.size(); ++i)
      e[i] = double(a[i]) * double(b[i]) + std::sin(double(a[i]));
    const bool keep = std::uniform_int_distribution<int>(0, 1)(g);
    INFO("shape " << c.shape.str() << " keepdims " << keep);
    kiln::shape os;
    const auto rsum = ref_reduce<double>(
        e, c.shape, c.mask, 0.0, [](double s, double v, std::int64_t) { return s + v; }, os);
    const auto rmax = ref_reduce<double>(
        e, c.shape, c.mask, -INFINITY,
        [](double s, double v, std::int64_t) { return std::max(s, v); }, os);
    const auto rmin = ref_reduce<double>(
        e, c.shape, c.mask, INFINITY,
        [](double s, double v, std::int64_t) { return std::min(s, v); }, os);
    const auto rprod = ref_reduce<double>(
        a.size() ? std::vector<double>(a.begin(), a.end()) : e, c.shape, c.mask, 1.0,
        [](double s, double v, std::int64_t) { return s * v; }, os);
    const std::int64_t count = kiln::numel(c.shape) / std::max<std::int64_t>(1, kiln::numel(os));

    const auto expr = ta * tb + kiln::sin(ta);
    kiln::tensor<float> s = kiln::sum(expr, c.axes, keep);
    kiln::tensor<float> m = kiln::mean(expr, c.axes, keep);
    kiln::tensor<float> mx = kiln::max(expr, c.axes, keep);
    kiln::tensor<float> mn = kiln::min(expr, c.axes, keep);
    kiln::tensor<float> p = kiln::prod(ta, c.axes, keep);
    REQUIRE(s.shape() == (keep ? keep_shape(c.shape, c.mask) : os));
    const auto sv = s.to_vector(), mv = m.to_vector(), xv = mx.to_vector(), nv = mn.to_vector(),
               pv = p.to_vector();
    for (std::size_t i = 0; i < rsum.size(); ++i) {
      CHECK(sv[i] == Approx(rsum[i]).margin(1e-4).epsilon(1e-5));
      CHECK(mv[i] == Approx(rsum[i] / double(count)).margin(1e-5).epsilon(1e-5));
      // The expression is computed in f32; its max is the rounded reference value.
      CHECK(xv[i] == Approx(rmax[i]).margin(1e-5));
      CHECK(nv[i] == Approx(rmin[i]).margin(1e-5));
      CHECK(pv[i] == Approx(rprod[i]).margin(1e-6).epsilon(1e-5));
    }
  }
}

TEST_CASE("argmax and argmin give the first extreme index over the reduced axes", "[reduce]") {
  auto g = rng();
  std::uniform_int_distribution<int> u(-5, 5); // small range: many ties
  for (int iter = 0; iter < 40; ++iter) {
    const draw c = random_case(g);
    std::vector<std::int32_t> a(static_cast<std::size_t>(kiln::numel(c.shape)));
    for (auto& x : a)
      x = u(g);
    const auto t = kiln::from(a, c.shape);
    std::vector<double> v(a.begin(), a.end());
    using P = std::pair<double, std::int64_t>;
    kiln::shape os;
    const auto rmax = ref_reduce<P>(
        v, c.shape, c.mask, P{-INFINITY, -1},
        [](P s, double x, std::int64_t r) {
          return x > s.first ? P{x, r} : s;
        },
        os);
    const auto rmin = ref_reduce<P>(
        v, c.shape, c.mask, P{INFINITY, -1},
        [](P s, double x, std::int64_t r) {
          return x < s.first ? P{x, r} : s;
        },
        os);
    INFO("shape " << c.shape.str());
    const auto am = kiln::argmax(t * 2 - 1, c.axes).to_vector();
    const auto an = kiln::argmin(t, c.axes).to_vector();
    REQUIRE(am.size() == rmax.size());
    for (std::size_t i = 0; i < am.size(); ++i) {
      CHECK(am[i] == rmax[i].second);
      CHECK(an[i] == rmin[i].second);
    }
  }
}

TEST_CASE("all and any over axes", "[reduce]") {
  auto g = rng();
  std::uniform_real_distribution<double> u(0, 1);
  for (int iter = 0; iter < 30; ++iter) {
    const draw c = random_case(g);
    std::vector<double> a(static_cast<std::size_t>(kiln::numel(c.shape)));
    for (auto& x : a)
      x = u(g);
    const auto t = kiln::from(a, c.shape);
    kiln::shape os;
    const auto rall = ref_reduce<bool>(
        a, c.shape, c.mask, true, [](bool s, double x, std::int64_t) { return s && x > 0.1; }, os);
    const auto rany = ref_reduce<bool>(
        a, c.shape, c.mask, false, [](bool s, double x, std::int64_t) { return s || x > 0.9; }, os);
    const auto va = kiln::all(t > 0.1, c.axes).to_vector();
    const auto vn = kiln::any(t > 0.9, c.axes).to_vector();
    for (std::size_t i = 0; i < rall.size(); ++i) {
      CHECK(va[i] == rall[i]);
      CHECK(vn[i] == rany[i]);
    }
  }
}

TEST_CASE("an f32 sum of 10^7 random values is within 1e-6 of a double reference", "[reduce]") {
  const auto t = kiln::random::uniform<float>({10'000'000}, Catch::rngSeed());
  const float* p = t.data();
  double ref = 0;
  for (std::int64_t i = 0; i < t.size(); ++i)
    ref += p[i];
  for (int threads : {1, 2}) {
    kiln::set_num_threads(threads);
    const double s = kiln::sum(t).item();
    INFO("threads " << threads);
    CHECK(std::abs(s - ref) / ref < 1e-6);
    // Mixed signs, fused with an expression.
    const double s2 = kiln::sum(t * 2.0f - 1.0f).item();
    double ref2 = 0;
    for (std::int64_t i = 0; i < t.size(); ++i)
      ref2 += double(p[i] * 2.0f - 1.0f);
    CHECK(std::abs(s2 - ref2) <= 1e-6 * ref);
  }
  kiln::set_num_threads(2);
}

TEST_CASE("integer sums widen to i64 and means are floating", "[reduce]") {
  const auto t = kiln::full<std::int32_t>({3, 1000}, 2'000'000);
  STATIC_REQUIRE(std::is_same_v<kiln::value_t<decltype(kiln::sum(t))>, std::int64_t>);
  CHECK(kiln::sum(t).item() == 6'000'000'000LL);
  CHECK(kiln::mean(t).item() == 2'000'000.0);
  const auto b = kiln::arange<std::int32_t>(0, 10) < 4;
  CHECK(kiln::sum(b).item() == 4);
}

TEST_CASE("reductions inside expressions are computed first, then fused", "[reduce]") {
  auto g = rng();
  std::normal_distribution<float> n(0, 3);
  std::vector<float> a(7 * 13);
  for (auto& x : a)
    x = n(g);
  const auto x = kiln::from(a, kiln::shape{7, 13});
  const auto e = kiln::exp(x - kiln::max(x, 1, true));
  kiln::tensor<float> softmax = e / kiln::sum(e, 1, true);
  const auto sv = softmax.to_vector();
  for (int r = 0; r < 7; ++r) {
    double m = -INFINITY, s = 0;
    for (int c = 0; c < 13; ++c)
      m = std::max(m, double(a[r * 13 + c]));
    for (int c = 0; c < 13; ++c)
      s += std::exp(double(a[r * 13 + c]) - m);
    for (int c = 0; c < 13; ++c)
      CHECK(sv[r * 13 + c] == Approx(std::exp(double(a[r * 13 + c]) - m) / s).epsilon(1e-5));
  }
  // A reduction of a reduction.
  CHECK(kiln::sum(kiln::sum(x, 0)).item() == Approx(kiln::sum(x).item()).epsilon(1e-5));
  // A reduction over a strided view.
  const auto xt = x.transpose()(kiln::range{1, 13, 3});
  const auto cs = kiln::sum(xt, 1).to_vector();
  for (int i = 0; i < 4; ++i) {
    double s = 0;
    for (int r = 0; r < 7; ++r)
      s += a[r * 13 + 1 + 3 * i];
    CHECK(cs[i] == Approx(s).epsilon(1e-5));
  }
}

TEST_CASE("NaN propagates through max/min and is the argmax", "[reduce]") {
  auto t = kiln::from<float>({1, NAN, 3, 2}, kiln::shape{4});
  CHECK(std::isnan(kiln::max(t).item()));
  CHECK(std::isnan(kiln::min(t).item()));
  CHECK(kiln::argmax(t).item() == 1);
}

TEST_CASE("reductions reject bad axes and empty extremes", "[reduce][errors]") {
  const auto t = kiln::zeros<float>({2, 3});
  CHECK_THROWS_AS(kiln::sum(t, 2).eval(), kiln::error);
  CHECK_THROWS_AS(kiln::sum(t, -3).eval(), kiln::error);
  CHECK_THROWS_WITH(kiln::sum(t, {0, 0}).eval(), Catch::Contains("axis repeated"));
  const auto empty = kiln::zeros<float>({0, 3});
  CHECK_THROWS_WITH(kiln::max(empty).eval(), Catch::Contains("no identity"));
  CHECK(kiln::sum(empty).item() == 0.0f);
  CHECK(kiln::sum(empty, 0).to_vector() == std::vector<float>{0, 0, 0});
}

// A reduction's axes are written many ways: left out, `{}`, an integer of any type, `{1}`, a
// list, an axes object. Each must fold the axes it names, with keepdims where given.
TEST_CASE("every spelling of a reduction's axes folds the axes it names", "[reduce]") {
  auto g = rng();
  for (int round = 0; round < 20; ++round) {
    kiln::shape s;
    for (int d = 0; d < 3; ++d)
      s.push_back(std::uniform_int_distribution<int>(1, 6)(g));
    const auto x = kiln::random::normal<double>(s, g());
    std::vector<double> v(x.data(), x.data() + x.size());
    const auto ref = [&](std::vector<bool> mask, bool keep) {
      kiln::shape out;
      auto r = ref_reduce<double>(
          v, s, mask, 0.0, [](double a, double b, std::int64_t) { return a + b; }, out);
      return std::pair{keep ? keep_shape(s, mask) : out, r};
    };
    const auto check = [&](const kiln::tensor<double>& got,
                           std::pair<kiln::shape, std::vector<double>> want, const char* spelling) {
      INFO(spelling << " over shape " << s.str());
      REQUIRE(got.shape() == want.first);
      const auto gv = got.to_vector();
      for (std::size_t i = 0; i < gv.size(); ++i)
        CHECK(gv[i] == Approx(want.second[i]).epsilon(1e-12).margin(1e-12));
    };
    const std::vector<bool> all(3, true), mid{false, true, false}, last{false, false, true};
    check(kiln::sum(x), ref(all, false), "sum(x)");
    check(kiln::sum(x, {}), ref(all, false), "sum(x, {})");
    check(kiln::sum(x, {}, true), ref(all, true), "sum(x, {}, true)");
    check(kiln::sum(x * 1.0), ref(all, false), "sum(expression)");
    check(kiln::sum(x, 1), ref(mid, false), "sum(x, 1)");
    check(kiln::sum(x, {1}), ref(mid, false), "sum(x, {1})");
    check(kiln::sum(x, std::int64_t{-1}, true), ref(last, true), "sum(x, int64 -1, true)");
    check(kiln::sum(x, short(2)), ref(last, false), "sum(x, short 2)");
    check(kiln::sum(x, {0, 2}), ref({true, false, true}, false), "sum(x, {0, 2})");
    check(kiln::sum(x, kiln::axes(1), true), ref(mid, true), "sum(x, axes(1), true)");
    const kiln::axes named{2, 0};
    check(kiln::sum(x, named), ref({true, false, true}, false), "sum(x, named axes)");
  }
  // An axis out of range, given as an unsigned integer, is an error too.
  const auto t = kiln::zeros<float>({2, 3});
  CHECK_THROWS_WITH(kiln::sum(t, 5u).eval(), Catch::Contains("sum"));
}
