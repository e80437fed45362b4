// Element types and the promotion rule (dtype.hpp), checked on real expressions: the
// whole 9 x 9 table written out from the documented rule, the scalar rule for every
// tensor type and C++ scalar type, float_of for math on integers, and the values that
// come out, against references computed here in double.
#include "support.hpp"

#include <tuple>

using kiln::dtype;

namespace {

constexpr dtype b8 = dtype::b8, u8 = dtype::u8, i32 = dtype::i32, u32 = dtype::u32,
                i64 = dtype::i64, f16 = dtype::f16, bf16 = dtype::bf16, f32 = dtype::f32,
                f64 = dtype::f64;

// The documented rule, written out as a table (rows and columns in enum order): bool <
// u8 < i32 < i64 for integers, u32 with a signed type gives i64, an integer with a float
// keeps the float, f16 with bf16 gives f32, otherwise the wider float.
constexpr dtype table[9][9] = {
    //        b8    u8    i32   u32   i64   f16   bf16  f32   f64
    /* b8 */ {b8, u8, i32, u32, i64, f16, bf16, f32, f64},
    /* u8 */ {u8, u8, i32, u32, i64, f16, bf16, f32, f64},
    /* i32 */ {i32, i32, i32, i64, i64, f16, bf16, f32, f64},
    /* u32 */ {u32, u32, i64, u32, i64, f16, bf16, f32, f64},
    /* i64 */ {i64, i64, i64, i64, i64, f16, bf16, f32, f64},
    /* f16 */ {f16, f16, f16, f16, f16, f16, f32, f32, f64},
    /* bf16 */ {bf16, bf16, bf16, bf16, bf16, f32, bf16, f32, f64},
    /* f32 */ {f32, f32, f32, f32, f32, f32, f32, f32, f64},
    /* f64 */ {f64, f64, f64, f64, f64, f64, f64, f64, f64},
};
constexpr dtype expected(dtype a, dtype b) { return table[int(a)][int(b)]; }

using all_types = std::tuple<bool, std::uint8_t, std::int32_t, std::uint32_t, std::int64_t,
                             kiln::half, kiln::bfloat16, float, double>;

template <class F, std::size_t... I>
void for_types(F&& f, std::index_sequence<I...>) {
  (f(std::tuple_element_t<I, all_types>{}), ...);
}
template <class F>
void for_each_type(F&& f) {
  for_types(f, std::make_index_sequence<9>{});
}

template <class T>
const kiln::tensor<T>& tensor_of() {
  static const kiln::tensor<T> t = kiln::zeros<T>({2});
  return t;
}

// The kiln type a C++ scalar stands for, and its category (0 bool, 1 integer, 2 float).
template <class S>
constexpr dtype scalar_dtype() {
  if constexpr (std::is_same_v<S, bool>)
    return b8;
  else if constexpr (std::is_same_v<S, kiln::half>)
    return f16;
  else if constexpr (std::is_same_v<S, kiln::bfloat16>)
    return bf16;
  else if constexpr (std::is_floating_point_v<S>)
    return sizeof(S) == 4 ? f32 : f64;
  else if constexpr (std::is_signed_v<S>)
    return sizeof(S) <= 4 ? i32 : i64;
  else
    return sizeof(S) == 1 ? u8 : sizeof(S) <= 4 ? u32 : i64;
}
constexpr int category_of(dtype d) { return d == b8 ? 0 : d >= f16 ? 2 : 1; }

template <class T, class S>
void check_scalar_rule() {
  constexpr dtype t = kiln::dtype_of<T>(), s = scalar_dtype<S>();
  // The scalar never widens the tensor unless its category is above the tensor's.
  constexpr dtype want = category_of(s) <= category_of(t) ? t : expected(t, s);
  using W = kiln::type_of_dtype_t<want>;
  const auto& x = tensor_of<T>();
  const auto c = tensor_of<bool>();
  STATIC_REQUIRE(std::is_same_v<kiln::value_t<decltype(kiln::where(c, x, S(1)))>, W>);
  STATIC_REQUIRE(std::is_same_v<kiln::value_t<decltype(kiln::where(c, S(1), x))>, W>);
  STATIC_REQUIRE(std::is_same_v<kiln::value_t<decltype(x == S(1))>, bool>);
  if constexpr (t != b8 && s != b8) {
    STATIC_REQUIRE(std::is_same_v<kiln::value_t<decltype(x + S(1))>, W>);
    STATIC_REQUIRE(std::is_same_v<kiln::value_t<decltype(S(1) * x)>, W>);
  }
}

template <class T>
void check_scalar_rules_for() {
  check_scalar_rule<T, bool>();
  check_scalar_rule<T, signed char>();
  check_scalar_rule<T, unsigned char>();
  check_scalar_rule<T, short>();
  check_scalar_rule<T, unsigned short>();
  check_scalar_rule<T, int>();
  check_scalar_rule<T, unsigned>();
  check_scalar_rule<T, long>();
  check_scalar_rule<T, unsigned long>();
  check_scalar_rule<T, long long>();
  check_scalar_rule<T, float>();
  check_scalar_rule<T, double>();
  check_scalar_rule<T, long double>();
  check_scalar_rule<T, kiln::half>();
  check_scalar_rule<T, kiln::bfloat16>();
}

// Random values of type T that every type in the table can hold approximately.
template <class T>
std::vector<T> values(std::size_t n) {
  if constexpr (std::is_same_v<T, bool>) {
    auto v = test::integers<int>(n, 0, 1);
    return std::vector<T>(v.begin(), v.end());
  } else if constexpr (std::is_integral_v<T>) {
    return test::integers<T>(n, std::is_signed_v<T> ? -100 : 0, 200);
  } else {
    const auto f = test::uniform<float>(n, -100, 100);
    return std::vector<T>(f.begin(), f.end());
  }
}

// a + b evaluated by kiln equals the sum computed in double, rounded once to the
// promoted type (exact for the values drawn: every sum fits the promoted type).
template <class A, class B>
void check_sum_values() {
  using R = kiln::promote_t<A, B>;
  const std::int64_t n = test::draw(1, 300);
  const auto va = values<A>(n);
  const auto vb = values<B>(n);
  const auto ta = kiln::from(va, kiln::shape{n});
  const auto tb = kiln::from(vb, kiln::shape{n});
  const auto r = kiln::tensor<R>(ta + tb).to_vector();
  for (std::int64_t i = 0; i < n; ++i) {
    const double ref = double(kiln::convert<double>(va[i])) + double(kiln::convert<double>(vb[i]));
    INFO(kiln::name(kiln::dtype_of<A>()) << " + " << kiln::name(kiln::dtype_of<B>()));
    // kiln adds in R (16-bit types in float): the exact sum rounded once to R.
    R want;
    if constexpr (std::is_same_v<R, double>)
      want = ref;
    else
      want = kiln::convert<R>(static_cast<float>(ref));
    REQUIRE(kiln::convert<double>(r[i]) == kiln::convert<double>(want));
  }
}

} // namespace

TEST_CASE("dtype names, sizes, categories and the type mapping", "[dtype]") {
  const char* names[] = {"bool", "u8", "i32", "u32", "i64", "f16", "bf16", "f32", "f64"};
  const std::size_t sizes[] = {1, 1, 4, 4, 8, 2, 2, 4, 8};
  for (int d = 0; d < 9; ++d) {
    const auto dt = static_cast<dtype>(d);
    CHECK(kiln::name(dt) == names[d]);
    CHECK(kiln::size_of(dt) == sizes[d]);
    CHECK(kiln::is_floating(dt) == (d >= 5));
    CHECK(kiln::is_integral(dt) == (d >= 1 && d <= 4));
    CHECK(kiln::category(dt) == category_of(dt));
  }
  int index = 0;
  for_each_type([&](auto v) {
    using T = decltype(v);
    CHECK(kiln::dtype_of<T>() == static_cast<dtype>(index));
    CHECK(kiln::tensor<T>::dtype() == static_cast<dtype>(index));
    CHECK(sizeof(T) == sizes[index]);
    ++index;
  });
  STATIC_REQUIRE(std::is_same_v<kiln::type_of_dtype_t<dtype::b8>, bool>);
  STATIC_REQUIRE(std::is_same_v<kiln::type_of_dtype_t<dtype::u8>, std::uint8_t>);
  STATIC_REQUIRE(std::is_same_v<kiln::type_of_dtype_t<dtype::i32>, std::int32_t>);
  STATIC_REQUIRE(std::is_same_v<kiln::type_of_dtype_t<dtype::u32>, std::uint32_t>);
  STATIC_REQUIRE(std::is_same_v<kiln::type_of_dtype_t<dtype::i64>, std::int64_t>);
  STATIC_REQUIRE(std::is_same_v<kiln::type_of_dtype_t<dtype::f16>, kiln::half>);
  STATIC_REQUIRE(std::is_same_v<kiln::type_of_dtype_t<dtype::bf16>, kiln::bfloat16>);
  STATIC_REQUIRE(std::is_same_v<kiln::type_of_dtype_t<dtype::f32>, float>);
  STATIC_REQUIRE(std::is_same_v<kiln::type_of_dtype_t<dtype::f64>, double>);
}

TEST_CASE("promote: all 81 pairs follow the documented rule", "[dtype]") {
  for (int a = 0; a < 9; ++a)
    for (int b = 0; b < 9; ++b) {
      const auto da = static_cast<dtype>(a), db = static_cast<dtype>(b);
      INFO(kiln::name(da) << " with " << kiln::name(db));
      CHECK(kiln::promote(da, db) == expected(da, db));
    }
  STATIC_REQUIRE(kiln::promote(dtype::f16, dtype::bf16) == dtype::f32);
  STATIC_REQUIRE(kiln::promote(dtype::u32, dtype::i32) == dtype::i64);
}

TEST_CASE("expressions on two tensors carry the promoted type, all 81 pairs", "[dtype]") {
  const auto c = tensor_of<bool>();
  for_each_type([&](auto a) {
    for_each_type([&](auto b) {
      using A = decltype(a);
      using B = decltype(b);
      using W = kiln::type_of_dtype_t<expected(kiln::dtype_of<A>(), kiln::dtype_of<B>())>;
      const auto& x = tensor_of<A>();
      const auto& y = tensor_of<B>();
      STATIC_REQUIRE(std::is_same_v<kiln::value_t<decltype(kiln::where(c, x, y))>, W>);
      STATIC_REQUIRE(std::is_same_v<kiln::value_t<decltype(x < y)>, bool>);
      STATIC_REQUIRE(std::is_same_v<kiln::value_t<decltype(x && y)>, bool>);
      if constexpr (!std::is_same_v<A, bool> && !std::is_same_v<B, bool>) {
        STATIC_REQUIRE(std::is_same_v<kiln::value_t<decltype(x + y)>, W>);
        STATIC_REQUIRE(std::is_same_v<kiln::value_t<decltype(kiln::maximum(x, y))>, W>);
      }
      if constexpr (!kiln::is_floating(kiln::dtype_of<A>()) &&
                    !kiln::is_floating(kiln::dtype_of<B>()))
        STATIC_REQUIRE(std::is_same_v<kiln::value_t<decltype(x ^ y)>, W>);
    });
  });
}

TEST_CASE("a C++ scalar never widens a tensor of its category or above", "[dtype]") {
  for_each_type([](auto t) { check_scalar_rules_for<decltype(t)>(); });
  const auto f = kiln::ones<float>({2});
  const auto i = kiln::ones<std::int32_t>({2});
  const auto u = kiln::ones<std::uint8_t>({2});
  const auto h = kiln::ones<kiln::half>({2});
  STATIC_REQUIRE(std::is_same_v<kiln::value_t<decltype(2.0 * f)>, float>);
  STATIC_REQUIRE(std::is_same_v<kiln::value_t<decltype(3 + u)>, std::uint8_t>);
  STATIC_REQUIRE(std::is_same_v<kiln::value_t<decltype(i * 2.5)>, double>);
  STATIC_REQUIRE(std::is_same_v<kiln::value_t<decltype(i * 2.5f)>, float>);
  STATIC_REQUIRE(std::is_same_v<kiln::value_t<decltype(h * 2.0)>, kiln::half>);
  STATIC_REQUIRE(std::is_same_v<kiln::value_t<decltype(kiln::where(f > 0, i, 0.5f))>, float>);
  STATIC_REQUIRE(
      std::is_same_v<kiln::value_t<decltype(kiln::cast<std::int64_t>(f))>, std::int64_t>);
  STATIC_REQUIRE(std::is_same_v<kiln::value_t<decltype(kiln::floor(i))>, std::int32_t>);
  STATIC_REQUIRE(std::is_same_v<kiln::value_t<decltype(kiln::tensor<bool>() & 1)>, std::int32_t>);
}

TEST_CASE("scalar values: converted to the tensor's type, range-checked", "[dtype]") {
  const std::int64_t n = test::draw(1, 200);
  const auto fv = test::uniform<float>(n, -10, 10);
  const auto f = kiln::from(fv, kiln::shape{n});
  // 2.0 * tensor<float> is float arithmetic: the scalar becomes a float first.
  const auto r1 = kiln::tensor<float>(2.0 * f).to_vector();
  const auto r2 = kiln::tensor<float>(f * 0.1).to_vector();
  for (std::int64_t k = 0; k < n; ++k) {
    REQUIRE(r1[k] == 2.0f * fv[k]);
    REQUIRE(r2[k] == fv[k] * 0.1f);
  }
  // u8 arithmetic wraps in u8; i32 * 2.5 is f64 and exact.
  const auto uv = test::integers<std::uint8_t>(n, 0, 255);
  const auto u = kiln::from(uv, kiln::shape{n});
  const auto iv = test::integers<std::int32_t>(n, -1000000, 1000000);
  const auto i = kiln::from(iv, kiln::shape{n});
  const auto ru = kiln::tensor<std::uint8_t>(u * 3 + 200).to_vector();
  const auto ri = kiln::tensor<double>(i * 2.5).to_vector();
  for (std::int64_t k = 0; k < n; ++k) {
    REQUIRE(ru[k] == std::uint8_t((uv[k] * 3 + 200) % 256));
    REQUIRE(ri[k] == iv[k] * 2.5);
  }
  // A half tensor times a double scalar: half arithmetic (the scalar rounded to half).
  const auto hv = std::vector<kiln::half>(fv.begin(), fv.end());
  const auto h = kiln::from(hv, kiln::shape{n});
  const auto rh = kiln::tensor<kiln::half>(h * 0.1).to_vector();
  const float tenth = float(kiln::half(0.1f));
  for (std::int64_t k = 0; k < n; ++k)
    REQUIRE(rh[k].bits == kiln::half(float(hv[k]) * tenth).bits);
  // A scalar that the tensor's type cannot hold is an error, not a silent wrap.
  CHECK_THROWS_AS(u + 256, kiln::error);
  CHECK_THROWS_AS(u + -1, kiln::error);
  CHECK_NOTHROW(u + 255);
  CHECK_THROWS_AS(i + 2147483648LL, kiln::error);
  CHECK_THROWS_AS(i + 3000000000u, kiln::error);
  CHECK_NOTHROW(i + 2147483647LL);
  const auto w = kiln::ones<std::uint32_t>({2});
  CHECK_THROWS_AS(w + -1, kiln::error);
  CHECK_NOTHROW(w + 4294967295u);
  const auto l = kiln::ones<std::int64_t>({2});
  CHECK_THROWS_AS(l + 18446744073709551615ull, kiln::error);
  CHECK_NOTHROW(l + 9223372036854775807LL);
  CHECK(kiln::tensor<std::uint8_t>(u * 0 + 254).to_vector() ==
        std::vector<std::uint8_t>(std::size_t(n), 254));
}

TEST_CASE("two-tensor values in the promoted type", "[dtype]") {
  check_sum_values<std::uint8_t, std::int32_t>();
  check_sum_values<std::uint32_t, std::int32_t>();
  check_sum_values<std::uint32_t, std::uint8_t>();
  check_sum_values<std::int64_t, float>();
  check_sum_values<std::int32_t, double>();
  check_sum_values<kiln::half, kiln::bfloat16>();
  check_sum_values<std::uint8_t, kiln::half>();
  check_sum_values<kiln::bfloat16, float>();
  check_sum_values<std::int32_t, kiln::bfloat16>();
  // u32 with i32 gives i64: no wrap at 2^32, no sign trap.
  const auto u = kiln::from<std::uint32_t>({4000000000u, 0u, 4294967295u});
  const auto s = kiln::from<std::int32_t>({-1, -2147483647 - 1, 2147483647});
  CHECK(kiln::tensor<std::int64_t>(u + s).to_vector() ==
        std::vector<std::int64_t>{3999999999, -2147483648LL, 6442450942LL});
  CHECK(kiln::tensor<bool>(u > s).to_vector() == std::vector<bool>{true, true, true});
}

TEST_CASE("math on integers computes in float_of: f32 for bool/u8, f64 for the rest", "[dtype]") {
  STATIC_REQUIRE(std::is_same_v<kiln::float_of_t<bool>, float>);
  STATIC_REQUIRE(std::is_same_v<kiln::float_of_t<std::uint8_t>, float>);
  STATIC_REQUIRE(std::is_same_v<kiln::float_of_t<std::int32_t>, double>);
  STATIC_REQUIRE(std::is_same_v<kiln::float_of_t<std::uint32_t>, double>);
  STATIC_REQUIRE(std::is_same_v<kiln::float_of_t<std::int64_t>, double>);
  STATIC_REQUIRE(std::is_same_v<kiln::float_of_t<kiln::half>, kiln::half>);
  STATIC_REQUIRE(std::is_same_v<kiln::float_of_t<kiln::bfloat16>, kiln::bfloat16>);
  STATIC_REQUIRE(std::is_same_v<kiln::float_of_t<float>, float>);
  STATIC_REQUIRE(std::is_same_v<kiln::float_of_t<double>, double>);
  for_each_type([](auto v) {
    using T = decltype(v);
    STATIC_REQUIRE(
        std::is_same_v<kiln::value_t<decltype(kiln::exp(tensor_of<T>()))>, kiln::float_of_t<T>>);
  });
  STATIC_REQUIRE(
      std::is_same_v<
          kiln::value_t<decltype(kiln::pow(tensor_of<std::uint8_t>(), tensor_of<std::int32_t>()))>,
          double>);
  STATIC_REQUIRE(
      std::is_same_v<
          kiln::value_t<decltype(kiln::atan2(tensor_of<std::int32_t>(), tensor_of<kiln::half>()))>,
          kiln::half>);
  STATIC_REQUIRE(std::is_same_v<kiln::value_t<decltype(kiln::sqrt(tensor_of<std::int64_t>() +
                                                                  tensor_of<std::uint8_t>()))>,
                                double>);

  const std::int64_t n = test::draw(50, 5000);
  const auto iv = test::integers<std::int32_t>(n, -2000000000, 2000000000);
  const auto lv = test::integers<std::int64_t>(n, 1, std::int64_t(1) << 62);
  const auto uv = test::integers<std::uint8_t>(n, 0, 255);
  const auto ti = kiln::from(iv, kiln::shape{n});
  const auto tl = kiln::from(lv, kiln::shape{n});
  const auto tu = kiln::from(uv, kiln::shape{n});
  const auto si = kiln::tensor<double>(kiln::sin(ti)).to_vector();
  const auto ll = kiln::tensor<double>(kiln::log(tl)).to_vector();
  const auto su = kiln::tensor<float>(kiln::sqrt(tu)).to_vector();
  const auto eu = kiln::tensor<float>(kiln::exp(tu * 0 - 1)).to_vector(); // exp(-1) in float
  const auto bs = kiln::tensor<float>(kiln::sqrt(tu > 100)).to_vector();
  for (std::int64_t k = 0; k < n; ++k) {
    INFO("i32 " << iv[k] << ", i64 " << lv[k] << ", u8 " << +uv[k]);
    // In double: within 1 ulp of the long double result (in float they would be far off).
    CHECK(test::ulp_distance(si[k], double(std::sin(static_cast<long double>(iv[k])))) <= 1);
    CHECK(test::ulp_distance(ll[k], double(std::log(static_cast<long double>(lv[k])))) <= 1);
    CHECK(su[k] == std::sqrt(float(uv[k]))); // sqrt is exact in float
    CHECK(bs[k] == (uv[k] > 100 ? 1.0f : 0.0f));
  }
  // (u8 * 0 - 1) wraps to 255 in u8 before exp: exp(255) overflows float.
  CHECK(std::isinf(eu[0]));
}

TEST_CASE("conversions: float to integer saturates, NaN gives 0, non-zero is true", "[dtype]") {
  const auto f = kiln::from<float>({1e10f, -1e10f, NAN, 2.7f, -2.7f, 255.5f});
  CHECK(kiln::tensor<std::int32_t>(kiln::cast<std::int32_t>(f)).to_vector() ==
        std::vector<std::int32_t>{INT32_MAX, INT32_MIN, 0, 2, -2, 255});
  CHECK(kiln::tensor<std::uint8_t>(kiln::cast<std::uint8_t>(f)).to_vector() ==
        std::vector<std::uint8_t>{255, 0, 0, 2, 0, 255});
  CHECK(kiln::tensor<bool>(kiln::cast<bool>(f)).to_vector() ==
        std::vector<bool>{true, true, true, true, true, true});
  // Random values across and beyond each integer range, with the reference written here.
  const std::int64_t n = test::draw(100, 3000);
  auto v = test::uniform<double>(n, -1e19, 1e19);
  const auto small = test::uniform<double>(n, -600, 600);
  for (std::int64_t k = 0; k < n; k += 2)
    v[k] = small[k];
  v[0] = NAN;
  v[1] = INFINITY;
  if (n > 2) v[2] = -INFINITY;
  if (n > 3) v[3] = -0.0;
  const auto t = kiln::from(v, kiln::shape{n});
  const auto c8 = kiln::tensor<std::uint8_t>(kiln::cast<std::uint8_t>(t)).to_vector();
  const auto c32 = kiln::tensor<std::int32_t>(kiln::cast<std::int32_t>(t)).to_vector();
  const auto cu32 = kiln::tensor<std::uint32_t>(kiln::cast<std::uint32_t>(t)).to_vector();
  const auto c64 = kiln::tensor<std::int64_t>(kiln::cast<std::int64_t>(t)).to_vector();
  const auto cb = kiln::tensor<bool>(kiln::cast<bool>(t)).to_vector();
  auto sat = [](double x, double lo, double hi) {
    if (std::isnan(x)) return 0.0;
    if (x <= lo) return lo;
    if (x >= hi) return hi;
    return std::trunc(x);
  };
  for (std::int64_t k = 0; k < n; ++k) {
    const double x = v[k];
    INFO("x = " << x);
    REQUIRE(double(c8[k]) == sat(x, 0, 255));
    REQUIRE(double(c32[k]) == sat(x, -2147483648.0, 2147483647.0));
    REQUIRE(double(cu32[k]) == sat(x, 0, 4294967295.0));
    if (x >= 9223372036854775807.0)
      REQUIRE(c64[k] == INT64_MAX);
    else if (x <= -9223372036854775808.0)
      REQUIRE(c64[k] == INT64_MIN);
    else
      REQUIRE(double(c64[k]) == sat(x, -9.3e18, 9.3e18));
    REQUIRE(cb[k] == (x != 0 || std::isnan(x)));
  }
}
