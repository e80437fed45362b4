#pragma once
// sin, cos and tan on xsimd batches with an argument reduction of kiln's own. xsimd picks
// one reduction for a whole batch, by the method its largest lane needs: a three-term one
// up to 20 pi, a longer one with tails up to 64 pi (f32) or 2^18 pi (f64), the scalar
// reduction beyond. Two defects followed: an element's value depended on its neighbours
// (a lane reduced by a bigger lane's method rounds differently), and in f64 the 20 pi
// method loses the result's leading bits next to a multiple of pi/2 (cos at the double
// nearest 29 pi/2 was 25,533 ulp off; with the longer method 1 ulp).
// Here every lane up to that bound is reduced by the longer method, r = x - n pi/2 with
// pi/2 in three parts and their tails (Cody and Waite); sin r and cos r are polynomials on
// |r| <= pi/4 (Cephes' minimax coefficients), taken by the quadrant n mod 4. Each lane's
// value depends on that lane alone. Lanes beyond the bound, infinities and NaN go to the C
// library lane by lane.
#include "kiln/ops/define.hpp"

#include <cmath>
#include <type_traits>
#include <utility>

namespace kiln::ops::trig {

template <class B>
struct reduced {
  B r;                                // x - n pi/2, |r| <= pi/4 (up to a rounding)
  B q;                                // n mod 4, in 0..3
  typename B::batch_bool_type inside; // lanes reduced here; the others are the C library's
};

template <class B>
reduced<B> reduce(const B& x) {
  namespace c = xsimd::constants;
  const B a = xsimd::abs(x);
  const auto inside = a <= c::mediumpi<B>(); // false for NaN
  const B n = xsimd::nearbyint(xsimd::select(inside, x, B(0)) * c::twoopi<B>());
  // Each part of pi/2 has so few bits that n times it is exact; the tail of each stage
  // carries what the subtraction before it lost.
  B r = x - n * c::pio2_1<B>();
  B t = r;
  B w = n * c::pio2_2<B>();
  r = t - w;
  w = n * c::pio2_2t<B>() - ((t - r) - w);
  t = r;
  w = n * c::pio2_3<B>();
  r = t - w;
  w = n * c::pio2_3t<B>() - ((t - r) - w);
  r = r - w;
  // |x| <= pi/4 is its own reduction: exactly x, the sign of a zero kept.
  r = xsimd::select(a <= c::pio4<B>(), x, r);
  // Lanes left to the C library get 0, so that xsimd never reduces a huge argument itself.
  r = xsimd::select(inside, r, B(0));
  // floor(n / 4) as a rounding: n / 4 - 3/8 is never a tie (SSE2 has no floor instruction).
  const B q = n - B(4) * xsimd::nearbyint(n * B(0.25) - B(0.375));
  return {r, q, inside};
}

// sin r and cos r for |r| <= pi/4 (a little beyond after rounding).
template <class B>
std::pair<B, B> sin_cos(const B& r) {
  const B z = r * r;
  B s, c;
  if constexpr (std::is_same_v<typename B::value_type, float>) {
    s = xsimd::fma(xsimd::fma(B(-1.9515295891e-4f), z, B(8.3321608736e-3f)), z,
                   B(-1.6666654611e-1f));
    c = xsimd::fma(xsimd::fma(B(2.443315711809948e-5f), z, B(-1.388731625493765e-3f)), z,
                   B(4.166664568298827e-2f));
  } else {
    s = B(1.58962301576546568060e-10);
    for (const double k :
         {-2.50507477628578072866e-8, 2.75573136213857245213e-6, -1.98412698295895385996e-4,
          8.33333333332211858878e-3, -1.66666666666666307295e-1})
      s = xsimd::fma(s, z, B(k));
    c = B(-1.13585365213876817300e-11);
    for (const double k :
         {2.08757008419747316778e-9, -2.75573141792967388112e-7, 2.48015872888517045348e-5,
          -1.38888888888730564116e-3, 4.16666666666665929218e-2})
      c = xsimd::fma(c, z, B(k));
  }
  // sin r = r + r^3 S(z) (r itself at +-0, whose sign the sum would lose); cos r =
  // 1 - z/2 + z^2 C(z).
  return {xsimd::select(r == B(0), r, xsimd::fma(r * z, s, r)),
          xsimd::fma(z * z, c, B(1) - B(0.5) * z)};
}

// sin x (shift 0), or cos x = sin(x + pi/2) (shift 1): the quadrant moved by one.
template <class B>
B sine(const B& x, int shift) {
  const auto d = reduce(x);
  const auto [s, c] = sin_cos(d.r);
  B q = d.q + B(shift);
  q = xsimd::select(q >= B(4), q - B(4), q);
  const B v = xsimd::select(q == B(1) || q == B(3), c, s);
  // Lanes past the reduction's bound: the C library's (define.hpp's scalar_lanes).
  return kiln::detail::scalar_lanes(
      xsimd::select(q >= B(2), -v, v), !d.inside,
      [shift](typename B::value_type e) { return shift ? std::cos(e) : std::sin(e); }, x);
}
template <class B>
B sin(const B& x) {
  return sine(x, 0);
}
template <class B>
B cos(const B& x) {
  return sine(x, 1);
}

// tan x = sin r / cos r in even quadrants, -cos r / sin r in odd ones.
template <class B>
B tan(const B& x) {
  const auto d = reduce(x);
  const auto [s, c] = sin_cos(d.r);
  const auto odd = d.q == B(1) || d.q == B(3);
  return kiln::detail::scalar_lanes(
      xsimd::select(odd, -c / s, s / c), !d.inside,
      [](typename B::value_type e) { return std::tan(e); }, x);
}

} // namespace kiln::ops::trig
