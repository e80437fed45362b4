#pragma once
// The float half of kiln's GLSL math library, less the circular, hyperbolic and error
// functions (glsl_math_f32_trig.hpp); glsl_math.hpp has the accuracy table.
// The same algorithms as the double half (glsl_math_f64.hpp), with float-float where that
// uses double-double and shorter polynomials (fitted for kiln, rounded to float). Only
// sqrt, floor, ceil and trunc are GLSL built-ins: lavapipe's exp, log, sin, ... miss the
// bounds (measured, see the table). Float code never uses doubles: not every device has them.
#include "kiln/kernels/glsl_math/math_function.hpp"

namespace kiln::jit::glsl::detail {

inline constexpr math_function f32_math[] = {
    // Float-float arithmetic (Veltkamp/Dekker; lavapipe does not fuse fma()).
    {"kiln_dd_f32", "float", R"glsl(
vec2 kiln_mul12_f32(float a, float b) {
  precise float ca = 4097.0 * a, ah = ca - (ca - a), al = a - ah;
  precise float cb = 4097.0 * b, bh = cb - (cb - b), bl = b - bh;
  precise float p = a * b, e = ((ah * bh - p) + ah * bl + al * bh) + al * bl;
  return vec2(p, e);
}
vec2 kiln_add12_f32(float a, float b) {
  precise float s = a + b, v = s - a, e = (a - (s - v)) + (b - v);
  return vec2(s, e);
}
vec2 kiln_mul22_f32(vec2 a, vec2 b) {
  vec2 p = kiln_mul12_f32(a.x, b.x);
  precise float e = p.y + (a.x * b.y + a.y * b.x), s = p.x + e, l = e - (s - p.x);
  return vec2(s, l);
}
vec2 kiln_add22_f32(vec2 a, vec2 b) {
  vec2 s = kiln_add12_f32(a.x, b.x);
  precise float e = s.y + (a.y + b.y), h = s.x + e, l = e - (h - s.x);
  return vec2(h, l);
}
)glsl",
     ""},
    {"kiln_bits_f32", "float", R"glsl(
float kiln_inf_f32() { return uintBitsToFloat(0x7f800000u); }
float kiln_nan_f32() { return uintBitsToFloat(0x7fc00000u); }
bool kiln_signbit_f32(float x) { return floatBitsToUint(x) >= 0x80000000u; }
float kiln_pow2i_f32(int n) { return uintBitsToFloat(uint(n + 127) << 23); }
// x 2^n for |n| <= 252 in two exact steps and one rounding (into the subnormals too).
float kiln_ldexp_f32(float x, int n) {
  int h = n >> 1;
  precise float y = x * kiln_pow2i_f32(h) * kiln_pow2i_f32(n - h);
  return y;
}
// Finite x > 0 (subnormals too) as (m, e), x = m 2^e, m in [sqrt(1/2), sqrt(2)).
vec2 kiln_frexp_f32(float x) {
  float e = 0.0;
  if (x < 1.17549435e-38) {
    x *= 33554432.0;
    e = -25.0;
  }
  uint ix = floatBitsToUint(x) + (0x3f800000u - 0x3f3504f3u);
  return vec2(uintBitsToFloat((ix & 0x007fffffu) + 0x3f3504f3u), e + float(int(ix >> 23) - 127));
}
)glsl",
     ""},
    {"kiln_exp_core_f32", "float", R"glsl(
// (e^r - 1 - r) / r^2 for |r| <= ln2/2.
float kiln_expm1_poly_f32(float r) {
  float p = 0.000198458773;
  p = p * r + 0.00139406172;
  p = p * r + 0.00833338965;
  p = p * r + 0.0416663624;
  p = p * r + 0.166666657;
  return p * r + 0.5;
}
// e^(x + xl) 2^s; ln2 in two parts (k ln2_hi exact for |k| < 2^8).
float kiln_exp_core_f32(float x, float xl, int s) {
  x = clamp(x, -110.0, 95.0);
  float k = roundEven(x * 1.44269502);
  precise float hi = x - k * 0.693145752;
  precise float r = hi - (k * 1.42860677e-06 - xl);
  precise float e = 1.0 + (r + r * r * kiln_expm1_poly_f32(r));
  return kiln_ldexp_f32(e, int(k) + s);
}
)glsl",
     "kiln_bits_f32"},
    {"kiln_exp", "float", R"glsl(
float kiln_exp(float x) { return isnan(x) ? x : kiln_exp_core_f32(x, 0.0, 0); }
)glsl",
     "kiln_exp_core_f32"},
    {"kiln_exp2", "float", R"glsl(
float kiln_exp2(float x) {
  if (isnan(x)) return x;
  x = clamp(x, -160.0, 160.0);
  float k = roundEven(x), f = x - k;
  vec2 t = kiln_mul12_f32(f, 0.693147182);
  return kiln_exp_core_f32(t.x, t.y + f * -1.90465421e-09, int(k));
}
)glsl",
     "kiln_exp_core_f32 kiln_dd_f32"},
    {"kiln_expm1", "float", R"glsl(
float kiln_expm1(float x) {
  if (isnan(x) || x == 0.0) return x;
  if (abs(x) < 0.346573591) {
    precise float y = x + x * x * kiln_expm1_poly_f32(x);
    return y;
  }
  x = clamp(x, -110.0, 95.0);
  float k = roundEven(x * 1.44269502);
  precise float hi = x - k * 0.693145752, lo = k * 1.42860677e-06;
  precise float r = hi - lo, c = (hi - r) - lo;
  precise float em = r + r * r * kiln_expm1_poly_f32(r), e = em + (c + c * em);
  int ki = int(k);
  if (ki > 23 || ki < -24) {
    precise float y = kiln_ldexp_f32(1.0 + e, ki) - 1.0;
    return y;
  }
  precise float y = e + (1.0 - kiln_pow2i_f32(-ki));
  return kiln_ldexp_f32(y, ki);
}
)glsl",
     "kiln_exp_core_f32"},
    {"kiln_log_core_f32", "float", R"glsl(
// log(1 + f), f = m - 1, m in [sqrt(1/2), sqrt(2)): f - f^2/2 + s (f^2/2 + R(s^2)).
float kiln_log1pm_f32(float f) {
  float s = f / (2.0 + f), z = s * s;
  float p = 0.23581472;
  p = p * z + 0.285373479;
  p = p * z + 0.400003344;
  p = p * z + 0.666666627;
  precise float hfsq = 0.5 * f * f, y = f - (hfsq - s * (hfsq + z * p));
  return y;
}
float kiln_log_special_f32(float x) {
  if (x == 0.0) return -kiln_inf_f32();
  if (!(x > 0.0)) return kiln_nan_f32();
  return isinf(x) ? x : 0.0;
}
)glsl",
     "kiln_bits_f32"},
    {"kiln_log", "float", R"glsl(
float kiln_log(float x) {
  if (!(x > 0.0) || isinf(x)) return kiln_log_special_f32(x);
  vec2 me = kiln_frexp_f32(x);
  precise float y = me.y * 0.693145752 + (kiln_log1pm_f32(me.x - 1.0) + me.y * 1.42860677e-06);
  return y;
}
)glsl",
     "kiln_log_core_f32"},
    {"kiln_log2", "float", R"glsl(
float kiln_log2(float x) {
  if (!(x > 0.0) || isinf(x)) return kiln_log_special_f32(x);
  vec2 me = kiln_frexp_f32(x);
  precise float y = me.y + kiln_log1pm_f32(me.x - 1.0) * 1.44269502;
  return y;
}
)glsl",
     "kiln_log_core_f32"},
    {"kiln_log10", "float", R"glsl(
float kiln_log10(float x) {
  if (!(x > 0.0) || isinf(x)) return kiln_log_special_f32(x);
  vec2 me = kiln_frexp_f32(x);
  precise float y =
      me.y * 0.30103302 + (me.y * -3.02435546e-06 + kiln_log1pm_f32(me.x - 1.0) * 0.434294492);
  return y;
}
)glsl",
     "kiln_log_core_f32"},
    {"kiln_log1p", "float", R"glsl(
float kiln_log1p(float x) {
  if (x == 0.0) return x;
  if (!(x > -1.0) || isinf(x)) return kiln_log_special_f32(1.0 + x);
  precise float u = 1.0 + x;
  vec2 me = kiln_frexp_f32(u);
  precise float c = me.y > 0.0 ? 1.0 - (u - x) : x - (u - 1.0);
  if (me.y >= 25.0) c = 0.0;
  precise float y = me.y * 0.693145752 +
                    (kiln_log1pm_f32(me.x - 1.0) + (me.y * 1.42860677e-06 + c / u));
  return y;
}
)glsl",
     "kiln_log_core_f32"},
    {"kiln_sqrt", "float", R"glsl(
float kiln_sqrt(float x) { return x < 0.0 ? kiln_nan_f32() : sqrt(x); }
)glsl",
     "kiln_bits_f32"},
    {"kiln_rsqrt", "float", R"glsl(
float kiln_rsqrt(float x) {
  precise float y = 1.0 / kiln_sqrt(x);
  return y;
}
)glsl",
     "kiln_sqrt"},
    {"kiln_cbrt", "float", R"glsl(
float kiln_cbrt(float x) {
  if (isnan(x) || isinf(x) || x == 0.0) return x;
  float a = abs(x);
  int e = 0;
  if (a < 1.17549435e-38) {
    a *= 16777216.0;
    e = -24;
  }
  uint w = floatBitsToUint(a);
  e += int(w >> 23) - 127;
  int q = (e + 300) / 3 - 100;
  float t = uintBitsToFloat((w & 0x007fffffu) | 0x3f800000u) * float(1 << (e - 3 * q));
  float y = 0.762502611 + t * (0.268075556 + t * -0.0146706607);
  for (int i = 0; i < 2; ++i) {
    precise float y3 = y * y * y, n = y * (y3 - t) / (2.0 * y3 + t);
    y = y - n;
  }
  y *= kiln_pow2i_f32(q);
  return x < 0.0 ? -y : y;
}
)glsl",
     "kiln_bits_f32"},
    {"kiln_sigmoid", "float", R"glsl(
float kiln_sigmoid(float x) {
  float e = kiln_exp(-abs(x));
  return (x >= 0.0 ? 1.0 : e) / (1.0 + e);
}
)glsl",
     "kiln_exp"},
    // log x as a float-float for pow: log m = 2s + 2s^3/3 + s^5 P(s^2), s = (m-1)/(m+1).
    {"kiln_log_dd_f32", "float", R"glsl(
vec2 kiln_log_dd_f32(float x) {
  vec2 me = kiln_frexp_f32(x);
  float f = me.x - 1.0;
  vec2 u = kiln_add12_f32(me.x, 1.0);
  float sh = f / u.x;
  vec2 q = kiln_mul12_f32(sh, u.x);
  precise float sl = (((f - q.x) - q.y) - sh * u.y) / u.x;
  vec2 s = vec2(sh, sl), z = kiln_mul22_f32(s, s);
  float p = 0.1946733;
  p = p * z.x + 0.22185047;
  p = p * z.x + 0.285718739;
  p = p * z.x + 0.399999976;
  vec2 c = kiln_mul22_f32(kiln_mul22_f32(z, s), vec2(0.666666687, -1.98682155e-08));
  vec2 m = kiln_add22_f32(kiln_add22_f32(2.0 * s, c), vec2(z.x * z.x * sh * p, 0.0));
  vec2 k = kiln_add12_f32(me.y * 0.693145752, me.y * 1.42860677e-06);
  return kiln_add22_f32(k, m);
}
)glsl",
     "kiln_dd_f32 kiln_bits_f32"},
    {"kiln_pow", "float", R"glsl(
float kiln_pow(float x, float y) {
  if (y == 0.0 || x == 1.0) return 1.0;
  if (isnan(x) || isnan(y)) return x + y;
  float ax = abs(x);
  bool yint = floor(y) == y;
  bool yodd = yint && abs(y) < 16777216.0 && floor(y * 0.5) != y * 0.5;
  if (isinf(y)) {
    if (ax == 1.0) return 1.0;
    return (ax < 1.0) == (y < 0.0) ? kiln_inf_f32() : 0.0;
  }
  if (ax == 0.0 || isinf(ax)) { // x^y is 0 or inf; odd y keeps the sign of x
    bool big = (ax == 0.0) == (y < 0.0);
    float r = big ? kiln_inf_f32() : 0.0;
    return yodd && kiln_signbit_f32(x) ? -r : r;
  }
  if (x < 0.0 && !yint) return kiln_nan_f32();
  vec2 l = kiln_log_dd_f32(ax);
  float r;
  if (abs(y * l.x) > 200.0) {
    r = y * l.x > 0.0 ? kiln_inf_f32() : 0.0;
  } else {
    vec2 p = kiln_mul12_f32(y, l.x);
    r = kiln_exp_core_f32(p.x, p.y + y * l.y, 0);
  }
  return yodd && x < 0.0 ? -r : r;
}
)glsl",
     "kiln_log_dd_f32 kiln_exp_core_f32 kiln_bits_f32"},
    {"kiln_fmod", "float", R"glsl(
float kiln_fmod(float x, float y) {
  if (isnan(x) || isnan(y) || isinf(x) || y == 0.0) return kiln_nan_f32();
  float ax = abs(x), ay = abs(y), back = 1.0;
  if (!(ax >= ay)) return x;
  if (ax < 1.0e-30) { // both tiny: scale into the normal range (exact both ways)
    ax *= 1.84467441e+19;
    ay *= 1.84467441e+19;
    back = 5.42101086e-20;
  }
  float my = ay;
  int ey = 0;
  if (my < 1.17549435e-38) {
    my *= 16777216.0;
    ey = -24;
  }
  uint wx = floatBitsToUint(ax), wy = floatBitsToUint(my);
  int ex = int(wx >> 23);
  ey += int(wy >> 23) - 127;
  float t = uintBitsToFloat((wy & 0x007fffffu) | (uint(ex) << 23));
  int n = ex - 127 - ey;
  if (t > ax) {
    t *= 0.5;
    n -= 1;
  }
  for (int i = 0; i <= n; ++i) {
    if (ax >= t) ax -= t;
    t *= 0.5;
  }
  ax *= back;
  return x < 0.0 ? -ax : ax;
}
)glsl",
     "kiln_bits_f32"},
    {"kiln_floor", "float", "float kiln_floor(float x) { return floor(x); }\n", ""},
    {"kiln_ceil", "float", "float kiln_ceil(float x) { return ceil(x); }\n", ""},
    {"kiln_trunc", "float", "float kiln_trunc(float x) { return trunc(x); }\n", ""},
    {"kiln_round", "float", R"glsl(
float kiln_round(float x) {
  float t = trunc(x);
  return abs(x - t) >= 0.5 ? t + sign(x) : t;
}
)glsl",
     ""},
};

} // namespace kiln::jit::glsl::detail
