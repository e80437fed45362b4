// Ops of the catalog against references computed here: logic, predicates, where, cast,
// NaN rules, comparisons, 16-bit floats, and which code path computes a value. The float
// math is in test_ops_f32.cpp / test_ops_f64.cpp (float_ops.hpp), the integer ops in
// test_ops_int.cpp. Two sizes per case: 37 elements (the scalar tail) and 100003 (xsimd
// batches, threads).
#include "support.hpp"

#include <functional>

namespace {
const std::size_t sizes[] = {37, 100003};
} // namespace

TEST_CASE("f16 and bf16 ops round the float result", "[ops]") {
  const auto v = test::uniform<float>(1000, 0.01, 8);
  std::vector<kiln::half> h(v.begin(), v.end());
  std::vector<kiln::bfloat16> b(v.begin(), v.end());
  const auto th = kiln::from(h, kiln::shape{1000});
  const auto tb = kiln::from(b, kiln::shape{1000});
  const auto eh = kiln::tensor<kiln::half>(kiln::log(th) + kiln::tanh(th)).to_vector();
  const auto eb = kiln::tensor<kiln::bfloat16>(kiln::sqrt(tb) * kiln::exp(-tb)).to_vector();
  for (int i = 0; i < 1000; ++i) {
    const float x = float(h[i]);
    const float l = float(kiln::half(std::log(x))), t = float(kiln::half(std::tanh(x)));
    CHECK(eh[i].bits == kiln::half(l + t).bits);
    const float y = float(b[i]);
    const float s = float(kiln::bfloat16(std::sqrt(y))), e = float(kiln::bfloat16(std::exp(-y)));
    CHECK(eb[i].bits == kiln::bfloat16(s * e).bits);
  }
}

TEST_CASE("mixed types compare and combine in the promoted type", "[ops]") {
  const auto i = kiln::from<std::int32_t>({1, 2, 3, -4});
  const auto f = kiln::from<float>({1.5f, 2.0f, 2.5f, -4.0f});
  CHECK(kiln::tensor<bool>(i == f).to_vector() == std::vector<bool>{false, true, false, true});
  CHECK(kiln::tensor<float>(i + f).to_vector() == std::vector<float>{2.5f, 4, 5.5f, -8});
  const auto u = kiln::from<std::uint32_t>({4000000000u, 1});
  const auto s = kiln::from<std::int32_t>({-1, -1});
  CHECK(kiln::tensor<std::int64_t>(u + s).to_vector() == std::vector<std::int64_t>{3999999999, 0});
  CHECK(kiln::tensor<bool>(u > s).to_vector() == std::vector<bool>{true, true}); // no sign trap
}

TEST_CASE("logical ops, predicates, where and cast", "[ops]") {
  for (std::size_t n : sizes) {
    auto v = test::uniform<double>(n, -2, 2);
    v[0] = NAN;
    v[1] = INFINITY;
    v[2] = -INFINITY;
    const auto x = kiln::from(v, kiln::shape{std::int64_t(n)});
    const auto land = kiln::tensor<bool>((x > 0) && (x < 1)).to_vector();
    const auto lor = kiln::tensor<bool>((x < -1) || (x > 1)).to_vector();
    const auto lxor = kiln::tensor<bool>(kiln::logical_xor(x > 0, x > 1)).to_vector();
    const auto lnot = kiln::tensor<bool>(!(x > 0)).to_vector();
    const auto nan = kiln::tensor<bool>(kiln::isnan(x)).to_vector();
    const auto inf = kiln::tensor<bool>(kiln::isinf(x)).to_vector();
    const auto fin = kiln::tensor<bool>(kiln::isfinite(x)).to_vector();
    const auto relu = kiln::tensor<double>(kiln::where(x > 0, x, 0.0)).to_vector();
    const auto pick =
        kiln::tensor<float>(kiln::where(x > 0.5, 1.0f, kiln::cast<float>(x))).to_vector();
    const auto ci = kiln::tensor<std::int64_t>(kiln::cast<std::int64_t>(x * 1000.0)).to_vector();
    const auto notb = kiln::tensor<bool>(~(x > 0)).to_vector();
    for (std::size_t i = 0; i < n; ++i) {
      const double d = v[i];
      REQUIRE(land[i] == (d > 0 && d < 1));
      REQUIRE(lor[i] == (d < -1 || d > 1));
      REQUIRE(lxor[i] == ((d > 0) != (d > 1)));
      REQUIRE(lnot[i] == !(d > 0));
      REQUIRE(notb[i] == !(d > 0));
      REQUIRE(nan[i] == std::isnan(d));
      REQUIRE(inf[i] == std::isinf(d));
      REQUIRE(fin[i] == std::isfinite(d));
      REQUIRE(test::ulp_distance(relu[i], d > 0 ? d : 0.0) == 0);
      REQUIRE(test::ulp_distance(pick[i], d > 0.5 ? 1.0f : float(d)) == 0);
      if (std::isfinite(d)) REQUIRE(ci[i] == std::int64_t(d * 1000.0));
    }
    CHECK(ci[1] == INT64_MAX);
    CHECK(ci[2] == INT64_MIN);
    CHECK(ci[0] == 0);
  }
}

TEST_CASE("maximum, minimum and clamp propagate NaN", "[ops]") {
  for (std::size_t n : sizes) {
    auto a = test::uniform<float>(n, -1, 1), b = test::uniform<float>(n, -1, 1);
    for (std::size_t i = 0; i < n; i += 3)
      (i % 2 ? a : b)[i] = NAN;
    const auto ta = kiln::from(a, kiln::shape{std::int64_t(n)}),
               tb = kiln::from(b, kiln::shape{std::int64_t(n)});
    const auto mx = kiln::tensor<float>(kiln::maximum(ta, tb)).to_vector();
    const auto mn = kiln::tensor<float>(kiln::minimum(ta, tb)).to_vector();
    const auto cl = kiln::tensor<float>(kiln::clamp(ta, -0.5f, tb)).to_vector();
    for (std::size_t i = 0; i < n; ++i) {
      const bool any_nan = std::isnan(a[i]) || std::isnan(b[i]);
      REQUIRE(std::isnan(mx[i]) == any_nan);
      REQUIRE(std::isnan(mn[i]) == any_nan);
      REQUIRE(std::isnan(cl[i]) == any_nan);
      if (!any_nan) {
        REQUIRE(mx[i] == std::max(a[i], b[i]));
        REQUIRE(mn[i] == std::min(a[i], b[i]));
        REQUIRE(cl[i] == std::min(std::max(a[i], -0.5f), b[i]));
      }
    }
  }
}

TEST_CASE("comparisons and logic on floats with NaN, Inf and signed zeros", "[ops]") {
  for (std::size_t n : sizes) {
    auto a = test::uniform<float>(n, -3, 3), b = test::uniform<float>(n, -3, 3);
    const float specials[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1.0f};
    for (std::size_t i = 0; i < n; i += 5)
      a[i] = specials[test::draw(0, 5)];
    for (std::size_t i = 0; i < n; i += 3)
      b[i] = i % 2 ? a[i] : specials[test::draw(0, 5)];
    const auto ta = kiln::from(a, kiln::shape{std::int64_t(n)});
    const auto tb = kiln::from(b, kiln::shape{std::int64_t(n)});
    const auto eq = kiln::tensor<bool>(ta == tb).to_vector();
    const auto ne = kiln::tensor<bool>(ta != tb).to_vector();
    const auto lt = kiln::tensor<bool>(ta < tb).to_vector();
    const auto le = kiln::tensor<bool>(ta <= tb).to_vector();
    const auto gt = kiln::tensor<bool>(ta > tb).to_vector();
    const auto ge = kiln::tensor<bool>(ta >= tb).to_vector();
    const auto land = kiln::tensor<bool>(ta && tb).to_vector(); // NaN is non-zero: true
    const auto lnot = kiln::tensor<bool>(!ta).to_vector();
    for (std::size_t i = 0; i < n; ++i) {
      const float x = a[i], y = b[i];
      INFO("x " << x << " y " << y);
      REQUIRE(eq[i] == (x == y));
      REQUIRE(ne[i] == (x != y));
      REQUIRE(lt[i] == (x < y));
      REQUIRE(le[i] == (x <= y));
      REQUIRE(gt[i] == (x > y));
      REQUIRE(ge[i] == (x >= y));
      REQUIRE(land[i] == (x != 0 && y != 0));
      REQUIRE(lnot[i] == (x == 0));
    }
  }
}

TEST_CASE("where broadcasts its three operands and meets a and b in their common type", "[ops]") {
  for (int iter = 0; iter < 20; ++iter) {
    const std::int64_t r = test::draw(1, 40), c = test::draw(1, 400);
    const auto cv = test::uniform<double>(r * c, -1, 1);
    const auto av = test::integers<std::int32_t>(c, -1000, 1000);
    const auto bv = test::uniform<float>(r, -5, 5);
    const auto cond = kiln::from(cv, kiln::shape{r, c});
    const auto a = kiln::from(av, kiln::shape{c});
    const auto b = kiln::from(bv, kiln::shape{r, 1});
    const auto w = kiln::tensor<float>(kiln::where(cond > 0, a, b)).to_vector();
    const auto wc = kiln::tensor<float>(kiln::where(cond, 1.5f, b)).to_vector(); // non-zero
    const auto ws = kiln::tensor<std::int32_t>(kiln::where(cond < 0, -1, a)).to_vector();
    for (std::int64_t i = 0; i < r; ++i)
      for (std::int64_t j = 0; j < c; ++j) {
        const std::size_t k = std::size_t(i * c + j);
        REQUIRE(w[k] == (cv[k] > 0 ? float(av[j]) : bv[i]));
        REQUIRE(wc[k] == (cv[k] != 0 ? 1.5f : bv[i]));
        REQUIRE(ws[k] == (cv[k] < 0 ? -1 : av[j]));
      }
  }
}

TEST_CASE("predicates and casts on every float type", "[ops]") {
  const std::vector<float> src = {NAN,      INFINITY, -INFINITY, 0.0f,  -0.0f,  1.5f, -2.5f,
                                  65504.0f, 1e10f,    -1e10f,    3.99f, 255.5f, 1e-8f};
  const auto n = std::int64_t(src.size());
  const auto f = kiln::from(src, kiln::shape{n});
  const std::vector<kiln::half> hsrc(src.begin(), src.end());
  const std::vector<kiln::bfloat16> bsrc(src.begin(), src.end());
  const auto h = kiln::from(hsrc, kiln::shape{n});
  const auto b = kiln::from(bsrc, kiln::shape{n});
  const auto hn = kiln::tensor<bool>(kiln::isnan(h)).to_vector();
  const auto hi = kiln::tensor<bool>(kiln::isinf(h)).to_vector();
  const auto bf = kiln::tensor<bool>(kiln::isfinite(b)).to_vector();
  const auto in = kiln::tensor<bool>(kiln::isnan(kiln::cast<std::int32_t>(f))).to_vector();
  const auto tof = kiln::tensor<float>(kiln::cast<float>(h)).to_vector();
  const auto toh = kiln::tensor<kiln::half>(kiln::cast<kiln::half>(f)).to_vector();
  const auto hb = kiln::tensor<kiln::bfloat16>(kiln::cast<kiln::bfloat16>(h)).to_vector();
  const auto h32 = kiln::tensor<std::int32_t>(kiln::cast<std::int32_t>(h)).to_vector();
  const auto b8 = kiln::tensor<std::uint8_t>(kiln::cast<std::uint8_t>(b)).to_vector();
  const auto hbool = kiln::tensor<bool>(kiln::cast<bool>(h)).to_vector();
  for (std::int64_t i = 0; i < n; ++i) {
    const float x = src[i], hx = float(hsrc[i]), bx = float(bsrc[i]);
    INFO("x " << x << " as half " << hx << " as bfloat16 " << bx);
    REQUIRE(hn[i] == std::isnan(hx));
    REQUIRE(hi[i] == std::isinf(hx));
    REQUIRE(bf[i] == std::isfinite(bx));
    REQUIRE(in[i] == false);
    REQUIRE(test::same_value(tof[i], hx));
    REQUIRE(toh[i].bits == kiln::half(x).bits);
    REQUIRE(test::same_value(float(hb[i]), float(kiln::bfloat16(hx))));
    const double sat32 =
        std::isnan(hx) ? 0 : std::clamp<double>(std::trunc(hx), INT32_MIN, INT32_MAX);
    REQUIRE(h32[i] == std::int32_t(sat32));
    const double sat8 = std::isnan(bx) ? 0 : std::clamp<double>(std::trunc(bx), 0, 255);
    REQUIRE(b8[i] == std::uint8_t(sat8));
    REQUIRE(hbool[i] == (hx != 0 || std::isnan(hx)));
  }
}

TEST_CASE("f16 and bf16: more ops, NaN propagation, large sizes", "[ops]") {
  for (std::size_t n : sizes) {
    auto v = test::uniform<float>(n, -6, 6), w = test::uniform<float>(n, -6, 6);
    for (std::size_t i = 0; i < n; i += 11)
      (i % 2 ? v : w)[i] = NAN;
    const std::vector<kiln::half> hv(v.begin(), v.end()), hw(w.begin(), w.end());
    const std::vector<kiln::bfloat16> bv(v.begin(), v.end()), bw(w.begin(), w.end());
    const auto ha = kiln::from(hv, kiln::shape{std::int64_t(n)});
    const auto hb = kiln::from(hw, kiln::shape{std::int64_t(n)});
    const auto ba = kiln::from(bv, kiln::shape{std::int64_t(n)});
    const auto bb = kiln::from(bw, kiln::shape{std::int64_t(n)});
    const auto hmax = kiln::tensor<kiln::half>(kiln::maximum(ha, hb)).to_vector();
    const auto hsin = kiln::tensor<kiln::half>(kiln::sin(ha) * 2.0f).to_vector();
    const auto hflo = kiln::tensor<kiln::half>(kiln::floor(ha) - kiln::round(hb)).to_vector();
    const auto hlt = kiln::tensor<bool>(ha < hb).to_vector();
    const auto bmin = kiln::tensor<kiln::bfloat16>(kiln::minimum(ba, bb)).to_vector();
    const auto batan = kiln::tensor<kiln::bfloat16>(kiln::atan2(ba, bb)).to_vector();
    const auto bwhere = kiln::tensor<kiln::bfloat16>(kiln::where(ba > bb, ba, -bb)).to_vector();
    auto H = [](float x) { return float(kiln::half(x)); };
    auto B = [](float x) { return float(kiln::bfloat16(x)); };
    for (std::size_t i = 0; i < n; ++i) {
      const float x = float(hv[i]), y = float(hw[i]), p = float(bv[i]), q = float(bw[i]);
      INFO("half " << x << ", " << y << "; bfloat16 " << p << ", " << q);
      const bool hnan = std::isnan(x) || std::isnan(y), bnan = std::isnan(p) || std::isnan(q);
      REQUIRE(std::isnan(float(hmax[i])) == hnan);
      if (!hnan) REQUIRE(float(hmax[i]) == std::max(x, y));
      REQUIRE(test::same_value(float(hsin[i]), H(H(std::sin(x)) * 2.0f)));
      REQUIRE(test::same_value(float(hflo[i]), H(H(std::floor(x)) - H(std::round(y)))));
      REQUIRE(hlt[i] == (x < y));
      REQUIRE(std::isnan(float(bmin[i])) == bnan);
      if (!bnan) REQUIRE(float(bmin[i]) == std::min(p, q));
      REQUIRE(test::same_value(float(batan[i]), B(std::atan2(p, q))));
      REQUIRE(test::same_value(float(bwhere[i]), p > q ? p : -q));
    }
  }
}

// An element's value must not depend on whether its op ran as xsimd batches or as the
// scalar host() loop (a tree with any op that has no SIMD form, such as where, runs
// scalar). sign(-0.0): the SIMD form keeps the zero's sign (see arithmetic.hpp).
TEST_CASE("sign of a signed zero is the same on the SIMD and the scalar path", "[ops]") {
  for (std::size_t n : sizes) {
    std::vector<double> v(n, -0.0);
    for (std::size_t i = 0; i < n; i += 2)
      v[i] = 0.0;
    const auto x = kiln::from(v, kiln::shape{std::int64_t(n)});
    const auto xf = kiln::tensor<float>(kiln::cast<float>(x));
    const auto yes = kiln::full<bool>({std::int64_t(n)}, true);
    const auto simd = kiln::tensor<double>(kiln::sign(x)).to_vector();
    const auto scalar = kiln::tensor<double>(kiln::where(yes, kiln::sign(x), 1.0)).to_vector();
    const auto simd_f = kiln::tensor<float>(kiln::sign(xf)).to_vector();
    const auto scalar_f = kiln::tensor<float>(kiln::where(yes, kiln::sign(xf), 1.0f)).to_vector();
    std::size_t differ = 0, differ_f = 0;
    for (std::size_t i = 0; i < n; ++i) {
      REQUIRE(simd[i] == 0.0);
      REQUIRE(scalar[i] == 0.0);
      differ += std::signbit(simd[i]) != std::signbit(scalar[i]);
      differ_f += std::signbit(simd_f[i]) != std::signbit(scalar_f[i]);
    }
    INFO("n " << n << ": sign(-0.0) is " << (std::signbit(simd[1]) ? "-0" : "+0")
              << " on the SIMD path, " << (std::signbit(scalar[1]) ? "-0" : "+0")
              << " on the scalar path");
    CHECK(differ == 0);
    CHECK(differ_f == 0);
  }
}
