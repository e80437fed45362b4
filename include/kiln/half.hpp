#pragma once
// 16-bit floating types. Arithmetic goes through float (as on every CPU without native
// fp16 ALUs); conversion from float rounds to nearest, ties to even, and keeps NaN/Inf.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace kiln {

namespace detail {
inline std::uint16_t float_to_half_bits(float f) noexcept {
  std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) // Inf or NaN (NaN stays quiet NaN)
    return sign | (x > 0x7f800000u ? 0x7e00u : 0x7c00u);
  if (x >= 0x477ff000u) return sign | 0x7c00u; // >= 65520 rounds to Inf
  if (x < 0x38800000u) {                       // below 2^-14: half subnormal or zero
    // Scaling by 2^24 is exact; nearbyint rounds ties to even in the default mode.
    const float m = std::nearbyint(std::bit_cast<float>(x) * 16777216.0f);
    return sign | static_cast<std::uint16_t>(m);
  }
  const std::uint32_t odd = (x >> 13) & 1u;
  x += 0xc8000fffu + odd; // rebias exponent by -112 and round to nearest even
  return sign | static_cast<std::uint16_t>(x >> 13);
}

inline float half_bits_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  const std::uint32_t man = h & 0x3ffu;
  if (exp == 0) { // zero or subnormal: man * 2^-24, exact in float
    const float v = static_cast<float>(man) * 5.9604644775390625e-8f;
    return std::bit_cast<float>(std::bit_cast<std::uint32_t>(v) | sign);
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (man << 13));
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (man << 13));
}

inline std::uint16_t float_to_bfloat16_bits(float f) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  const std::uint32_t rounded = x + 0x7fffu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>(rounded >> 16);
}

inline float bfloat16_bits_to_float(std::uint16_t b) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

// A double (or wide integer) rounded to float "to odd": toward zero, with the lowest bit
// set when inexact. Rounding that to a 16-bit format (RNE) gives the same result as
// rounding the original value once, because float keeps more than two extra bits; plain
// RNE to float first would round twice and could land on a tie that goes the wrong way.
inline float round_to_odd_float(double d) noexcept {
  const float f = static_cast<float>(d);
  if (d != d || std::isinf(f) || static_cast<double>(f) == d) return f;
  std::uint32_t b = std::bit_cast<std::uint32_t>(f);
  if (std::fabs(static_cast<double>(f)) > std::fabs(d)) --b; // one step toward zero
  return std::bit_cast<float>(b | 1u);
}
template <class I>
float round_to_odd_float(I i) noexcept {
  double d = static_cast<double>(i); // exact up to 2^53; above, make it odd as well
  const long double exact = static_cast<long double>(i);
  if (static_cast<long double>(d) != exact) {
    if (std::fabs(static_cast<long double>(d)) > std::fabs(exact)) d = std::nextafter(d, 0.0);
    d = std::bit_cast<double>(std::bit_cast<std::uint64_t>(d) | 1u);
  }
  return round_to_odd_float(d);
}

// One template for both formats: they differ only in their conversions.
template <std::uint16_t (*ToBits)(float), float (*FromBits)(std::uint16_t)>
struct float16_base {
  std::uint16_t bits = 0;

  constexpr float16_base() = default;
  float16_base(float f) noexcept : bits(ToBits(f)) {}
  explicit float16_base(double d) noexcept : bits(ToBits(round_to_odd_float(d))) {}
  template <class I>
  requires std::is_integral_v<I>
  explicit float16_base(I i) noexcept : bits(ToBits(round_to_odd_float(i))) {}

  static float16_base from_bits(std::uint16_t b) noexcept {
    float16_base h;
    h.bits = b;
    return h;
  }
  operator float() const noexcept { return FromBits(bits); }

  friend bool operator==(float16_base a, float16_base b) noexcept { return float(a) == float(b); }
  friend auto operator<=>(float16_base a, float16_base b) noexcept { return float(a) <=> float(b); }
};
} // namespace detail

using half = detail::float16_base<detail::float_to_half_bits, detail::half_bits_to_float>;
using bfloat16 =
    detail::float16_base<detail::float_to_bfloat16_bits, detail::bfloat16_bits_to_float>;

} // namespace kiln

template <>
class std::numeric_limits<kiln::half> : public std::numeric_limits<float> {
public:
  static constexpr int digits = 11;
  static kiln::half epsilon() noexcept { return kiln::half::from_bits(0x1400); }
  static kiln::half max() noexcept { return kiln::half::from_bits(0x7bff); }
  static kiln::half lowest() noexcept { return kiln::half::from_bits(0xfbff); }
  static kiln::half min() noexcept { return kiln::half::from_bits(0x0400); }
  static kiln::half infinity() noexcept { return kiln::half::from_bits(0x7c00); }
  static kiln::half quiet_NaN() noexcept { return kiln::half::from_bits(0x7e00); }
};

template <>
class std::numeric_limits<kiln::bfloat16> : public std::numeric_limits<float> {
public:
  static constexpr int digits = 8;
  static kiln::bfloat16 epsilon() noexcept { return kiln::bfloat16::from_bits(0x3c00); }
  static kiln::bfloat16 max() noexcept { return kiln::bfloat16::from_bits(0x7f7f); }
  static kiln::bfloat16 lowest() noexcept { return kiln::bfloat16::from_bits(0xff7f); }
  static kiln::bfloat16 min() noexcept { return kiln::bfloat16::from_bits(0x0080); }
  static kiln::bfloat16 infinity() noexcept { return kiln::bfloat16::from_bits(0x7f80); }
  static kiln::bfloat16 quiet_NaN() noexcept { return kiln::bfloat16::from_bits(0x7fc0); }
};
