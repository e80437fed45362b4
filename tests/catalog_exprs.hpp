#pragma once
// Every op of the catalog as expressions on placeholder tensors, for the compile-only tests of
// each dialect (test_cuda_codegen_catalog.cpp, test_msl_codegen.cpp): catalog<T, F64>() is one
// tuple of every op that applies to T, and a cast to every dtype. F64 false: a device without
// 64-bit floats (Metal), so no cast to f64 and no math on integers (computed in f64).
#include "support.hpp"

#include <tuple>

namespace catalog_exprs {

using kiln::tensor;

template <bool F64, class T>
auto casts(const tensor<T>& x) {
  auto c = std::make_tuple(kiln::cast<bool>(x), kiln::cast<std::uint8_t>(x),
                           kiln::cast<std::int32_t>(x), kiln::cast<std::uint32_t>(x),
                           kiln::cast<std::int64_t>(x), kiln::cast<kiln::half>(x),
                           kiln::cast<kiln::bfloat16>(x), kiln::cast<float>(x));
  if constexpr (F64)
    return std::tuple_cat(c, std::make_tuple(kiln::cast<double>(x)));
  else
    return c;
}

// Float math: computed in a float type (integers promote to f64).
template <class T>
auto math(const tensor<T>& x, const tensor<T>& y) {
  using namespace kiln;
  return std::make_tuple(exp(x), exp2(x), expm1(x), log(x), log2(x), log10(x), log1p(x), sqrt(x),
                         rsqrt(x), cbrt(x), sin(x), cos(x), tan(x), asin(x), acos(x), atan(x),
                         sinh(x), cosh(x), tanh(x), asinh(x), acosh(x), atanh(x), erf(x), erfc(x),
                         sigmoid(x), pow(x, y), atan2(x, y), fmod(x, y), gelu(x), gelu_tanh(x),
                         silu(x), softplus(x), leaky_relu(x, y));
}

template <class T>
auto common(const tensor<T>& x, const tensor<T>& y, const tensor<bool>& c) {
  using namespace kiln;
  return std::make_tuple(x == y, x != y, x<y, x <= y, x> y, x >= y, x && y, x || y, !x,
                         logical_xor(x, y), where(c, x, y), isnan(x), isinf(x), isfinite(x));
}

template <class T>
auto numbers(const tensor<T>& x, const tensor<T>& y, const tensor<T>& z) {
  using namespace kiln;
  return std::make_tuple(x + y, x - y, x * y, x / y, x % y, -x, abs(x), sign(x), maximum(x, y),
                         minimum(x, y), clamp(x, y, z), floor(x), ceil(x), round(x), trunc(x),
                         relu(x));
}

template <class T>
auto bits(const tensor<T>& x, const tensor<T>& y) {
  return std::make_tuple(x & y, x | y, x ^ y, ~x);
}

// Every op that applies to T, in one tuple of expressions.
template <class T, bool F64 = true>
auto catalog() {
  const tensor<T> x(kiln::shape{4, 4}), y(kiln::shape{4, 4}), z(kiln::shape{4, 4});
  const tensor<bool> c(kiln::shape{4, 4});
  auto all = std::tuple_cat(common(x, y, c), casts<F64>(x));
  if constexpr (std::is_same_v<T, bool>)
    return std::tuple_cat(all, bits(x, y));
  else if constexpr (kiln::is_floating(kiln::dtype_of<T>()))
    return std::tuple_cat(all, numbers(x, y, z), math(x, y));
  else if constexpr (F64)
    return std::tuple_cat(all, numbers(x, y, z), math(x, y), bits(x, y));
  else
    return std::tuple_cat(all, numbers(x, y, z), bits(x, y));
}

} // namespace catalog_exprs
