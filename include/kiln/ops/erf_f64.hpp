#pragma once
// f64 erf and erfc on xsimd batches, within a few ulp of the correctly rounded result
// (xsimd 8's own are off by up to ~70 ulp for erf and ~35000 for erfc). The method is the
// classic one of Sun's fdlibm (1993), whose published rational approximations these
// coefficients are: on |x| < 0.84375 erf(x) = x + x P(x^2)/Q(x^2); on [0.84375, 1.25)
// erf(|x|) = c + P(s)/Q(s), s = |x| - 1, c = 0.845062911510467529297 (erf(1) cut to
// 24 bits); above, erfc(|x|) = exp(-z^2 - 0.5625) exp((z - |x|)(z + |x|) + R/S) / |x|,
// R/S rational in 1/x^2 (one pair below 1/0.35, one above), where z is |x| with its low
// 32 bits cleared, so that z^2 and -z^2 - 0.5625 are exact and the big exponential's
// argument carries no rounding. A batch evaluates only the intervals its lanes fall in.
// Lanes outside the fast domain (erfc of |x| >= 26 or NaN, where results underflow
// gradually or are special) are the C library's.
#include "kiln/ops/define.hpp"

#include <cmath>
#include <cstdint>

namespace kiln::ops::erf_f64 {

// c0 + x (c1 + x (c2 + ...)), by Horner's rule.
template <class B, class... C>
B poly(const B& x, double c0, C... c) {
  if constexpr (sizeof...(C) == 0)
    return B(c0);
  else
    return xsimd::fma(poly(x, c...), x, B(c0));
}

inline constexpr double cut = 8.45062911510467529297e-01;

// Each lane's interval and the value of that interval's rational function (P/Q in x^2,
// P/Q in |x| - 1, or R/S in 1/x^2), with one division for the whole batch: the numerators
// and denominators are chosen per lane first. An interval no lane is in is not evaluated.
template <class B>
struct pieces {
  B ax, ac; // |x|, and |x| clamped into the tail's domain [1.25, top]
  typename B::batch_bool_type small, mid, tail;
  B q;
};

template <class B>
pieces<B> split(const B& x, double top) {
  pieces<B> p;
  p.ax = xsimd::abs(x);
  p.ac = xsimd::clip(p.ax, B(1.25), B(top));
  p.small = p.ax < B(0.84375);
  p.mid = p.ax >= B(0.84375) && p.ax < B(1.25);
  p.tail = p.ax >= B(1.25);
  B num(1.0), den(1.0);
  if (xsimd::any(p.tail)) {
    const B s = B(1.0) / (p.ac * p.ac);
    const auto low = p.ac < B(1.0 / 0.35);
    if (xsimd::any(low)) {
      num = poly(s, -9.86494403484714822705e-03, -6.93858572707181764372e-01,
                 -1.05586262253232909814e+01, -6.23753324503260060396e+01,
                 -1.62396669462573470355e+02, -1.84605092906711035994e+02,
                 -8.12874355063065934246e+01, -9.81432934416914548592e+00);
      den =
          poly(s, 1.0, 1.96512716674392571292e+01, 1.37657754143519042600e+02,
               4.34565877475229228821e+02, 6.45387271733267880336e+02, 4.29008140027567833386e+02,
               1.08635005541779435134e+02, 6.57024977031928170135e+00, -6.04244152148580987438e-02);
    }
    if (!xsimd::all(low)) {
      num = xsimd::select(low, num,
                          poly(s, -9.86494292470009928597e-03, -7.99283237680523006574e-01,
                               -1.77579549177547519889e+01, -1.60636384855821916062e+02,
                               -6.37566443368389627722e+02, -1.02509513161107724954e+03,
                               -4.83519191608651397019e+02));
      den = xsimd::select(low, den,
                          poly(s, 1.0, 3.03380607434824582924e+01, 3.25792512996573918826e+02,
                               1.53672958608443695994e+03, 3.19985821950859553908e+03,
                               2.55305040643316442583e+03, 4.74528541206955367215e+02,
                               -2.24409524465858183362e+01));
    }
  }
  if (xsimd::any(p.mid)) {
    const B s = p.ax - B(1.0);
    num = xsimd::select(p.mid,
                        poly(s, -2.36211856075265944077e-03, 4.14856118683748331666e-01,
                             -3.72207876035701323847e-01, 3.18346619901161753674e-01,
                             -1.10894694282396677476e-01, 3.54783043256182359371e-02,
                             -2.16637559486879084300e-03),
                        num);
    den = xsimd::select(p.mid,
                        poly(s, 1.0, 1.06420880400844228286e-01, 5.40397917702171048937e-01,
                             7.18286544141962662868e-02, 1.26171219808761642112e-01,
                             1.36370839120290507362e-02, 1.19844998467991074170e-02),
                        den);
  }
  if (xsimd::any(p.small)) {
    const B z = x * x;
    num = xsimd::select(p.small,
                        poly(z, 1.28379167095512558561e-01, -3.25042107247001499370e-01,
                             -2.84817495755985104766e-02, -5.77027029648944159157e-03,
                             -2.37630166566501626084e-05),
                        num);
    den = xsimd::select(p.small,
                        poly(z, 1.0, 3.97917223959155352819e-01, 6.50222499887672944485e-02,
                             5.08130628187576562776e-03, 1.32494738004321644526e-04,
                             -3.96022827877536812320e-06),
                        den);
  }
  p.q = num / den;
  return p;
}

// erfc(|x|) on the tail from its R/S: exp(-z^2 - 0.5625) exp((z - |x|)(z + |x|) + R/S) / |x|.
template <class B>
B tail(const pieces<B>& p) {
  using U = xsimd::batch<std::uint64_t, typename B::arch_type>;
  const B z = xsimd::bitwise_cast<B>(xsimd::bitwise_cast<U>(p.ac) & U(0xffffffff00000000ull));
  return xsimd::exp(-z * z - B(0.5625)) * xsimd::exp((z - p.ac) * (z + p.ac) + p.q) / p.ac;
}

template <class B>
KILN_MATH_FLATTEN B erfc(const B& x) {
  const pieces<B> p = split(x, 26.0); // erfc(x) is 2 to double precision below -6
  B r(0.0);
  if (xsimd::any(p.small)) {
    const B y = x * p.q;
    // Below 1/4 erf is small beside 1; above, 1/2 - (x - 1/2 + x y) keeps the digits.
    r = xsimd::select(x < B(0.25), B(1.0) - (x + y), B(0.5) - (y + (x - B(0.5))));
  }
  if (xsimd::any(p.mid))
    r = xsimd::select(p.mid, xsimd::select(x > B(0.0), B(1.0 - cut) - p.q, B(1.0) + (B(cut) + p.q)),
                      r);
  if (xsimd::any(p.tail)) {
    const B t = tail(p);
    r = xsimd::select(p.tail, xsimd::select(x > B(0.0), t, B(2.0) - t), r);
  }
  return detail::scalar_lanes(
      r, !(x < B(26.0)), [](double v) { return std::erfc(v); }, x);
}

template <class B>
KILN_MATH_FLATTEN B erf(const B& x) {
  const pieces<B> p = split(x, 6.0); // erf is 1 to double precision from 6 on
  B r = xsimd::fma(x, p.q, x);       // small (erf(-0) = -0 here)
  if (xsimd::any(p.mid)) r = xsimd::select(p.mid, xsimd::copysign(B(cut) + p.q, x), r);
  if (xsimd::any(p.tail)) r = xsimd::select(p.tail, xsimd::copysign(B(1.0) - tail(p), x), r);
  return xsimd::select(xsimd::isnan(x), x, r);
}

} // namespace kiln::ops::erf_f64
