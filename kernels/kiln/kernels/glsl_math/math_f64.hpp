#pragma once
// The double half of kiln's GLSL math library, less the circular, hyperbolic and error
// functions (glsl_math_f64_trig.hpp); glsl_math.hpp has the accuracy table.
// GLSL has no double exp/log/trig: everything here is range reduction plus minimax
// polynomials whose coefficients were fitted for kiln (Remez exchange in 80-digit
// arithmetic, then rounded to double), in the style of fdlibm and Cephes.
// Literals carry `lf`: an unsuffixed literal is a float and would lose half its digits.
#include "kiln/kernels/glsl_math/math_function.hpp"

namespace kiln::jit::glsl::detail {

inline constexpr math_function f64_math[] = {
    // Double-double arithmetic. Exact products split the operands (Veltkamp/Dekker) rather
    // than use fma(): lavapipe does not fuse fma(), on doubles or floats. `precise` keeps
    // compilers from contracting or reassociating the error terms away.
    {"kiln_dd_f64", "double", R"glsl(
dvec2 kiln_mul12_f64(double a, double b) {
  precise double ca = 134217729.0lf * a, ah = ca - (ca - a), al = a - ah;
  precise double cb = 134217729.0lf * b, bh = cb - (cb - b), bl = b - bh;
  precise double p = a * b, e = ((ah * bh - p) + ah * bl + al * bh) + al * bl;
  return dvec2(p, e);
}
dvec2 kiln_add12_f64(double a, double b) {
  precise double s = a + b, v = s - a, e = (a - (s - v)) + (b - v);
  return dvec2(s, e);
}
dvec2 kiln_mul22_f64(dvec2 a, dvec2 b) {
  dvec2 p = kiln_mul12_f64(a.x, b.x);
  precise double e = p.y + (a.x * b.y + a.y * b.x), s = p.x + e, l = e - (s - p.x);
  return dvec2(s, l);
}
dvec2 kiln_add22_f64(dvec2 a, dvec2 b) {
  dvec2 s = kiln_add12_f64(a.x, b.x);
  precise double e = s.y + (a.y + b.y), h = s.x + e, l = e - (h - s.x);
  return dvec2(h, l);
}
)glsl",
     ""},
    // Bit-level helpers: special values, 2^n, scaling, and x = m 2^e.
    {"kiln_bits_f64", "double", R"glsl(
double kiln_inf_f64() { return packDouble2x32(uvec2(0u, 0x7ff00000u)); }
double kiln_nan_f64() { return packDouble2x32(uvec2(0u, 0x7ff80000u)); }
bool kiln_signbit_f64(double x) { return (unpackDouble2x32(x).y & 0x80000000u) != 0u; }
double kiln_pow2i_f64(int n) { return packDouble2x32(uvec2(0u, uint(n + 1023) << 20)); }
// x 2^n for |n| <= 2044 in two exact steps and one rounding (into the subnormals too).
double kiln_ldexp_f64(double x, int n) {
  int h = n >> 1;
  precise double y = x * kiln_pow2i_f64(h) * kiln_pow2i_f64(n - h);
  return y;
}
// Finite x > 0 (subnormals too) as (m, e), x = m 2^e, m in [sqrt(1/2), sqrt(2)).
dvec2 kiln_frexp_f64(double x) {
  double e = 0.0lf;
  if (x < 2.2250738585072014e-308lf) {
    x *= 18014398509481984.0lf;
    e = -54.0lf;
  }
  uvec2 w = unpackDouble2x32(x);
  uint hx = w.y + (0x3ff00000u - 0x3fe6a09eu);
  double m = packDouble2x32(uvec2(w.x, (hx & 0x000fffffu) + 0x3fe6a09eu));
  return dvec2(m, e + double(int(hx >> 20) - 1023));
}
)glsl",
     ""},
    // e^(x + xl) 2^s: x = k ln2 + r, |r| <= ln2/2 (ln2 in two parts, k ln2_hi exact),
    // e^r = 1 + r + r^2 P(r). Clamping x makes the result overflow or underflow (gradually)
    // exactly where it should.
    {"kiln_exp_core_f64", "double", R"glsl(
const double kiln_expm1_c_f64[11] = double[11](0.5lf, 0.16666666666666677lf,
  0.04166666666666651lf, 0.0083333333333217lf, 0.0013888888888962314lf,
  0.00019841269885939472lf, 2.4801587172613057e-05lf, 2.7557244403769723e-06lf,
  2.7557402611341254e-07lf, 2.510896762731072e-08lf, 2.087532977924703e-09lf);
// (e^r - 1 - r) / r^2 for |r| <= ln2/2.
double kiln_expm1_poly_f64(double r) {
  double p = kiln_expm1_c_f64[10];
  for (int i = 9; i >= 0; --i) p = p * r + kiln_expm1_c_f64[i];
  return p;
}
double kiln_exp_core_f64(double x, double xl, int s) {
  x = clamp(x, -760.0lf, 720.0lf);
  double k = roundEven(x * 1.4426950408889634lf);
  precise double hi = x - k * 0.6931471806019545lf;
  precise double r = hi - (k * -4.2009150726810846e-11lf - xl);
  precise double e = 1.0lf + (r + r * r * kiln_expm1_poly_f64(r));
  return kiln_ldexp_f64(e, int(k) + s);
}
)glsl",
     "kiln_bits_f64"},
    {"kiln_exp", "double", R"glsl(
double kiln_exp(double x) { return isnan(x) ? x : kiln_exp_core_f64(x, 0.0lf, 0); }
)glsl",
     "kiln_exp_core_f64"},
    // 2^x = 2^k e^(f ln2), f = x - k exact, f ln2 as a double-double.
    {"kiln_exp2", "double", R"glsl(
double kiln_exp2(double x) {
  if (isnan(x)) return x;
  x = clamp(x, -1100.0lf, 1100.0lf);
  double k = roundEven(x), f = x - k;
  dvec2 t = kiln_mul12_f64(f, 0.6931471805599453lf);
  return kiln_exp_core_f64(t.x, t.y + f * 2.3190468138462996e-17lf, int(k));
}
)glsl",
     "kiln_exp_core_f64 kiln_dd_f64"},
    // Small |x|: the polynomial. Else e^x - 1 = 2^k (expm1(r) + 1 - 2^-k), one rounding
    // before an exact scaling; r carries its reduction error c.
    {"kiln_expm1", "double", R"glsl(
double kiln_expm1(double x) {
  if (isnan(x) || x == 0.0lf) return x;
  if (abs(x) < 0.34657359027997264lf) {
    precise double y = x + x * x * kiln_expm1_poly_f64(x);
    return y;
  }
  x = clamp(x, -800.0lf, 720.0lf);
  double k = roundEven(x * 1.4426950408889634lf);
  precise double hi = x - k * 0.6931471806019545lf, lo = k * -4.2009150726810846e-11lf;
  precise double r = hi - lo, c = (hi - r) - lo;
  precise double em = r + r * r * kiln_expm1_poly_f64(r), e = em + (c + c * em);
  int ki = int(k);
  if (ki > 52 || ki < -53) {
    precise double y = kiln_ldexp_f64(1.0lf + e, ki) - 1.0lf;
    return y;
  }
  precise double y = e + (1.0lf - kiln_pow2i_f64(-ki));
  return kiln_ldexp_f64(y, ki);
}
)glsl",
     "kiln_exp_core_f64"},
    // log(1 + f) for f = m - 1, m in [sqrt(1/2), sqrt(2)), in fdlibm's form
    // f - f^2/2 + s (f^2/2 + R(s^2)), s = f / (2 + f): within 1 ulp.
    {"kiln_log_core_f64", "double", R"glsl(
double kiln_log1pm_f64(double f) {
  double s = f / (2.0lf + f), z = s * s;
  double p = 0.1479547460730886lf;
  p = p * z + 0.15314098888618569lf;
  p = p * z + 0.18183562403180015lf;
  p = p * z + 0.2222219861081748lf;
  p = p * z + 0.28571428742015237lf;
  p = p * z + 0.39999999999416375lf;
  p = p * z + 0.6666666666666734lf;
  precise double hfsq = 0.5lf * f * f, y = f - (hfsq - s * (hfsq + z * p));
  return y;
}
// NaN, log(0) = -inf, log(x < 0) = NaN, log(inf) = inf; 0.0 where x is positive finite.
double kiln_log_special_f64(double x) {
  if (x == 0.0lf) return -kiln_inf_f64();
  if (!(x > 0.0lf)) return kiln_nan_f64();
  return isinf(x) ? x : 0.0lf;
}
)glsl",
     "kiln_bits_f64"},
    {"kiln_log", "double", R"glsl(
double kiln_log(double x) {
  if (!(x > 0.0lf) || isinf(x)) return kiln_log_special_f64(x);
  dvec2 me = kiln_frexp_f64(x);
  precise double y = me.y * 0.6931471806019545lf +
                     (kiln_log1pm_f64(me.x - 1.0lf) + me.y * -4.2009150726810846e-11lf);
  return y;
}
)glsl",
     "kiln_log_core_f64"},
    {"kiln_log2", "double", R"glsl(
double kiln_log2(double x) {
  if (!(x > 0.0lf) || isinf(x)) return kiln_log_special_f64(x);
  dvec2 me = kiln_frexp_f64(x);
  precise double y = me.y + kiln_log1pm_f64(me.x - 1.0lf) * 1.4426950408889634lf;
  return y;
}
)glsl",
     "kiln_log_core_f64"},
    {"kiln_log10", "double", R"glsl(
double kiln_log10(double x) {
  if (!(x > 0.0lf) || isinf(x)) return kiln_log_special_f64(x);
  dvec2 me = kiln_frexp_f64(x);
  precise double y = me.y * 0.3010299956658855lf + (me.y * -1.9043128467164274e-12lf +
                     kiln_log1pm_f64(me.x - 1.0lf) * 0.4342944819032518lf);
  return y;
}
)glsl",
     "kiln_log_core_f64"},
    // u = 1 + x rounded; log1p(x) = log(u) + c/u with c the rounding error of u (fdlibm).
    {"kiln_log1p", "double", R"glsl(
double kiln_log1p(double x) {
  if (x == 0.0lf) return x;
  if (!(x > -1.0lf) || isinf(x)) return kiln_log_special_f64(1.0lf + x);
  precise double u = 1.0lf + x;
  dvec2 me = kiln_frexp_f64(u);
  precise double c = me.y > 0.0lf ? 1.0lf - (u - x) : x - (u - 1.0lf);
  if (me.y >= 54.0lf) c = 0.0lf;
  precise double y = me.y * 0.6931471806019545lf +
                     (kiln_log1pm_f64(me.x - 1.0lf) + (me.y * -4.2009150726810846e-11lf + c / u));
  return y;
}
)glsl",
     "kiln_log_core_f64"},
    {"kiln_sqrt", "double", R"glsl(
double kiln_sqrt(double x) { return x < 0.0lf ? kiln_nan_f64() : sqrt(x); }
)glsl",
     "kiln_bits_f64"},
    // 1/sqrt(x) rounded twice (within 1 ulp); `precise` keeps it from becoming
    // inversesqrt(), an estimate on most GPUs.
    {"kiln_rsqrt", "double", R"glsl(
double kiln_rsqrt(double x) {
  precise double y = 1.0lf / kiln_sqrt(x);
  return y;
}
)glsl",
     "kiln_sqrt"},
    // |x| = t 2^(3q), t in [1, 8): a quadratic guess for t^(1/3) (1.5%), three Halley steps
    // written as a small correction, then the exact scaling by 2^q.
    {"kiln_cbrt", "double", R"glsl(
double kiln_cbrt(double x) {
  if (isnan(x) || isinf(x) || x == 0.0lf) return x;
  double a = abs(x);
  int e = 0;
  if (a < 2.2250738585072014e-308lf) {
    a *= 18014398509481984.0lf;
    e = -54;
  }
  uvec2 w = unpackDouble2x32(a);
  e += int(w.y >> 20) - 1023;
  int q = (e + 1200) / 3 - 400;
  double m = packDouble2x32(uvec2(w.x, (w.y & 0x000fffffu) | 0x3ff00000u));
  double t = m * double(1 << (e - 3 * q));
  double y = 0.7625026380486756lf + t * (0.26807556713590003lf + t * -0.014670660386439799lf);
  for (int i = 0; i < 3; ++i) {
    precise double y3 = y * y * y, n = y * (y3 - t) / (2.0lf * y3 + t);
    y = y - n;
  }
  y *= kiln_pow2i_f64(q);
  return x < 0.0lf ? -y : y;
}
)glsl",
     "kiln_bits_f64"},
    // 1 / (1 + e^-x) without overflow: e = e^-|x|, then 1/(1+e) or e/(1+e) (as the host).
    {"kiln_sigmoid", "double", R"glsl(
double kiln_sigmoid(double x) {
  double e = kiln_exp(-abs(x));
  return (x >= 0.0lf ? 1.0lf : e) / (1.0lf + e);
}
)glsl",
     "kiln_exp"},
    // log x as a double-double (relative error ~2^-100) for pow: log m = 2 atanh(s),
    // s = (m - 1)/(m + 1) = 2s + 2s^3/3 + s^5 P(s^2), the first two terms in double-double.
    {"kiln_log_dd_f64", "double", R"glsl(
dvec2 kiln_log_dd_f64(double x) {
  dvec2 me = kiln_frexp_f64(x);
  double f = me.x - 1.0lf;
  dvec2 u = kiln_add12_f64(me.x, 1.0lf);
  double sh = f / u.x;
  dvec2 q = kiln_mul12_f64(sh, u.x);
  precise double sl = (((f - q.x) - q.y) - sh * u.y) / u.x;
  dvec2 s = dvec2(sh, sl), z = kiln_mul22_f64(s, s);
  double p = 0.13195814469635964lf;
  p = p * z.x + 0.13256873983194614lf;
  p = p * z.x + 0.153867548788185lf;
  p = p * z.x + 0.1818178442120481lf;
  p = p * z.x + 0.2222222251929486lf;
  p = p * z.x + 0.2857142857010315lf;
  p = p * z.x + 0.4000000000000225lf;
  dvec2 s3 = kiln_mul22_f64(z, s);
  dvec2 c = kiln_mul22_f64(s3, dvec2(0.6666666666666666lf, 3.700743415417188e-17lf));
  dvec2 m = kiln_add22_f64(kiln_add22_f64(2.0lf * s, c), dvec2(z.x * z.x * sh * p, 0.0lf));
  dvec2 k = kiln_add12_f64(me.y * 0.6931471806019545lf, me.y * -4.2009150726810846e-11lf);
  return kiln_add22_f64(k, m);
}
)glsl",
     "kiln_dd_f64 kiln_bits_f64"},
    // C99 F.9.4.4 special cases, then |x|^y = e^(y log|x|) with y log|x| a double-double.
    {"kiln_pow", "double", R"glsl(
double kiln_pow(double x, double y) {
  if (y == 0.0lf || x == 1.0lf) return 1.0lf;
  if (isnan(x) || isnan(y)) return x + y;
  double ax = abs(x);
  bool yint = floor(y) == y;
  bool yodd = yint && abs(y) < 9007199254740992.0lf && floor(y * 0.5lf) != y * 0.5lf;
  if (isinf(y)) {
    if (ax == 1.0lf) return 1.0lf;
    return (ax < 1.0lf) == (y < 0.0lf) ? kiln_inf_f64() : 0.0lf;
  }
  if (ax == 0.0lf || isinf(ax)) { // x^y is 0 or inf; odd y keeps the sign of x
    bool big = (ax == 0.0lf) == (y < 0.0lf);
    double r = big ? kiln_inf_f64() : 0.0lf;
    return yodd && kiln_signbit_f64(x) ? -r : r;
  }
  if (x < 0.0lf && !yint) return kiln_nan_f64();
  dvec2 l = kiln_log_dd_f64(ax);
  double r;
  if (abs(y * l.x) > 800.0lf) {
    r = y * l.x > 0.0lf ? kiln_inf_f64() : 0.0lf;
  } else {
    dvec2 p = kiln_mul12_f64(y, l.x);
    r = kiln_exp_core_f64(p.x, p.y + y * l.y, 0);
  }
  return yodd && x < 0.0lf ? -r : r;
}
)glsl",
     "kiln_log_dd_f64 kiln_exp_core_f64 kiln_bits_f64"},
    // Exact: the divisor scaled to the dividend's exponent, then halved step by step, each
    // subtraction exact (Sterbenz). One step per binade between them (up to 2100).
    {"kiln_fmod", "double", R"glsl(
double kiln_fmod(double x, double y) {
  if (isnan(x) || isnan(y) || isinf(x) || y == 0.0lf) return kiln_nan_f64();
  double ax = abs(x), ay = abs(y), back = 1.0lf;
  if (!(ax >= ay)) return x;
  if (ax < 1.0e-270lf) { // both tiny: scale into the normal range (exact both ways)
    ax *= 1.6069380442589903e+60lf;
    ay *= 1.6069380442589903e+60lf;
    back = 6.223015277861142e-61lf;
  }
  double my = ay;
  int ey = 0;
  if (my < 2.2250738585072014e-308lf) {
    my *= 18014398509481984.0lf;
    ey = -54;
  }
  uvec2 wx = unpackDouble2x32(ax), wy = unpackDouble2x32(my);
  int ex = int(wx.y >> 20);
  ey += int(wy.y >> 20) - 1023;
  // t = the mantissa of y at the exponent of x; t <= ax < 2t after at most one halving.
  double t = packDouble2x32(uvec2(wy.x, (wy.y & 0x000fffffu) | (uint(ex) << 20)));
  int n = ex - 1023 - ey;
  if (t > ax) {
    t *= 0.5lf;
    n -= 1;
  }
  for (int i = 0; i <= n; ++i) {
    if (ax >= t) ax -= t;
    t *= 0.5lf;
  }
  ax *= back;
  return x < 0.0lf ? -ax : ax;
}
)glsl",
     "kiln_bits_f64"},
    {"kiln_floor", "double", "double kiln_floor(double x) { return floor(x); }\n", ""},
    {"kiln_ceil", "double", "double kiln_ceil(double x) { return ceil(x); }\n", ""},
    {"kiln_trunc", "double", "double kiln_trunc(double x) { return trunc(x); }\n", ""},
    // Half away from zero (GLSL's round() may pick either way); x - trunc(x) is exact.
    {"kiln_round", "double", R"glsl(
double kiln_round(double x) {
  double t = trunc(x);
  return abs(x - t) >= 0.5lf ? t + sign(x) : t;
}
)glsl",
     ""},
};

} // namespace kiln::jit::glsl::detail
