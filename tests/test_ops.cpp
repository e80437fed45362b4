// Ops of the catalog against references computed here: explicit wrapping arithmetic for
// integers (exact), logic, predicates, where, cast, NaN rules, 16-bit floats. The float
// math is in test_ops_f32.cpp / test_ops_f64.cpp. Two sizes per case: 37 elements (the
// scalar tail) and 100003 (xsimd batches, threads).
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

namespace {

// Integer reference semantics, written independently: wrap-around, C++ division with
// division by zero giving 0.
template <class T>
T wrap(std::uint64_t v) {
  return static_cast<T>(v);
}

template <class T>
void integer_ops(std::int64_t lo, std::int64_t hi) {
  for (std::size_t n : sizes) {
    auto a = test::integers<T>(n, lo, hi), b = test::integers<T>(n, lo, hi);
    b[0] = 0; // division by zero
    if constexpr (std::is_signed_v<T>) {
      a[1] = std::numeric_limits<T>::min(); // INT_MIN / -1 and negation
      b[1] = T(-1);
    }
    a[2] = std::numeric_limits<T>::max(); // overflow wraps
    b[2] = T(3);
    const auto ta = kiln::from(a, kiln::shape{std::int64_t(n)});
    const auto tb = kiln::from(b, kiln::shape{std::int64_t(n)});
    const auto add = kiln::tensor<T>(ta + tb).to_vector(),
               sub = kiln::tensor<T>(ta - tb).to_vector(),
               mul = kiln::tensor<T>(ta * tb).to_vector(),
               div = kiln::tensor<T>(ta / tb).to_vector(),
               mod = kiln::tensor<T>(ta % tb).to_vector(),
               mx = kiln::tensor<T>(kiln::maximum(ta, tb)).to_vector(),
               mn = kiln::tensor<T>(kiln::minimum(ta, tb)).to_vector(),
               band = kiln::tensor<T>(ta & tb).to_vector(),
               bor = kiln::tensor<T>(ta | tb).to_vector(),
               bxor = kiln::tensor<T>(ta ^ tb).to_vector(), bnot = kiln::tensor<T>(~ta).to_vector(),
               ab = kiln::tensor<T>(kiln::abs(ta)).to_vector(),
               sg = kiln::tensor<T>(kiln::sign(ta)).to_vector(),
               fl = kiln::tensor<T>(kiln::floor(ta)).to_vector();
    const auto lt = kiln::tensor<bool>(ta < tb).to_vector(),
               ge = kiln::tensor<bool>(ta >= tb).to_vector(),
               eq = kiln::tensor<bool>(ta == tb).to_vector(),
               ne = kiln::tensor<bool>(ta != tb).to_vector();
    for (std::size_t i = 0; i < n; ++i) {
      const T x = a[i], y = b[i];
      const auto ux = static_cast<std::uint64_t>(x), uy = static_cast<std::uint64_t>(y);
      INFO(kiln::name(kiln::dtype_of<T>()) << " x " << +x << " y " << +y);
      REQUIRE(add[i] == wrap<T>(ux + uy));
      REQUIRE(sub[i] == wrap<T>(ux - uy));
      REQUIRE(mul[i] == wrap<T>(ux * uy));
      T q = 0, r = 0;
      if (y != 0) {
        if (std::is_signed_v<T> && y == T(-1))
          q = wrap<T>(0 - ux), r = 0;
        else
          q = T(x / y), r = T(x % y);
      }
      REQUIRE(div[i] == q);
      REQUIRE(mod[i] == r);
      REQUIRE(mx[i] == (x < y ? y : x));
      REQUIRE(mn[i] == (y < x ? y : x));
      REQUIRE(band[i] == T(x & y));
      REQUIRE(bor[i] == T(x | y));
      REQUIRE(bxor[i] == T(x ^ y));
      REQUIRE(bnot[i] == T(~x));
      REQUIRE(ab[i] == (x < 0 ? wrap<T>(0 - ux) : x));
      REQUIRE(sg[i] == T((x > 0) - (x < 0)));
      REQUIRE(fl[i] == x);
      REQUIRE(lt[i] == (x < y));
      REQUIRE(ge[i] == (x >= y));
      REQUIRE(eq[i] == (x == y));
      REQUIRE(ne[i] == (x != y));
    }
  }
}

} // namespace

TEST_CASE("integer arithmetic, bitwise and comparison ops are exact", "[ops]") {
  integer_ops<std::int32_t>(-1000000, 1000000);
  integer_ops<std::int64_t>(-(std::int64_t(1) << 40), std::int64_t(1) << 40);
  integer_ops<std::uint8_t>(0, 255);
  integer_ops<std::uint32_t>(0, 4000000000);
  integer_ops<std::int32_t>(-3, 3); // many equal pairs and zero divisors
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
