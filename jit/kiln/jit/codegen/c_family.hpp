#pragma once
// The C-family vocabulary GLSL, CUDA C++ (and MSL) share: type names (GLSL's spelling;
// the CUDA preamble typedefs them), loads and stores of each dtype, and code for moving
// values between kiln's dtypes with kiln::convert's rules (dtype.hpp):
// float to integer saturates and sends NaN to 0; to half and bfloat16 rounds to nearest
// even once (doubles and wide integers through float rounded to odd, as the host does);
// 16-bit floats live in float registers, stored as their bits.
#include "kiln/dtype.hpp"

#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

namespace kiln::jit::cfamily {

// How each dtype is spelled in GLSL: in a buffer (16-bit floats as their bits, bool as a
// byte), in a register (16-bit floats compute in float), and as a scalar parameter.
struct c_names {
  const char* storage;
  const char* reg;
  const char* param;
};
inline c_names names_of(dtype d) {
  static constexpr c_names table[] = {{"uint8_t", "bool", "uint"},
                                      {"uint8_t", "uint8_t", "uint"},
                                      {"int", "int", "int"},
                                      {"uint", "uint", "uint"},
                                      {"int64_t", "int64_t", "int64_t"},
                                      {"uint16_t", "float", "float"},
                                      {"uint16_t", "float", "float"},
                                      {"float", "float", "float"},
                                      {"double", "double", "double"}};
  return table[static_cast<int>(d)];
}
inline const char* register_type(dtype d) { return names_of(d).reg; }
inline const char* storage_type(dtype d) { return names_of(d).storage; }

inline std::string load_expr(dtype d, const std::string& x) {
  switch (d) {
  case dtype::b8:
    return "(" + x + " != uint8_t(0))";
  case dtype::f16:
    return "unpackHalf2x16(uint(" + x + ")).x";
  case dtype::bf16:
    return "uintBitsToFloat(uint(" + x + ") << 16)";
  default:
    return x;
  }
}
// v holds a value of dtype d (a 16-bit float already rounded, so packing is exact).
inline std::string store_expr(dtype d, const std::string& v) {
  switch (d) {
  case dtype::b8:
    return "uint8_t(" + v + " ? 1 : 0)";
  case dtype::f16:
    return "uint16_t(packHalf2x16(vec2(" + v + ", 0.0)) & 0xFFFFu)";
  case dtype::bf16:
    return "uint16_t(floatBitsToUint(" + v + ") >> 16)";
  default:
    return v;
  }
}
// Scalars arrive as the parameter types of params.hpp.
inline std::string param_expr(dtype d, const std::string& p) {
  switch (d) {
  case dtype::b8:
    return "(" + p + " != 0u)";
  case dtype::u8:
    return "uint8_t(" + p + ")";
  default:
    return p;
  }
}

// A float-typed value of `from` (f32 or f64 register) rounded to a 16-bit float.
inline std::string round_expr(dtype to, const std::string& x) {
  return std::string(to == dtype::f16 ? "kiln_round_f16(" : "kiln_round_bf16(") + x + ")";
}

// How float literals are suffixed: GLSL (1.0 float, 1.0lf double) or C++ (1.0f, 1.0).
enum class literal_style : std::uint8_t { glsl, cpp };

// The exact decimal literal of an integer-valued float.
inline std::string float_literal(long double v, bool f64,
                                 literal_style style = literal_style::glsl) {
  char buf[64];
  const char* suffix = style == literal_style::glsl ? (f64 ? "lf" : "") : (f64 ? "" : "f");
  std::snprintf(buf, sizeof buf, "%.0Lf.0%s", v, suffix);
  return buf;
}

// Saturating float -> integer: NaN to 0, at or below the lowest and at or above the
// highest, the limit. `hi` is the smallest source-type value >= the target's max (the max
// itself may not be representable, e.g. 2^31 - 1 in float): nothing lies between them.
template <class To>
std::string saturate_expr(dtype from, const std::string& x, const char* lo_lit, const char* hi_lit,
                          literal_style style) {
  const bool f64 = from == dtype::f64;
  const long double lo = static_cast<long double>(std::numeric_limits<To>::lowest());
  const long double mx = static_cast<long double>(std::numeric_limits<To>::max());
  long double hi;
  if (f64) {
    double d = static_cast<double>(mx);
    if (static_cast<long double>(d) < mx) d = std::nextafter(d, INFINITY);
    hi = d;
  } else {
    float f = static_cast<float>(mx);
    if (static_cast<long double>(f) < mx) f = std::nextafter(f, INFINITY);
    hi = f;
  }
  const std::string t = register_type(dtype_of<To>());
  return "(isnan(" + x + ") ? " + t + "(0) : " + x + " <= " + float_literal(lo, f64, style) +
         " ? " + lo_lit + " : " + x + " >= " + float_literal(hi, f64, style) + " ? " + hi_lit +
         " : " + t + "(" + x + "))";
}

inline std::string saturate(dtype from, dtype to, const std::string& x, literal_style style) {
  switch (to) {
  case dtype::u8:
    return saturate_expr<std::uint8_t>(from, x, "uint8_t(0)", "uint8_t(255)", style);
  case dtype::i32:
    return saturate_expr<std::int32_t>(from, x, "(-2147483647 - 1)", "2147483647", style);
  case dtype::u32:
    return saturate_expr<std::uint32_t>(from, x, "0u", "4294967295u", style);
  case dtype::i64:
    return saturate_expr<std::int64_t>(from, x, "(-9223372036854775807l - 1l)",
                                       "9223372036854775807l", style);
  default:
    return x;
  }
}

// x (a register of dtype `from`) as dtype `to`.
inline std::string convert_expr(dtype from, dtype to, const std::string& x,
                                literal_style style = literal_style::glsl) {
  if (from == to) return x;
  const bool ffrom = is_floating(from);
  if (to == dtype::b8) return "(" + x + " != " + register_type(from) + "(0))";
  if (from == dtype::b8)
    return "(" + x + " ? " + register_type(to) + "(1) : " + register_type(to) + "(0))";
  if (to == dtype::f16 || to == dtype::bf16) {
    if (from == dtype::f16 || from == dtype::bf16 || from == dtype::f32) return round_expr(to, x);
    if (from == dtype::f64) return round_expr(to, "kiln_f32_odd(" + x + ")");
    // Integers: round to odd in float first, so the 16-bit rounding is the only one.
    if (from == dtype::i32) return round_expr(to, "kiln_f32_odd_i32(" + x + ")");
    const bool sgn = from == dtype::i64;
    return round_expr(
        to, std::string(sgn ? "kiln_f32_odd_s(int64_t(" : "kiln_f32_odd_u(uint64_t(") + x + "))");
  }
  if (to == dtype::f32 || to == dtype::f64) return std::string(register_type(to)) + "(" + x + ")";
  if (ffrom) return saturate(from, to, x, style);
  return std::string(register_type(to)) + "(" + x + ")"; // integer to integer wraps, as C++
}

// Helper functions the conversions above call, for the dtypes a kernel uses. The CUDA
// generator includes them too (with floatBitsToUint and friends defined for it), so they
// negate in unsigned arithmetic: -v on the most negative value is undefined in C++.
inline std::string conversion_library(const std::array<bool, 9>& used) {
  auto u = [&](dtype d) { return used[static_cast<int>(d)]; };
  std::string s;
  if (u(dtype::f16))
    s += R"(float kiln_round_f16(float x) {
  const uint b = floatBitsToUint(x), sign = b & 0x80000000u, a = b ^ sign;
  if (a >= 0x7F800000u) return x;
  if (a >= 0x477FF000u) return uintBitsToFloat(sign | 0x7F800000u);
  if (a >= 0x38800000u) return uintBitsToFloat(sign | ((a + 0x0FFFu + ((a >> 13) & 1u)) & 0xFFFFE000u));
  return uintBitsToFloat(sign | floatBitsToUint(roundEven(uintBitsToFloat(a) * 16777216.0) * 5.9604644775390625e-8));
}
)";
  if (u(dtype::bf16))
    s += R"(float kiln_round_bf16(float x) {
  const uint b = floatBitsToUint(x);
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) return uintBitsToFloat((b | 0x00400000u) & 0xFFFF0000u);
  return uintBitsToFloat((b + 0x7FFFu + ((b >> 16) & 1u)) & 0xFFFF0000u);
}
)";
  const bool to16 = u(dtype::f16) || u(dtype::bf16);
  if (to16 && u(dtype::f64))
    s += R"(float kiln_f32_odd(double x) {
  float f = float(x);
  if (isnan(x)) return f;
  uint b = floatBitsToUint(f);
  if (isinf(f) && !isinf(x)) return uintBitsToFloat((b & 0x80000000u) | 0x7F7FFFFFu);
  if (double(f) != x && (b & 1u) == 0u) b = abs(double(f)) > abs(x) ? b - 1u : b + 1u;
  return uintBitsToFloat(b);
}
)";
  if (to16 && (u(dtype::i32) || u(dtype::u32) || u(dtype::i64) || u(dtype::u8)))
    s += R"(float kiln_f32_odd_u(uint64_t m) {
  if (m < (1ul << 24)) return float(m);
  int sh = 0;
  while ((m >> sh) >= (1ul << 24)) ++sh;
  const uint64_t kept = m >> sh;
  const uint sticky = (kept << sh) != m ? 1u : 0u;
  return float(kept | uint64_t(sticky)) * exp2(float(sh));
}
// From i32 without widening it signed first: lavapipe (Mesa 22.3) got int -> int64_t
// wrong for negative values here (measured: -18179 became a huge positive number).
float kiln_f32_odd_i32(int v) {
  const bool neg = v < 0;
  const float f = kiln_f32_odd_u(uint64_t(neg ? 0u - uint(v) : uint(v)));
  return neg ? -f : f;
}
float kiln_f32_odd_s(int64_t v) {
  const bool neg = v < int64_t(0);
  const float f = kiln_f32_odd_u(neg ? 0ul - uint64_t(v) : uint64_t(v));
  return neg ? -f : f;
}
)";
  return s;
}

} // namespace kiln::jit::cfamily
