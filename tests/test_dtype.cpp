// Element types and the promotion rule (dtype.hpp), checked on real expressions.
#include "support.hpp"

using kiln::dtype;

TEST_CASE("dtype names, sizes and mapping", "[dtype]") {
  STATIC_REQUIRE(kiln::dtype_of<float>() == dtype::f32);
  STATIC_REQUIRE(kiln::dtype_of<kiln::half>() == dtype::f16);
  STATIC_REQUIRE(kiln::dtype_of<kiln::bfloat16>() == dtype::bf16);
  STATIC_REQUIRE(kiln::dtype_of<std::uint8_t>() == dtype::u8);
  STATIC_REQUIRE(std::is_same_v<kiln::type_of_dtype_t<dtype::i64>, std::int64_t>);
  CHECK(kiln::name(dtype::bf16) == "bf16");
  CHECK(kiln::size_of(dtype::f16) == 2);
  CHECK(kiln::size_of(dtype::i64) == 8);
  CHECK(kiln::tensor<double>::dtype() == dtype::f64);
  CHECK(sizeof(kiln::half) == 2);
  CHECK(sizeof(kiln::bfloat16) == 2);
}

TEST_CASE("tensor-tensor promotion follows the documented table", "[dtype]") {
  // Written out independently of the implementation: {a, b, expected}.
  const dtype b8 = dtype::b8, u8 = dtype::u8, i32 = dtype::i32, u32 = dtype::u32, i64 = dtype::i64,
              f16 = dtype::f16, bf16 = dtype::bf16, f32 = dtype::f32, f64 = dtype::f64;
  const dtype table[][3] = {{b8, b8, b8},     {b8, u8, u8},     {b8, f16, f16},  {u8, i32, i32},
                            {u8, u32, u32},   {u8, i64, i64},   {i32, u32, i64}, {i32, i64, i64},
                            {u32, i64, i64},  {u32, u32, u32},  {i32, f16, f16}, {i64, f32, f32},
                            {u8, bf16, bf16}, {f16, bf16, f32}, {f16, f32, f32}, {bf16, f64, f64},
                            {f32, f64, f64},  {i64, f64, f64},  {f16, f16, f16}, {u32, f32, f32}};
  for (const auto& row : table) {
    INFO(kiln::name(row[0]) << " with " << kiln::name(row[1]));
    CHECK(kiln::promote(row[0], row[1]) == row[2]);
    CHECK(kiln::promote(row[1], row[0]) == row[2]);
  }
}

TEST_CASE("expressions carry the promoted type, scalars do not widen", "[dtype]") {
  const auto f = kiln::ones<float>({2});
  const auto i = kiln::ones<std::int32_t>({2});
  const auto u = kiln::ones<std::uint8_t>({2});
  const auto h = kiln::ones<kiln::half>({2});
  STATIC_REQUIRE(std::is_same_v<kiln::value_t<decltype(2.0 * f)>, float>);
  STATIC_REQUIRE(std::is_same_v<kiln::value_t<decltype(f * 2)>, float>);
  STATIC_REQUIRE(std::is_same_v<kiln::value_t<decltype(3 + u)>, std::uint8_t>);
  STATIC_REQUIRE(std::is_same_v<kiln::value_t<decltype(i * 2.5)>, double>);
  STATIC_REQUIRE(std::is_same_v<kiln::value_t<decltype(i * 2.5f)>, float>);
  STATIC_REQUIRE(std::is_same_v<kiln::value_t<decltype(h * 2.0)>, kiln::half>);
  STATIC_REQUIRE(std::is_same_v<kiln::value_t<decltype(i + f)>, float>);
  STATIC_REQUIRE(std::is_same_v<kiln::value_t<decltype(i + u)>, std::int32_t>);
  STATIC_REQUIRE(std::is_same_v<kiln::value_t<decltype(kiln::exp(i))>, double>);
  STATIC_REQUIRE(std::is_same_v<kiln::value_t<decltype(kiln::exp(u))>, float>);
  STATIC_REQUIRE(std::is_same_v<kiln::value_t<decltype(f < i)>, bool>);
  STATIC_REQUIRE(std::is_same_v<kiln::value_t<decltype(kiln::where(f > 0, i, 0.5f))>, float>);
  STATIC_REQUIRE(
      std::is_same_v<kiln::value_t<decltype(kiln::cast<std::int64_t>(f))>, std::int64_t>);
  STATIC_REQUIRE(std::is_same_v<kiln::value_t<decltype(kiln::floor(i))>, std::int32_t>);
  // A scalar that cannot be the tensor's type is an error, not a silent wrap.
  CHECK_THROWS_AS(u + 300, kiln::error);
  CHECK_THROWS_AS(u + -1, kiln::error);
  CHECK(kiln::tensor<std::uint8_t>(u + 254).to_vector() == std::vector<std::uint8_t>{255, 255});
  // 2.5 stays 2.5 when the result is f64.
  CHECK(kiln::tensor<double>(i * 2.5).to_vector() == std::vector<double>{2.5, 2.5});
}

TEST_CASE("float to integer conversion saturates and maps NaN to 0", "[dtype]") {
  const auto f = kiln::from<float>({1e10f, -1e10f, NAN, 2.7f, -2.7f, 255.5f});
  CHECK(kiln::tensor<std::int32_t>(kiln::cast<std::int32_t>(f)).to_vector() ==
        std::vector<std::int32_t>{INT32_MAX, INT32_MIN, 0, 2, -2, 255});
  CHECK(kiln::tensor<std::uint8_t>(kiln::cast<std::uint8_t>(f)).to_vector() ==
        std::vector<std::uint8_t>{255, 0, 0, 2, 0, 255});
  CHECK(kiln::tensor<bool>(kiln::cast<bool>(f)).to_vector() ==
        std::vector<bool>{true, true, true, true, true, true});
}
