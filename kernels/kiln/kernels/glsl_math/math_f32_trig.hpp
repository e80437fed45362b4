#pragma once
// The float circular and hyperbolic functions of kiln's GLSL math library, their inverses,
// and erf/erfc (see glsl_math.hpp for the accuracy table; the rest is in glsl_math_f32.hpp,
// whose helpers these call by name).
#include "kiln/kernels/glsl_math/math_function.hpp"

namespace kiln::jit::glsl::detail {

inline constexpr math_function f32_trig_math[] = {
    // x = k pi/2 + r (r a float-float) by Payne-Hanek for every |x| > pi/4: the 24-bit
    // mantissa times a 96-bit window of 2/pi in 32-bit integer words. The table holds 32
    // zero bits, then 2/pi: bit i of 2/pi (weight 2^-i) is table bit i + 31.
    {"kiln_trig_f32", "float", R"glsl(
const uint kiln_2_over_pi_f32[8] = uint[8](0u, 0xA2F9836Eu, 0x4E441529u, 0xFC2757D1u,
  0xF534DDC0u, 0xDB629599u, 0x3C439041u, 0xFE5163ABu);
vec2 kiln_rem_pio2_f32(float x, out int k) {
  if (abs(x) <= 0.785398163) {
    k = 0;
    return vec2(x, 0.0);
  }
  uint w = floatBitsToUint(abs(x));
  int p0 = int(w >> 23) - 120;
  int j0 = p0 >> 5, sh = p0 & 31;
  uint m = (w & 0x007fffffu) | 0x00800000u;
  uint W[3], P[4];
  for (int j = 0; j < 3; ++j) {
    uint a = kiln_2_over_pi_f32[j0 + j], b = kiln_2_over_pi_f32[j0 + j + 1];
    W[j] = sh == 0 ? a : (a << sh) | (b >> (32 - sh));
  }
  // P = m W, 128 bits, P[0] most significant; x 2/pi = P 2^-94 (mod 4).
  uint carry = 0u;
  for (int j = 2; j >= 0; --j) {
    uint hi, lo, c;
    umulExtended(W[j], m, hi, lo);
    P[j + 1] = uaddCarry(lo, carry, c);
    carry = hi + c;
  }
  P[0] = carry;
  k = int(P[1] >> 30);
  uint f0 = (P[1] << 2) | (P[2] >> 30), f1 = (P[2] << 2) | (P[3] >> 30);
  float sgn = 1.0;
  if (f0 >= 0x80000000u) { // fraction >= 1/2: round the quadrant up, r negative
    f0 = ~f0;
    f1 = ~f1;
    k += 1;
    sgn = -1.0;
  }
  // The 64-bit fraction, normalized, as a float-float.
  int e = 32;
  if (f0 == 0u) {
    f0 = f1;
    f1 = 0u;
    e = 64;
  }
  int lz = 31 - findMSB(f0);
  if (lz > 0 && lz < 32) {
    f0 = (f0 << lz) | (f1 >> (32 - lz));
    f1 <<= lz;
  }
  float scale = uintBitsToFloat(uint(127 - e - lz) << 23);
  float lo = float(f0 & 0xffu) + float(f1 >> 8) * 5.96046448e-08;
  vec2 v = vec2(float(f0 & 0xffffff00u), lo) * scale;
  vec2 r = kiln_mul22_f32(v, vec2(1.57079637, -4.37113883e-08)) * sgn;
  if (x < 0.0) {
    r = -r;
    k = -k;
  }
  k &= 3;
  return r;
}
// sin r = r + r^3 S(r^2), cos r = 1 - r^2/2 + r^4 C(r^2) on |r| <= pi/4.
float kiln_sin_kernel_f32(vec2 r) {
  float z = r.x * r.x;
  float p = 2.71812155e-06;
  p = p * z + -0.000198393129;
  p = p * z + 0.00833332911;
  p = p * z + -0.166666672;
  precise float y = r.x + (r.x * z * p + r.y * (1.0 - 0.5 * z));
  return y;
}
float kiln_cos_kernel_f32(vec2 r) {
  float z = r.x * r.x;
  float p = 2.44331568e-05;
  p = p * z + -0.00138873165;
  p = p * z + 0.0416666456;
  precise float hz = 0.5 * z, w = 1.0 - hz;
  precise float y = w + (((1.0 - w) - hz) + (z * z * p - r.x * r.y));
  return y;
}
)glsl",
     "kiln_dd_f32"},
    {"kiln_sin", "float", R"glsl(
float kiln_sin(float x) {
  if (isinf(x)) return kiln_nan_f32();
  if (isnan(x) || abs(x) < 0.000244140625) return x;
  int k;
  vec2 r = kiln_rem_pio2_f32(x, k);
  float s = (k & 1) == 0 ? kiln_sin_kernel_f32(r) : kiln_cos_kernel_f32(r);
  return (k & 2) == 0 ? s : -s;
}
)glsl",
     "kiln_trig_f32 kiln_bits_f32"},
    {"kiln_cos", "float", R"glsl(
float kiln_cos(float x) {
  if (isinf(x)) return kiln_nan_f32();
  if (isnan(x)) return x;
  int k;
  vec2 r = kiln_rem_pio2_f32(x, k);
  float c = (k & 1) == 0 ? kiln_cos_kernel_f32(r) : kiln_sin_kernel_f32(r);
  return ((k + 1) & 2) == 0 ? c : -c;
}
)glsl",
     "kiln_trig_f32 kiln_bits_f32"},
    {"kiln_tan", "float", R"glsl(
float kiln_tan(float x) {
  if (isinf(x)) return kiln_nan_f32();
  if (isnan(x) || abs(x) < 0.000244140625) return x;
  int k;
  vec2 r = kiln_rem_pio2_f32(x, k);
  float s = kiln_sin_kernel_f32(r), c = kiln_cos_kernel_f32(r);
  return (k & 1) == 0 ? s / c : -c / s;
}
)glsl",
     "kiln_trig_f32 kiln_bits_f32"},
    {"kiln_asin_core_f32", "float", R"glsl(
// (asin(x) - x) / x^3 as a function of z = x^2 <= 1/4.
float kiln_asin_poly_f32(float z) {
  float p = 0.0375164822;
  p = p * z + 0.0144385835;
  p = p * z + 0.0318077244;
  p = p * z + 0.0445169546;
  p = p * z + 0.0750050396;
  return p * z + 0.166666597;
}
// 2 asin(sqrt(z)) for z in [0, 1/4], as a float-float.
vec2 kiln_2asin_sqrt_f32(float z) {
  float s = sqrt(z);
  vec2 ss = kiln_mul12_f32(s, s);
  precise float sl = ((z - ss.x) - ss.y) / (2.0 * s);
  if (s == 0.0) sl = 0.0;
  precise float t = sl + s * z * kiln_asin_poly_f32(z);
  return vec2(2.0 * s, 2.0 * t);
}
)glsl",
     "kiln_dd_f32"},
    {"kiln_asin", "float", R"glsl(
float kiln_asin(float x) {
  float a = abs(x);
  if (!(a <= 1.0)) return isnan(x) ? x : kiln_nan_f32();
  if (a < 0.000244140625) return x;
  if (a <= 0.5) {
    precise float y = x + x * (x * x) * kiln_asin_poly_f32(x * x);
    return y;
  }
  vec2 t = kiln_2asin_sqrt_f32((1.0 - a) * 0.5);
  precise float y = (1.57079637 - t.x) + (-4.37113883e-08 - t.y);
  return x < 0.0 ? -y : y;
}
)glsl",
     "kiln_asin_core_f32 kiln_bits_f32"},
    {"kiln_acos", "float", R"glsl(
float kiln_acos(float x) {
  float a = abs(x);
  if (!(a <= 1.0)) return isnan(x) ? x : kiln_nan_f32();
  if (a <= 0.5) {
    precise float y =
        1.57079637 - (x - (-4.37113883e-08 - x * (x * x) * kiln_asin_poly_f32(x * x)));
    return y;
  }
  vec2 t = kiln_2asin_sqrt_f32((1.0 - a) * 0.5);
  if (x > 0.0) {
    precise float y = t.x + t.y;
    return y;
  }
  precise float y = (3.14159274 - t.x) + (-8.74227766e-08 - t.y);
  return y;
}
)glsl",
     "kiln_asin_core_f32 kiln_bits_f32"},
    {"kiln_atan", "float", R"glsl(
float kiln_atan(float x) {
  float a = abs(x);
  if (isnan(x) || a < 0.000244140625) return x;
  float t = a, bh = 0.0, bl = 0.0;
  if (a > 2.41421356) {
    t = -1.0 / a;
    bh = 1.57079637;
    bl = -4.37113883e-08;
  } else if (a > 0.414213562) {
    t = (a - 1.0) / (a + 1.0);
    bh = 0.785398185;
    bl = -2.18556941e-08;
  }
  float z = t * t;
  float p = 0.0474404953;
  p = p * z + -0.0847626925;
  p = p * z + 0.110446915;
  p = p * z + -0.142820075;
  p = p * z + 0.199999034;
  p = p * z + -0.333333313;
  precise float y = bh + (t + (t * z * p + bl));
  return x < 0.0 ? -y : y;
}
)glsl",
     ""},
    {"kiln_atan2", "float", R"glsl(
float kiln_atan2(float y, float x) {
  if (isnan(x) || isnan(y)) return x + y;
  float ax = abs(x), ay = abs(y), r;
  if (isinf(ax) && isinf(ay)) {
    r = x > 0.0 ? 0.785398185 : 2.3561945;
  } else if (ay == 0.0 && ax == 0.0) {
    r = kiln_signbit_f32(x) ? 3.14159274 : 0.0;
  } else if (ay <= ax) {
    float t = kiln_atan(ay / ax);
    precise float p = 3.14159274 - (t - -8.74227766e-08);
    r = x < 0.0 ? p : t;
  } else {
    float t = kiln_atan(ax / ay);
    precise float p = 1.57079637 + (x < 0.0 ? t + -4.37113883e-08 : -4.37113883e-08 - t);
    r = p;
  }
  return kiln_signbit_f32(y) ? -r : r;
}
)glsl",
     "kiln_atan kiln_bits_f32"},
    {"kiln_sinh", "float", R"glsl(
float kiln_sinh(float x) {
  float a = abs(x), r;
  if (!(a >= 0.000244140625) || isinf(a)) return x;
  if (a < 9.0) {
    float t = kiln_expm1(a);
    r = a < 1.0 ? 0.5 * (2.0 * t - t * t / (t + 1.0)) : 0.5 * (t + t / (t + 1.0));
  } else {
    r = kiln_exp_core_f32(a, 0.0, -1);
  }
  return x < 0.0 ? -r : r;
}
)glsl",
     "kiln_expm1 kiln_exp_core_f32"},
    {"kiln_cosh", "float", R"glsl(
float kiln_cosh(float x) {
  float a = abs(x);
  if (isnan(x)) return x;
  if (a < 9.0) {
    float e = kiln_exp_core_f32(a, 0.0, 0);
    return 0.5 * e + 0.5 / e;
  }
  return kiln_exp_core_f32(a, 0.0, -1);
}
)glsl",
     "kiln_exp_core_f32"},
    {"kiln_tanh", "float", R"glsl(
float kiln_tanh(float x) {
  float a = abs(x), r;
  if (!(a >= 0.000244140625)) return x;
  if (a > 10.0) {
    r = 1.0;
  } else if (a >= 1.0) {
    r = 1.0 - 2.0 / (kiln_expm1(2.0 * a) + 2.0);
  } else {
    float t = kiln_expm1(-2.0 * a);
    r = -t / (t + 2.0);
  }
  return x < 0.0 ? -r : r;
}
)glsl",
     "kiln_expm1"},
    {"kiln_asinh", "float", R"glsl(
float kiln_asinh(float x) {
  float a = abs(x), r;
  if (!(a >= 0.000244140625) || isinf(a)) return x;
  if (a > 4096.0) {
    r = kiln_log(a) + 0.693147182;
  } else if (a > 2.0) {
    r = kiln_log(2.0 * a + 1.0 / (sqrt(a * a + 1.0) + a));
  } else {
    float z = a * a;
    r = kiln_log1p(a + z / (1.0 + sqrt(1.0 + z)));
  }
  return x < 0.0 ? -r : r;
}
)glsl",
     "kiln_log kiln_log1p"},
    {"kiln_acosh", "float", R"glsl(
float kiln_acosh(float x) {
  if (!(x >= 1.0)) return isnan(x) ? x : kiln_nan_f32();
  if (isinf(x)) return x;
  if (x > 4096.0) return kiln_log(x) + 0.693147182;
  if (x > 2.0) return kiln_log(2.0 * x - 1.0 / (x + sqrt(x * x - 1.0)));
  float t = x - 1.0;
  return kiln_log1p(t + sqrt(2.0 * t + t * t));
}
)glsl",
     "kiln_log kiln_log1p kiln_bits_f32"},
    {"kiln_atanh", "float", R"glsl(
float kiln_atanh(float x) {
  float a = abs(x), r;
  if (isnan(x) || a < 0.000244140625) return x;
  if (a > 1.0) return kiln_nan_f32();
  if (a == 1.0) return x * kiln_inf_f32();
  if (a < 0.5) {
    float t = a + a;
    r = 0.5 * kiln_log1p(t + t * a / (1.0 - a));
  } else {
    r = 0.5 * kiln_log1p((a + a) / (1.0 - a));
  }
  return x < 0.0 ? -r : r;
}
)glsl",
     "kiln_log1p kiln_bits_f32"},
    // erfc x = e^(-x^2) G(t) / (1 + 2x), t = (x - 4)/(x + 4), for x in [0.5, 10.5] (0 above).
    {"kiln_erfc_core_f32", "float", R"glsl(
const float kiln_erfc_c_f32[10] = float[10](1.23299515, -0.139621064, 0.0153798126,
  0.068094559, -0.10104432, 0.0937676802, -0.0662626028, 0.0369929634, -0.0165718179,
  0.0052751014);
float kiln_erfc_pos_f32(float x) {
  if (x > 10.5) return 0.0;
  float t = (x - 4.0) / (x + 4.0), p = kiln_erfc_c_f32[9];
  for (int i = 8; i >= 0; --i) p = p * t + kiln_erfc_c_f32[i];
  vec2 sq = kiln_mul12_f32(x, x);
  // Scaled by 2^32 so that only the last step rounds into the subnormals.
  precise float y = kiln_exp_core_f32(-sq.x, -sq.y, 32) * (p / (1.0 + 2.0 * x));
  return y * 2.32830644e-10;
}
// erf x = x P(x^2) for |x| < 1.
float kiln_erf_small_f32(float x) {
  float z = x * x;
  float p = -0.000563142239;
  p = p * z + 0.0049175513;
  p = p * z + -0.0267113112;
  p = p * z + 0.112801798;
  p = p * z + -0.37612325;
  p = p * z + 1.12837911;
  return x * p;
}
)glsl",
     "kiln_exp_core_f32 kiln_dd_f32"},
    {"kiln_erf", "float", R"glsl(
float kiln_erf(float x) {
  float a = abs(x);
  if (isnan(x)) return x;
  if (a < 1.0) return kiln_erf_small_f32(x);
  float r = a >= 4.0 ? 1.0 : 1.0 - kiln_erfc_pos_f32(a);
  return x < 0.0 ? -r : r;
}
)glsl",
     "kiln_erfc_core_f32"},
    {"kiln_erfc", "float", R"glsl(
float kiln_erfc(float x) {
  if (isnan(x)) return x;
  if (x < -4.0) return 2.0;
  if (abs(x) < 0.5) return 1.0 - kiln_erf_small_f32(x);
  return x > 0.0 ? kiln_erfc_pos_f32(x) : 2.0 - kiln_erfc_pos_f32(-x);
}
)glsl",
     "kiln_erfc_core_f32"},
};

} // namespace kiln::jit::glsl::detail
