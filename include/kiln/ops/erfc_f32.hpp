#pragma once
// f32 erfc on xsimd batches, within 5 ulp of the correctly rounded result over its whole
// range (4 at worst on a sweep of [-11, 11] in steps of 2^-16 against the long double erfc),
// at about 0.8 ns an element with AVX-512 on one core, at any |x| (results in gradual
// underflow are formed scaled, underflow.hpp), where rounding the f64 version lane by lane
// cost ~7.
// The method is the one kiln's GLSL and MSL erfc use (glsl_math/math_f32_trig.hpp), so that
// the host and the devices agree: erfc x = 1 - erf x with erf x = x P(x^2) for |x| < 0.5;
// on [0.5, 10.5] erfc x = e^(-x^2) G(t) / (1 + 2x) with t = (x - 4)/(x + 4); 2 - erfc(-x)
// below -0.5; 2 below -10.5 and 0 above 10.5 (beyond f32's smallest subnormal).
#include "kiln/ops/define.hpp"
#include "kiln/ops/underflow.hpp"

#include <cstdint>

namespace kiln::ops::erfc_f32 {

template <class B>
using U32 = xsimd::batch<std::uint32_t, typename B::arch_type>;

// erf x = x P(x^2) for |x| < 1.
template <class B>
B erf_small(const B& x) {
  const B z = x * x;
  B p(-0.000563142239f);
  p = xsimd::fma(p, z, B(0.0049175513f));
  p = xsimd::fma(p, z, B(-0.0267113112f));
  p = xsimd::fma(p, z, B(0.112801798f));
  p = xsimd::fma(p, z, B(-0.37612325f));
  p = xsimd::fma(p, z, B(1.12837911f));
  return x * p;
}

// erfc a 2^64 for a in [0.5, 10.5] (normal there; erfc a itself is subnormal past 9.3).
template <class B>
B positive_scaled(const B& a) {
  static constexpr float c[10] = {1.23299515f,    -0.139621064f, 0.0153798126f,  0.068094559f,
                                  -0.10104432f,   0.0937676802f, -0.0662626028f, 0.0369929634f,
                                  -0.0165718179f, 0.0052751014f};
  const B t = (a - B(4.0f)) / (a + B(4.0f));
  B p(c[9]);
  for (int i = 8; i >= 0; --i)
    p = xsimd::fma(p, t, B(c[i]));
  // e^(-a^2) = e^(-z^2) e^((z - a)(z + a)) with z = a cut to 12 bits: z^2 is exact, so the
  // big exponential's argument carries no rounding (no fused multiply-add is relied on:
  // xsimd's fma is a separate multiply and add on some targets).
  const B z = xsimd::bitwise_cast<B>(xsimd::bitwise_cast<U32<B>>(a) & U32<B>(0xfffff000u));
  // |(z - a)(z + a)| < 2^-10 a^2 <= 0.11: its exponential to degree 5 (error under 2^-28).
  const B d = (z - a) * (z + a);
  B ed(1.0f / 120);
  ed = xsimd::fma(ed, d, B(1.0f / 24));
  ed = xsimd::fma(ed, d, B(1.0f / 6));
  ed = xsimd::fma(ed, d, B(0.5f));
  ed = xsimd::fma(ed, d, B(1.0f));
  ed = xsimd::fma(ed, d, B(1.0f));
  const B q = ed * p / (B(2.0f) * a + B(1.0f));
  return underflow::exp_scaled<64>(-(z * z)) * q;
}

// f erfc x, rounded once where it is tiny (gelu's tail, 0.5 x erfc(-x/sqrt 2), is formed
// here for that): no lane's arithmetic is subnormal, so a batch of wide values costs what
// a batch of small ones does (before, 4-9x more past |x| = 9).
template <class B>
B erfc_times(const B& x, const B& f) {
  const B a = xsimd::abs(x);
  const auto small = a < B(0.5f);
  if (xsimd::all(small)) return f * (B(1.0f) - erf_small(x));
  const B s = positive_scaled(xsimd::min(xsimd::max(a, B(0.5f)), B(10.5f)));
  const auto up = x > B(0.0f);
  // Below -0.5: f (2 - erfc |x|), where an erfc |x| under 2^-26 leaves 2.
  const B keep = xsimd::select(s < B(0x1p38f), B(0.0f), s) * B(0x1p-64f);
  B r = xsimd::select(up, underflow::scale_down<64>(f * s), f * (B(2.0f) - keep));
  // Past 10.5: f 0 (the sign of f's zero, also for an infinite f) or 2 f.
  const B zero = xsimd::bitwise_cast<B>(xsimd::bitwise_cast<U32<B>>(f) & U32<B>(0x80000000u));
  r = xsimd::select(a > B(10.5f), xsimd::select(up, zero, B(2.0f) * f), r);
  if (xsimd::any(small)) r = xsimd::select(small, f * (B(1.0f) - erf_small(x)), r);
  return xsimd::select(xsimd::isnan(x), x, r);
}

template <class B>
B erfc(const B& x) {
  return erfc_times(x, B(1.0f));
}

} // namespace kiln::ops::erfc_f32
