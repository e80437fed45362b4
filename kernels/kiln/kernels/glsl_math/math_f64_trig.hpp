#pragma once
// The double circular and hyperbolic functions of kiln's GLSL math library, their inverses,
// and erf/erfc (see glsl_math.hpp for the accuracy table; the rest is in glsl_math_f64.hpp,
// whose helpers these call by name).
#include "kiln/kernels/glsl_math/math_function.hpp"

namespace kiln::jit::glsl::detail {

inline constexpr math_function f64_trig_math[] = {
    // x = k pi/2 + r, r a double-double, |r| <= ~pi/4. Below 1.6e6, Cody-Waite with pi/2 in
    // three parts (the first two of 32 bits, so k p1 and k p2 are exact for k < 2^21).
    // Above, Payne-Hanek: the 53-bit mantissa times a 160-bit window of 2/pi, in 32-bit
    // integer words, gives the quadrant and 128 bits of the fraction.
    // Kernels on |r| <= pi/4: sin r = r + r^3 S(r^2), cos r = 1 - r^2/2 + r^4 C(r^2).
    {"kiln_trig_f64", "double", R"glsl(
const uint kiln_2_over_pi_f64[38] = uint[38](0u, 0u, 0xA2F9836Eu, 0x4E441529u, 0xFC2757D1u,
  0xF534DDC0u, 0xDB629599u, 0x3C439041u, 0xFE5163ABu, 0xDEBBC561u, 0xB7246E3Au, 0x424DD2E0u,
  0x06492EEAu, 0x09D1921Cu, 0xFE1DEB1Cu, 0xB129A73Eu, 0xE88235F5u, 0x2EBB4484u, 0xE99C7026u,
  0xB45F7E41u, 0x3991D639u, 0x835339F4u, 0x9C845F8Bu, 0xBDF9283Bu, 0x1FF897FFu, 0xDE05980Fu,
  0xEF2F118Bu, 0x5A0A6D1Fu, 0x6D367ECFu, 0x27CB09B7u, 0x4F463F66u, 0x9E5FEA2Du, 0x7527BAC7u,
  0xEBE5F17Bu, 0x3D0739F7u, 0x8A5292EAu, 0x6BFB5FB1u, 0x1F8D5D08u);
// |x| >= 2^20, finite. The table holds 64 zero bits, then 2/pi: bit i of 2/pi (weight
// 2^-i) is table bit i + 63. Bits with i < e - 1 (x = M 2^e) only add multiples of 4.
dvec2 kiln_rem_pio2_huge_f64(double x, out int k) {
  uvec2 w = unpackDouble2x32(abs(x));
  int p0 = int((w.y >> 20) & 0x7ffu) - 1075 + 62;
  int j0 = p0 >> 5, sh = p0 & 31;
  uint mh = (w.y & 0x000fffffu) | 0x00100000u, ml = w.x;
  uint W[5], P[7];
  for (int j = 0; j < 5; ++j) {
    uint a = kiln_2_over_pi_f64[j0 + j], b = kiln_2_over_pi_f64[j0 + j + 1];
    W[j] = sh == 0 ? a : (a << sh) | (b >> (32 - sh));
  }
  // P = (mh 2^32 + ml) W, 224 bits, P[0] most significant; x 2/pi = P 2^-158 (mod 4).
  uint carry = 0u;
  for (int j = 4; j >= 0; --j) {
    uint hi, lo, c;
    umulExtended(W[j], ml, hi, lo);
    P[j + 2] = uaddCarry(lo, carry, c);
    carry = hi + c;
  }
  P[1] = carry;
  carry = 0u;
  for (int j = 4; j >= 0; --j) {
    uint hi, lo, c1, c2;
    umulExtended(W[j], mh, hi, lo);
    uint s = uaddCarry(P[j + 1], lo, c1);
    P[j + 1] = uaddCarry(s, carry, c2);
    carry = hi + c1 + c2;
  }
  P[0] = carry;
  k = int(P[2] >> 30);
  uint f[4];
  for (int j = 0; j < 4; ++j) f[j] = (P[j + 2] << 2) | (P[j + 3] >> 30);
  double sgn = 1.0lf;
  if (f[0] >= 0x80000000u) { // fraction >= 1/2: round the quadrant up, r negative
    for (int j = 0; j < 4; ++j) f[j] = ~f[j];
    k += 1;
    sgn = -1.0lf;
  }
  dvec2 v = kiln_add22_f64(kiln_add12_f64(double(f[0]) * 2.3283064365386963e-10lf,
                                          double(f[1]) * 5.421010862427522e-20lf),
                           kiln_add12_f64(double(f[2]) * 1.262177448353619e-29lf,
                                          double(f[3]) * 2.938735877055719e-39lf));
  dvec2 r = kiln_mul22_f64(v, dvec2(1.5707963267948966lf, 6.123233995736766e-17lf)) * sgn;
  if (x < 0.0lf) {
    r = -r;
    k = -k;
  }
  k &= 3;
  return r;
}
dvec2 kiln_rem_pio2_f64(double x, out int k) {
  if (abs(x) <= 0.7853981633974483lf) {
    k = 0;
    return dvec2(x, 0.0lf);
  }
  if (abs(x) >= 1.6e6lf) return kiln_rem_pio2_huge_f64(x, k);
  double n = roundEven(x * 0.6366197723675814lf);
  precise double t = x - n * 1.5707963267341256lf, w = n * 6.077100506303966e-11lf;
  dvec2 r = kiln_add12_f64(t, -w);
  precise double lo = r.y - n * 2.0222662487959506e-21lf, hi = r.x + lo, l = lo - (hi - r.x);
  k = int(n) & 3;
  return dvec2(hi, l);
}
double kiln_sin_kernel_f64(dvec2 r) {
  double z = r.x * r.x;
  double p = 1.589623013822643e-10lf;
  p = p * z + -2.5050747762483924e-08lf;
  p = p * z + 2.7557313621383003e-06lf;
  p = p * z + -0.0001984126982958953lf;
  p = p * z + 0.008333333333322118lf;
  p = p * z + -0.1666666666666663lf;
  precise double y = r.x + (r.x * z * p + r.y * (1.0lf - 0.5lf * z));
  return y;
}
double kiln_cos_kernel_f64(dvec2 r) {
  double z = r.x * r.x;
  double p = -1.1358536516832888e-11lf;
  p = p * z + 2.087570084188354e-09lf;
  p = p * z + -2.7557314179296015e-07lf;
  p = p * z + 2.48015872888517e-05lf;
  p = p * z + -0.0013888888888873056lf;
  p = p * z + 0.041666666666666595lf;
  // w = 1 - z/2 loses bits near pi/4; they are added back with the tail (fdlibm).
  precise double hz = 0.5lf * z, w = 1.0lf - hz;
  precise double y = w + (((1.0lf - w) - hz) + (z * z * p - r.x * r.y));
  return y;
}
)glsl",
     "kiln_dd_f64"},
    {"kiln_sin", "double", R"glsl(
double kiln_sin(double x) {
  if (isinf(x)) return kiln_nan_f64();
  if (isnan(x) || abs(x) < 1.4901161193847656e-08lf) return x;
  int k;
  dvec2 r = kiln_rem_pio2_f64(x, k);
  double s = (k & 1) == 0 ? kiln_sin_kernel_f64(r) : kiln_cos_kernel_f64(r);
  return (k & 2) == 0 ? s : -s;
}
)glsl",
     "kiln_trig_f64 kiln_bits_f64"},
    {"kiln_cos", "double", R"glsl(
double kiln_cos(double x) {
  if (isinf(x)) return kiln_nan_f64();
  if (isnan(x)) return x;
  int k;
  dvec2 r = kiln_rem_pio2_f64(x, k);
  double c = (k & 1) == 0 ? kiln_cos_kernel_f64(r) : kiln_sin_kernel_f64(r);
  return ((k + 1) & 2) == 0 ? c : -c;
}
)glsl",
     "kiln_trig_f64 kiln_bits_f64"},
    {"kiln_tan", "double", R"glsl(
double kiln_tan(double x) {
  if (isinf(x)) return kiln_nan_f64();
  if (isnan(x) || abs(x) < 1.4901161193847656e-08lf) return x;
  int k;
  dvec2 r = kiln_rem_pio2_f64(x, k);
  double s = kiln_sin_kernel_f64(r), c = kiln_cos_kernel_f64(r);
  return (k & 1) == 0 ? s / c : -c / s;
}
)glsl",
     "kiln_trig_f64 kiln_bits_f64"},
    // asin x = x + x^3 P(x^2) on [0, 1/2]; above, asin x = pi/2 - 2 asin(s),
    // s = sqrt((1 - x)/2) carried with its rounding error.
    {"kiln_asin_core_f64", "double", R"glsl(
const double kiln_asin_c_f64[13] = double[13](0.1666666666666676lf, 0.07499999999970798lf,
  0.04464285717461344lf, 0.030381942707723382lf, 0.022372214988996327lf,
  0.017351611994549376lf, 0.013980820727558043lf, 0.01139891103916821lf,
  0.010780258381802597lf, 0.003706390066700296lf, 0.02170748877102362lf,
  -0.020999118084679903lf, 0.03262865711649494lf);
// (asin(x) - x) / x^3 as a function of z = x^2 <= 1/4.
double kiln_asin_poly_f64(double z) {
  double p = kiln_asin_c_f64[12];
  for (int i = 11; i >= 0; --i) p = p * z + kiln_asin_c_f64[i];
  return p;
}
// 2 asin(sqrt(z)) for z = (1 - |x|)/2 in [0, 1/4], as a double-double.
dvec2 kiln_2asin_sqrt_f64(double z) {
  double s = sqrt(z);
  dvec2 ss = kiln_mul12_f64(s, s);
  precise double sl = ((z - ss.x) - ss.y) / (2.0lf * s);
  if (s == 0.0lf) sl = 0.0lf;
  precise double t = sl + s * z * kiln_asin_poly_f64(z);
  return dvec2(2.0lf * s, 2.0lf * t);
}
)glsl",
     "kiln_dd_f64"},
    {"kiln_asin", "double", R"glsl(
double kiln_asin(double x) {
  double a = abs(x);
  if (!(a <= 1.0lf)) return isnan(x) ? x : kiln_nan_f64();
  if (a < 1.4901161193847656e-08lf) return x;
  if (a <= 0.5lf) {
    precise double y = x + x * (x * x) * kiln_asin_poly_f64(x * x);
    return y;
  }
  dvec2 t = kiln_2asin_sqrt_f64((1.0lf - a) * 0.5lf);
  precise double y = (1.5707963267948966lf - t.x) + (6.123233995736766e-17lf - t.y);
  return x < 0.0lf ? -y : y;
}
)glsl",
     "kiln_asin_core_f64 kiln_bits_f64"},
    {"kiln_acos", "double", R"glsl(
double kiln_acos(double x) {
  double a = abs(x);
  if (!(a <= 1.0lf)) return isnan(x) ? x : kiln_nan_f64();
  if (a <= 0.5lf) {
    precise double y = 1.5707963267948966lf -
                       (x - (6.123233995736766e-17lf - x * (x * x) * kiln_asin_poly_f64(x * x)));
    return y;
  }
  dvec2 t = kiln_2asin_sqrt_f64((1.0lf - a) * 0.5lf);
  if (x > 0.0lf) {
    precise double y = t.x + t.y;
    return y;
  }
  precise double y = (3.141592653589793lf - t.x) + (1.2246467991473532e-16lf - t.y);
  return y;
}
)glsl",
     "kiln_asin_core_f64 kiln_bits_f64"},
    // |x| reduced to [0, tan(pi/8)] by atan x = pi/4 + atan((x-1)/(x+1)) or
    // pi/2 - atan(1/x); there atan t = t + t^3 P(t^2).
    {"kiln_atan", "double", R"glsl(
const double kiln_atan_c_f64[12] = double[12](-0.33333333333333326lf, 0.1999999999999765lf,
  -0.14285714285385995lf, 0.11111111088071608lf, -0.09090908141316484lf,
  0.0769228269853845lf, -0.06666226035230383lf, 0.05877016188892144lf,
  -0.05218376803496046lf, 0.04503468769613965lf, -0.03347324916401309lf,
  0.015194550812356086lf);
double kiln_atan(double x) {
  double a = abs(x);
  if (isnan(x) || a < 7.450580596923828e-09lf) return x;
  double t = a, bh = 0.0lf, bl = 0.0lf;
  if (a > 2.414213562373095lf) {
    t = -1.0lf / a;
    bh = 1.5707963267948966lf;
    bl = 6.123233995736766e-17lf;
  } else if (a > 0.41421356237309503lf) {
    t = (a - 1.0lf) / (a + 1.0lf);
    bh = 0.7853981633974483lf;
    bl = 3.061616997868383e-17lf;
  }
  double z = t * t, p = kiln_atan_c_f64[11];
  for (int i = 10; i >= 0; --i) p = p * z + kiln_atan_c_f64[i];
  precise double y = bh + (t + (t * z * p + bl));
  return x < 0.0lf ? -y : y;
}
)glsl",
     ""},
    // C99 Annex F: signed zeros, both-infinite pairs; otherwise atan of the smaller ratio.
    {"kiln_atan2", "double", R"glsl(
double kiln_atan2(double y, double x) {
  if (isnan(x) || isnan(y)) return x + y;
  double ax = abs(x), ay = abs(y), r;
  if (isinf(ax) && isinf(ay)) {
    r = x > 0.0lf ? 0.7853981633974483lf : 2.356194490192345lf;
  } else if (ay == 0.0lf && ax == 0.0lf) {
    r = kiln_signbit_f64(x) ? 3.141592653589793lf : 0.0lf;
  } else if (ay <= ax) {
    double t = kiln_atan(ay / ax);
    precise double p = 3.141592653589793lf - (t - 1.2246467991473532e-16lf);
    r = x < 0.0lf ? p : t;
  } else {
    double t = kiln_atan(ax / ay);
    precise double p = 1.5707963267948966lf + (x < 0.0lf ? t + 6.123233995736766e-17lf
                                                          : 6.123233995736766e-17lf - t);
    r = p;
  }
  return kiln_signbit_f64(y) ? -r : r;
}
)glsl",
     "kiln_atan kiln_bits_f64"},
    {"kiln_sinh", "double", R"glsl(
double kiln_sinh(double x) {
  double a = abs(x), r;
  if (!(a >= 1.4901161193847656e-08lf) || isinf(a)) return x;
  if (a < 22.0lf) {
    double t = kiln_expm1(a);
    r = a < 1.0lf ? 0.5lf * (2.0lf * t - t * t / (t + 1.0lf)) : 0.5lf * (t + t / (t + 1.0lf));
  } else {
    r = kiln_exp_core_f64(a, 0.0lf, -1);
  }
  return x < 0.0lf ? -r : r;
}
)glsl",
     "kiln_expm1 kiln_exp_core_f64"},
    {"kiln_cosh", "double", R"glsl(
double kiln_cosh(double x) {
  double a = abs(x);
  if (isnan(x)) return x;
  if (a < 22.0lf) {
    double e = kiln_exp_core_f64(a, 0.0lf, 0);
    return 0.5lf * e + 0.5lf / e;
  }
  return kiln_exp_core_f64(a, 0.0lf, -1);
}
)glsl",
     "kiln_exp_core_f64"},
    {"kiln_tanh", "double", R"glsl(
double kiln_tanh(double x) {
  double a = abs(x), r;
  if (!(a >= 7.450580596923828e-09lf)) return x;
  if (a > 22.0lf) {
    r = 1.0lf;
  } else if (a >= 1.0lf) {
    r = 1.0lf - 2.0lf / (kiln_expm1(2.0lf * a) + 2.0lf);
  } else {
    double t = kiln_expm1(-2.0lf * a);
    r = -t / (t + 2.0lf);
  }
  return x < 0.0lf ? -r : r;
}
)glsl",
     "kiln_expm1"},
    {"kiln_asinh", "double", R"glsl(
double kiln_asinh(double x) {
  double a = abs(x), r;
  if (!(a >= 3.725290298461914e-09lf) || isinf(a)) return x;
  if (a > 268435456.0lf) {
    r = kiln_log(a) + 0.6931471805599453lf;
  } else if (a > 2.0lf) {
    r = kiln_log(2.0lf * a + 1.0lf / (sqrt(a * a + 1.0lf) + a));
  } else {
    double z = a * a;
    r = kiln_log1p(a + z / (1.0lf + sqrt(1.0lf + z)));
  }
  return x < 0.0lf ? -r : r;
}
)glsl",
     "kiln_log kiln_log1p"},
    {"kiln_acosh", "double", R"glsl(
double kiln_acosh(double x) {
  if (!(x >= 1.0lf)) return isnan(x) ? x : kiln_nan_f64();
  if (isinf(x)) return x;
  if (x > 268435456.0lf) return kiln_log(x) + 0.6931471805599453lf;
  if (x > 2.0lf) return kiln_log(2.0lf * x - 1.0lf / (x + sqrt(x * x - 1.0lf)));
  double t = x - 1.0lf;
  return kiln_log1p(t + sqrt(2.0lf * t + t * t));
}
)glsl",
     "kiln_log kiln_log1p kiln_bits_f64"},
    {"kiln_atanh", "double", R"glsl(
double kiln_atanh(double x) {
  double a = abs(x), r;
  if (isnan(x) || a < 3.725290298461914e-09lf) return x;
  if (a > 1.0lf) return kiln_nan_f64();
  if (a == 1.0lf) return x * kiln_inf_f64();
  if (a < 0.5lf) {
    double t = a + a;
    r = 0.5lf * kiln_log1p(t + t * a / (1.0lf - a));
  } else {
    r = 0.5lf * kiln_log1p((a + a) / (1.0lf - a));
  }
  return x < 0.0lf ? -r : r;
}
)glsl",
     "kiln_log1p kiln_bits_f64"},
    // erfc x = e^(-x^2) G(t) / (1 + 2x), t = (x - 3)/(x + 3), for x in [0.5, 27.3] (0 above);
    // x^2 is a double-double so e^(-x^2) keeps its accuracy.
    {"kiln_erfc_core_f64", "double", R"glsl(
const double kiln_erfc_c_f64[22] = double[22](1.2530080582697296lf, -0.1356211061245813lf,
  -0.04756229435345lf, 0.1296451587027803lf, -0.11927366341536079lf, 0.06830802734319141lf,
  -0.023770514917136644lf, 0.002529391830553947lf, 0.0018886903353802459lf,
  -0.000779832418924337lf, -0.000105159572043356lf, 0.00012510024618501902lf,
  4.948105210553338e-06lf, -2.0103964301213326e-05lf, -7.261247323450491e-07lf,
  3.4804726750553956e-06lf, 3.433069347024603e-07lf, -6.280486438184674e-07lf,
  -1.203274906518007e-07lf, 1.1015926631149476e-07lf, 2.2402108348784572e-08lf,
  -1.4806283034860785e-08lf);
double kiln_erfc_pos_f64(double x) {
  if (x > 27.3lf) return 0.0lf;
  double t = (x - 3.0lf) / (x + 3.0lf), p = kiln_erfc_c_f64[21];
  for (int i = 20; i >= 0; --i) p = p * t + kiln_erfc_c_f64[i];
  dvec2 sq = kiln_mul12_f64(x, x);
  // Scaled by 2^64 so that only the last step rounds into the subnormals.
  precise double y = kiln_exp_core_f64(-sq.x, -sq.y, 64) * (p / (1.0lf + 2.0lf * x));
  return y * 5.421010862427522e-20lf;
}
// erf x = x P(x^2) for |x| < 1.
double kiln_erf_small_f64(double x) {
  double z = x * x;
  double p = -7.779467906695404e-10lf;
  p = p * z + 1.3710980081470752e-08lf;
  p = p * z + -1.6206313684215685e-07lf;
  p = p * z + 1.6447131561439617e-06lf;
  p = p * z + -1.492471230120217e-05lf;
  p = p * z + 0.00012055293576858219lf;
  p = p * z + -0.0008548325929313074lf;
  p = p * z + 0.005223977606118445lf;
  p = p * z + -0.026866170643111465lf;
  p = p * z + 0.11283791670944185lf;
  p = p * z + -0.3761263890318352lf;
  p = p * z + 1.1283791670955126lf;
  return x * p;
}
)glsl",
     "kiln_exp_core_f64 kiln_dd_f64"},
    {"kiln_erf", "double", R"glsl(
double kiln_erf(double x) {
  double a = abs(x);
  if (isnan(x)) return x;
  if (a < 1.0lf) return kiln_erf_small_f64(x);
  double r = a >= 6.0lf ? 1.0lf : 1.0lf - kiln_erfc_pos_f64(a);
  return x < 0.0lf ? -r : r;
}
)glsl",
     "kiln_erfc_core_f64"},
    {"kiln_erfc", "double", R"glsl(
double kiln_erfc(double x) {
  if (isnan(x)) return x;
  if (x < -6.0lf) return 2.0lf;
  if (abs(x) < 0.5lf) return 1.0lf - kiln_erf_small_f64(x);
  return x > 0.0lf ? kiln_erfc_pos_f64(x) : 2.0lf - kiln_erfc_pos_f64(-x);
}
)glsl",
     "kiln_erfc_core_f64"},
};

} // namespace kiln::jit::glsl::detail
