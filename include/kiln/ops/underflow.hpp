#pragma once
// Tiny results without subnormal arithmetic. On x86 a multiply with a subnormal operand or
// result takes a microcode assist (a batch loop of such multiplies ran 9x slower on an Intel
// Xeon), so SIMD kernels whose results may fall into gradual underflow (exp's last band,
// erfc's tail, gelu's negative tail) form them scaled by 2^S, in normal range, and round
// them onto the subnormal grid once, with an add: for |v| 2^-S below the least normal,
// |v| 2^(m - S) + 2^p (m: the least subnormal's exponent, p: the mantissa's bits) holds
// round(|v| 2^-S / least subnormal) in its low bits. Adds take subnormal operands without an
// assist; no multiply here sees one.
#include "kiln/ops/define.hpp"

#include <cstdint>

namespace kiln::ops::underflow {

template <class T>
struct format;
template <>
struct format<float> {
  using bits = std::uint32_t;
  static constexpr int mantissa = 23, least_normal = -126, least = -149, bias = 127;
  static constexpr float ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
};
template <>
struct format<double> {
  using bits = std::uint64_t;
  static constexpr int mantissa = 52, least_normal = -1022, least = -1074, bias = 1023;
  static constexpr double ln2_hi = 6.93145751953125e-1, ln2_lo = 1.42860682030941723212e-6;
};

// 2^e as a T, exactly, at compile time (e within T's normal range).
template <class T>
constexpr T pow2(int e) {
  T r = 1;
  for (; e > 0; --e)
    r *= 2;
  for (; e < 0; ++e)
    r /= 2;
  return r;
}

// v 2^-S, rounded once to T's nearest value (ties to even), subnormals included; v normal,
// zero, inf or NaN; S in [51, 126] (2^(m - S) finite in f64, 2^-S normal in f32).
template <int S, class B>
B scale_down(const B& v) {
  using T = typename B::value_type;
  using F = format<T>;
  static_assert(-F::least - S <= F::bias && S <= 126);
  using U = xsimd::batch<typename F::bits, typename B::arch_type>;
  const B a = xsimd::abs(v);
  const auto tiny = a < B(pow2<T>(S + F::least_normal));
  const B normal = xsimd::select(tiny, B(0), v) * B(pow2<T>(-S));
  const B grid = B(pow2<T>(F::mantissa));
  const B count = xsimd::select(tiny, a, B(0)) * B(pow2<T>(-F::least - S)) + grid;
  const U sub = (xsimd::bitwise_cast<U>(count) - xsimd::bitwise_cast<U>(grid)) |
                (xsimd::bitwise_cast<U>(v) & U(typename F::bits(1) << (sizeof(T) * 8 - 1)));
  return xsimd::select(tiny, xsimd::bitwise_cast<B>(sub), normal);
}

// e^r for |r| <= ln 2 / 2. f32: xsimd 8's polynomial, coefficient for coefficient, so that
// a normal result is the one xsimd::exp gives; f64: xsimd::exp itself (its reduction leaves
// r as it is).
template <class B>
B exp_reduced(const B& r) {
  if constexpr (std::is_same_v<typename B::value_type, float>) {
    B y(0x1.6ef19ep-10f);
    y = xsimd::fma(y, r, B(0x1.131b16p-7f));
    y = xsimd::fma(y, r, B(0x1.5552aep-5f));
    y = xsimd::fma(y, r, B(0x1.55534ap-3f));
    y = xsimd::fma(y, r, B(0.5f));
    return xsimd::fma(y, r * r, r) + B(1.0f);
  } else {
    return xsimd::exp(r);
  }
}

// e^x 2^S, for x where that is normal and k + S <= the largest exponent, k = round(x / ln 2)
// (f32, S = 64: x in [-103.98, 44]). The reduction x = k ln 2 + r is done here so that
// 2^(k + S) is built in normal range: xsimd's exp builds 2^k, which it cannot below 2^-126.
template <int S, class B>
B exp_scaled(const B& x) {
  using T = typename B::value_type;
  using F = format<T>;
  using U = xsimd::batch<typename F::bits, typename B::arch_type>;
  const B k = xsimd::nearbyint(x * B(T(1.44269504088896340736)));
  B r = xsimd::fnma(k, B(F::ln2_hi), x);
  r = xsimd::fnma(k, B(F::ln2_lo), r);
  // k + S + bias as an integer, read off the low bits of a sum with 1.5 2^p (|k| < 2^(p-1)).
  const B magic = B(T(1.5) * pow2<T>(F::mantissa));
  const U e = xsimd::bitwise_cast<U>(k + B(T(S + F::bias)) + magic) - xsimd::bitwise_cast<U>(magic);
  return exp_reduced(r) * xsimd::bitwise_cast<B>(e << F::mantissa);
}

} // namespace kiln::ops::underflow
