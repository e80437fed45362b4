#pragma once
// Element types and the type-promotion rule.
//
// Promotion between two tensors (numpy-like, but a float type is never widened by an
// integer): bool < u8 < i32 < i64 for integers, u32 with a signed type goes to i64;
// any integer with a float keeps the float type; f16 with bf16 gives f32; otherwise the
// wider float wins. A plain C++ scalar never widens a tensor: if the scalar's category
// (bool < integer < float) is not above the tensor's, the tensor's type wins
// (`2.0 * tensor<float>` is float, `3 + tensor<u8>` is u8); otherwise both are promoted.
#include "kiln/half.hpp"

#include <concepts>
#include <cstdint>
#include <limits>
#include <string_view>
#include <type_traits>

namespace kiln {

enum class dtype : std::uint8_t { b8, u8, i32, u32, i64, f16, bf16, f32, f64 };

template <class T>
inline constexpr bool is_element_v =
    std::is_same_v<T, bool> || std::is_same_v<T, std::uint8_t> || std::is_same_v<T, std::int32_t> ||
    std::is_same_v<T, std::uint32_t> || std::is_same_v<T, std::int64_t> ||
    std::is_same_v<T, half> || std::is_same_v<T, bfloat16> || std::is_same_v<T, float> ||
    std::is_same_v<T, double>;

template <class T>
concept element = is_element_v<T>;

template <element T>
constexpr dtype dtype_of() {
  if constexpr (std::is_same_v<T, bool>)
    return dtype::b8;
  else if constexpr (std::is_same_v<T, std::uint8_t>)
    return dtype::u8;
  else if constexpr (std::is_same_v<T, std::int32_t>)
    return dtype::i32;
  else if constexpr (std::is_same_v<T, std::uint32_t>)
    return dtype::u32;
  else if constexpr (std::is_same_v<T, std::int64_t>)
    return dtype::i64;
  else if constexpr (std::is_same_v<T, half>)
    return dtype::f16;
  else if constexpr (std::is_same_v<T, bfloat16>)
    return dtype::bf16;
  else if constexpr (std::is_same_v<T, float>)
    return dtype::f32;
  else
    return dtype::f64;
}

template <dtype D>
struct type_of_dtype;
template <>
struct type_of_dtype<dtype::b8> {
  using type = bool;
};
template <>
struct type_of_dtype<dtype::u8> {
  using type = std::uint8_t;
};
template <>
struct type_of_dtype<dtype::i32> {
  using type = std::int32_t;
};
template <>
struct type_of_dtype<dtype::u32> {
  using type = std::uint32_t;
};
template <>
struct type_of_dtype<dtype::i64> {
  using type = std::int64_t;
};
template <>
struct type_of_dtype<dtype::f16> {
  using type = half;
};
template <>
struct type_of_dtype<dtype::bf16> {
  using type = bfloat16;
};
template <>
struct type_of_dtype<dtype::f32> {
  using type = float;
};
template <>
struct type_of_dtype<dtype::f64> {
  using type = double;
};
template <dtype D>
using type_of_dtype_t = typename type_of_dtype<D>::type;

constexpr std::string_view name(dtype d) {
  constexpr std::string_view names[] = {"bool", "u8",   "i32", "u32", "i64",
                                        "f16",  "bf16", "f32", "f64"};
  return names[static_cast<int>(d)];
}

namespace detail {
// At namespace scope: a table local to size_of was built on the stack at every call, and the
// load right after those stores stalled the host pass.
inline constexpr std::size_t dtype_sizes[] = {1, 1, 4, 4, 8, 2, 2, 4, 8};
} // namespace detail
constexpr std::size_t size_of(dtype d) { return detail::dtype_sizes[static_cast<int>(d)]; }

constexpr bool is_floating(dtype d) { return d >= dtype::f16; }
constexpr bool is_integral(dtype d) { return d >= dtype::u8 && d <= dtype::i64; }

// bool < integer < float
constexpr int category(dtype d) { return d == dtype::b8 ? 0 : is_floating(d) ? 2 : 1; }

constexpr dtype promote(dtype a, dtype b) {
  if (a == b) return a;
  if (a == dtype::b8) return b;
  if (b == dtype::b8) return a;
  if (is_floating(a) != is_floating(b)) return is_floating(a) ? a : b;
  if (is_floating(a)) {
    if ((a == dtype::f16 && b == dtype::bf16) || (a == dtype::bf16 && b == dtype::f16))
      return dtype::f32;
    return a > b ? a : b; // f16/bf16 < f32 < f64
  }
  // both integers
  if (a == dtype::u32 || b == dtype::u32) {
    const dtype other = a == dtype::u32 ? b : a;
    return other == dtype::u8 ? dtype::u32 : dtype::i64;
  }
  return a > b ? a : b; // u8 < i32 < i64
}

template <class A, class B>
using promote_t = type_of_dtype_t<promote(dtype_of<A>(), dtype_of<B>())>;

// The kiln element type a plain C++ scalar stands for.
template <class S>
struct scalar_element {
  using type = std::conditional_t<
      std::is_same_v<S, bool>, bool,
      std::conditional_t<
          std::is_floating_point_v<S>, std::conditional_t<(sizeof(S) <= 4), float, double>,
          std::conditional_t<
              std::is_signed_v<S>, std::conditional_t<(sizeof(S) <= 4), std::int32_t, std::int64_t>,
              std::conditional_t<
                  (sizeof(S) == 1), std::uint8_t,
                  std::conditional_t<(sizeof(S) <= 4), std::uint32_t, std::int64_t>>>>>;
};
template <element S>
struct scalar_element<S> {
  using type = S;
};
template <class S>
using scalar_element_t = typename scalar_element<S>::type;

// A tensor of type T combined with a C++ scalar of type S.
template <element T, element S>
using promote_with_scalar_t =
    std::conditional_t<(category(dtype_of<S>()) <= category(dtype_of<T>())), T, promote_t<T, S>>;

// Floating type used by math functions: integers become f64 (i32, u32, i64) or f32
// (bool, u8); float types stay as they are.
template <element T>
using float_of_t = std::conditional_t<
    is_floating(dtype_of<T>()), T,
    std::conditional_t<(dtype_of<T>() == dtype::b8 || dtype_of<T>() == dtype::u8), float, double>>;

// The type host code computes in: 16-bit floats compute in float and round on store.
template <class T>
using compute_t =
    std::conditional_t<std::is_same_v<T, half> || std::is_same_v<T, bfloat16>, float, T>;

// Convert one element value between kiln types (via float for the 16-bit types). Float
// to integer saturates and sends NaN to 0, so no conversion is undefined behaviour.
template <class To, class From>
constexpr To convert(From v) noexcept {
  using F = compute_t<From>;
  if constexpr (std::is_same_v<To, From>)
    return v;
  else if constexpr (std::is_same_v<To, bool>)
    return static_cast<F>(v) != F(0);
  else if constexpr (std::is_same_v<To, half> || std::is_same_v<To, bfloat16>) {
    // Round once: doubles and wide integers go through the 16-bit types' own
    // constructors (rounding to odd on the way), not through a float RNE first.
    if constexpr (std::is_same_v<F, bool>)
      return To(v ? 1.0f : 0.0f);
    else if constexpr (std::is_same_v<F, double> || std::is_integral_v<F>)
      return To(static_cast<F>(v));
    else
      return To(static_cast<float>(static_cast<F>(v)));
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<F>) {
    const F f = static_cast<F>(v);
    if (!(f == f)) return To(0);
    // Compare in long double: the limits of i64 are not exact in float/double.
    const long double l = f;
    if (l <= static_cast<long double>(std::numeric_limits<To>::lowest()))
      return std::numeric_limits<To>::lowest();
    if (l >= static_cast<long double>(std::numeric_limits<To>::max()))
      return std::numeric_limits<To>::max();
    return static_cast<To>(f);
  } else
    return static_cast<To>(static_cast<F>(v));
}

} // namespace kiln
