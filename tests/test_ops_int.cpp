// Integer ops (u8, i32, u32, i64) against exact references written here: wrap-around
// arithmetic, C++ division and remainder with division by zero giving 0 and INT_MIN / -1
// wrapping (arithmetic.hpp), bitwise ops, comparisons, maximum/minimum/clamp, neg, abs,
// sign; with tensor and scalar operands, mixed integer types, broadcasting. Sizes: 37
// (scalar tail) and 100003 (xsimd batches where an op has them, and the thread pool).
#include "support.hpp"

namespace {

const std::size_t sizes[] = {37, 100003};

template <class T>
T wrap(std::uint64_t v) {
  return static_cast<T>(v);
}
template <class T>
std::uint64_t u(T v) {
  return static_cast<std::uint64_t>(v);
}

// The documented integer / and %: truncation, remainder with the dividend's sign, 0 for a
// zero divisor, and MIN / -1 wraps to MIN (remainder 0).
template <class T>
T ref_div(T x, T y) {
  if (y == 0) return 0;
  if (std::is_signed_v<T> && y == T(-1)) return wrap<T>(0 - u(x));
  return T(x / y);
}
template <class T>
T ref_mod(T x, T y) {
  if (y == 0) return 0;
  if (std::is_signed_v<T> && y == T(-1)) return 0;
  return T(x % y);
}

template <class T>
std::vector<T> draw_ints(std::size_t n, std::int64_t lo, std::int64_t hi) {
  auto v = test::integers<T>(n, lo, hi);
  // The edges of the type, zero and -1, sprinkled in.
  const T edges[] = {std::numeric_limits<T>::min(), std::numeric_limits<T>::max(), T(0), T(1),
                     static_cast<T>(-1)};
  for (std::size_t i = 0; i < n; i += 7)
    v[i] = edges[test::draw(0, 4)];
  return v;
}

template <class T>
void integer_ops(std::int64_t lo, std::int64_t hi) {
  for (std::size_t n : sizes) {
    auto a = draw_ints<T>(n, lo, hi), b = draw_ints<T>(n, lo, hi);
    b[0] = 0; // division by zero
    if constexpr (std::is_signed_v<T>) {
      a[1] = std::numeric_limits<T>::min(); // MIN / -1 and negation
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
               ng = kiln::tensor<T>(-ta).to_vector(),
               ab = kiln::tensor<T>(kiln::abs(ta)).to_vector(),
               sg = kiln::tensor<T>(kiln::sign(ta)).to_vector(),
               fl = kiln::tensor<T>(kiln::floor(ta)).to_vector(),
               rn = kiln::tensor<T>(kiln::round(ta)).to_vector();
    const auto lt = kiln::tensor<bool>(ta < tb).to_vector(),
               le = kiln::tensor<bool>(ta <= tb).to_vector(),
               gt = kiln::tensor<bool>(ta > tb).to_vector(),
               ge = kiln::tensor<bool>(ta >= tb).to_vector(),
               eq = kiln::tensor<bool>(ta == tb).to_vector(),
               ne = kiln::tensor<bool>(ta != tb).to_vector(),
               land = kiln::tensor<bool>(ta && tb).to_vector(),
               lnot = kiln::tensor<bool>(!ta).to_vector();
    for (std::size_t i = 0; i < n; ++i) {
      const T x = a[i], y = b[i];
      INFO(kiln::name(kiln::dtype_of<T>()) << " x " << +x << " y " << +y << " (n " << n << ")");
      REQUIRE(add[i] == wrap<T>(u(x) + u(y)));
      REQUIRE(sub[i] == wrap<T>(u(x) - u(y)));
      REQUIRE(mul[i] == wrap<T>(u(x) * u(y)));
      REQUIRE(div[i] == ref_div(x, y));
      REQUIRE(mod[i] == ref_mod(x, y));
      REQUIRE(mx[i] == (x < y ? y : x));
      REQUIRE(mn[i] == (y < x ? y : x));
      REQUIRE(band[i] == T(x & y));
      REQUIRE(bor[i] == T(x | y));
      REQUIRE(bxor[i] == T(x ^ y));
      REQUIRE(bnot[i] == T(~x));
      REQUIRE(ng[i] == wrap<T>(0 - u(x)));
      REQUIRE(ab[i] == (x < 0 ? wrap<T>(0 - u(x)) : x));
      REQUIRE(sg[i] == T((x > 0) - (x < 0)));
      REQUIRE(fl[i] == x);
      REQUIRE(rn[i] == x);
      REQUIRE(lt[i] == (x < y));
      REQUIRE(le[i] == (x <= y));
      REQUIRE(gt[i] == (x > y));
      REQUIRE(ge[i] == (x >= y));
      REQUIRE(eq[i] == (x == y));
      REQUIRE(ne[i] == (x != y));
      REQUIRE(land[i] == (x != 0 && y != 0));
      REQUIRE(lnot[i] == (x == 0));
    }
  }
}

// Scalar operands: converted to T (they fit), and the same exact rules.
template <class T>
void integer_scalar_ops(std::int64_t lo, std::int64_t hi) {
  for (std::size_t n : sizes) {
    const auto a = draw_ints<T>(n, lo, hi);
    const auto ta = kiln::from(a, kiln::shape{std::int64_t(n)});
    const T s = static_cast<T>(test::draw(1, 100));
    const auto by0 = kiln::tensor<T>(ta / 0).to_vector();
    const auto mod0 = kiln::tensor<T>(ta % 0).to_vector();
    const auto divs = kiln::tensor<T>(ta / s).to_vector();
    const auto sdiv = kiln::tensor<T>(s / ta).to_vector();
    const auto mods = kiln::tensor<T>(ta % s).to_vector();
    const auto muls = kiln::tensor<T>(s * ta + 7).to_vector();
    const auto subs = kiln::tensor<T>(s - ta).to_vector();
    const auto cl = kiln::tensor<T>(kiln::clamp(ta, 3, s + 3)).to_vector();
    const auto cmp = kiln::tensor<bool>(ta >= s).to_vector();
    const auto bit = kiln::tensor<T>((ta & s) | 8).to_vector();
    for (std::size_t i = 0; i < n; ++i) {
      const T x = a[i];
      INFO(kiln::name(kiln::dtype_of<T>()) << " x " << +x << " s " << +s);
      REQUIRE(by0[i] == 0);
      REQUIRE(mod0[i] == 0);
      REQUIRE(divs[i] == ref_div(x, s));
      REQUIRE(sdiv[i] == ref_div(s, x));
      REQUIRE(mods[i] == ref_mod(x, s));
      REQUIRE(muls[i] == wrap<T>(u(s) * u(x) + 7));
      REQUIRE(subs[i] == wrap<T>(u(s) - u(x)));
      REQUIRE(cl[i] == std::min<T>(std::max<T>(x, T(3)), T(s + 3)));
      REQUIRE(cmp[i] == (x >= s));
      REQUIRE(bit[i] == T((x & s) | 8));
    }
  }
  if constexpr (std::is_signed_v<T>) { // MIN / -1 with a scalar divisor
    const auto m = kiln::full<T>({41}, std::numeric_limits<T>::min());
    const auto q = kiln::tensor<T>(m / -1).to_vector();
    const auto r = kiln::tensor<T>(m % -1).to_vector();
    CHECK(q == std::vector<T>(41, std::numeric_limits<T>::min()));
    CHECK(r == std::vector<T>(41, T(0)));
  }
}

} // namespace

TEST_CASE("i32 arithmetic, bitwise, comparison and logical ops are exact", "[ops][int]") {
  integer_ops<std::int32_t>(INT32_MIN, INT32_MAX);
  integer_ops<std::int32_t>(-3, 3); // many equal pairs and zero divisors
}
TEST_CASE("i64 arithmetic, bitwise, comparison and logical ops are exact", "[ops][int]") {
  integer_ops<std::int64_t>(INT64_MIN, INT64_MAX);
  integer_ops<std::int64_t>(-1000, 1000);
}
TEST_CASE("u8 arithmetic, bitwise, comparison and logical ops are exact", "[ops][int]") {
  integer_ops<std::uint8_t>(0, 255);
}
TEST_CASE("u32 arithmetic, bitwise, comparison and logical ops are exact", "[ops][int]") {
  integer_ops<std::uint32_t>(0, UINT32_MAX);
  integer_ops<std::uint32_t>(0, 5);
}

TEST_CASE("integer ops with scalars: division by zero, MIN / -1, clamp", "[ops][int]") {
  integer_scalar_ops<std::int32_t>(-100000, 100000);
  integer_scalar_ops<std::int64_t>(INT64_MIN, INT64_MAX);
  integer_scalar_ops<std::uint8_t>(0, 255);
  integer_scalar_ops<std::uint32_t>(0, UINT32_MAX);
}

TEST_CASE("mixed integer types meet in the promoted type, with broadcasting", "[ops][int]") {
  const std::int64_t r = test::draw(1, 50), c = test::draw(1, 3000);
  const auto v8 = test::integers<std::uint8_t>(c, 0, 255);
  const auto v32 = test::integers<std::int32_t>(r * c, INT32_MIN, INT32_MAX);
  const auto vu = test::integers<std::uint32_t>(r, 0, UINT32_MAX);
  const auto t8 = kiln::from(v8, kiln::shape{c});                   // [c]
  const auto t32 = kiln::from(v32, kiln::shape{r, c});              // [r, c]
  const auto tu = kiln::from(vu, kiln::shape{r}).unsqueeze(1);      // [r, 1]
  const auto s1 = kiln::tensor<std::int32_t>(t8 + t32).to_vector(); // i32, wraps
  const auto s2 = kiln::tensor<std::int64_t>(tu - t32).to_vector(); // i64, exact
  const auto s3 = kiln::tensor<std::uint32_t>(tu * t8).to_vector(); // u32, wraps
  const auto s4 = kiln::tensor<bool>(tu < t32).to_vector();         // compared as i64
  const auto s5 = kiln::tensor<std::int64_t>(kiln::maximum(tu, t32)).to_vector();
  for (std::int64_t i = 0; i < r; ++i)
    for (std::int64_t j = 0; j < c; ++j) {
      const std::size_t k = std::size_t(i * c + j);
      const std::int64_t a8 = v8[j], a32 = v32[k], au = vu[i];
      INFO("u8 " << a8 << " i32 " << a32 << " u32 " << au);
      REQUIRE(s1[k] == wrap<std::int32_t>(u(a8) + u(a32)));
      REQUIRE(s2[k] == au - a32);
      REQUIRE(s3[k] == std::uint32_t(au * a8));
      REQUIRE(s4[k] == (au < a32));
      REQUIRE(s5[k] == std::max(au, a32));
    }
}

TEST_CASE("bool tensors: bitwise and logical ops, ~ is logical not", "[ops][int]") {
  for (std::size_t n : sizes) {
    const auto ia = test::integers<int>(n, 0, 1), ib = test::integers<int>(n, 0, 1);
    const std::vector<bool> a(ia.begin(), ia.end()), b(ib.begin(), ib.end());
    std::vector<std::uint8_t> a8(ia.begin(), ia.end()), b8(ib.begin(), ib.end());
    const auto ta = kiln::cast<bool>(kiln::from(a8, kiln::shape{std::int64_t(n)})).eval();
    const auto tb = kiln::cast<bool>(kiln::from(b8, kiln::shape{std::int64_t(n)})).eval();
    STATIC_REQUIRE(std::is_same_v<kiln::value_t<decltype(ta & tb)>, bool>);
    const auto x_and = kiln::tensor<bool>(ta & tb).to_vector();
    const auto x_or = kiln::tensor<bool>(ta | tb).to_vector();
    const auto x_xor = kiln::tensor<bool>(ta ^ tb).to_vector();
    const auto x_not = kiln::tensor<bool>(~ta).to_vector();
    const auto l_xor = kiln::tensor<bool>(kiln::logical_xor(ta, tb)).to_vector();
    const auto l_or = kiln::tensor<bool>(kiln::logical_or(ta, tb)).to_vector();
    const auto l_and = kiln::tensor<bool>(kiln::logical_and(ta, !tb)).to_vector();
    const auto l_not = kiln::tensor<bool>(kiln::logical_not(ta)).to_vector();
    const auto as_int = kiln::tensor<std::int32_t>(ta & 6).to_vector(); // bool & int is int
    for (std::size_t i = 0; i < n; ++i) {
      REQUIRE(x_and[i] == (a[i] && b[i]));
      REQUIRE(x_or[i] == (a[i] || b[i]));
      REQUIRE(x_xor[i] == (a[i] != b[i]));
      REQUIRE(x_not[i] == !a[i]);
      REQUIRE(l_xor[i] == (a[i] != b[i]));
      REQUIRE(l_or[i] == (a[i] || b[i]));
      REQUIRE(l_and[i] == (a[i] && !b[i]));
      REQUIRE(l_not[i] == !a[i]);
      REQUIRE(as_int[i] == (int(a[i]) & 6));
    }
  }
}
