#pragma once
// Math functions. They compute in a float type (integers promote, see float_of_t in
// dtype.hpp); the host evaluator uses the xsimd implementation for f32/f64 and the C
// library for 16-bit floats and leftovers. round() rounds half away from zero, as
// std::round does; rsqrt is 1/sqrt computed exactly, not the hardware estimate.
#include "kiln/ops/define.hpp"
#include "kiln/ops/erf_f64.hpp"
#include "kiln/ops/erfc_f32.hpp"
#include "kiln/ops/rules.hpp"
#include "kiln/ops/trig.hpp"
#include "kiln/ops/underflow.hpp"

#include <cmath>
#include <limits>

namespace kiln::ops {

namespace edges {
// Where xsimd 8's kernels leave the C99 results (measured in tests/test_ops_f32/f64.cpp),
// the lanes concerned are recomputed by the C library or fixed by a select:
// exp/exp2/expm1 flush gradual underflow to 0 and overflow a little early; log, log2,
// log10 and cbrt are wrong on f64 subnormal inputs; expm1 and log1p lose the sign of -0;
// acosh gives inf below 1; atan2 gives NaN for (±0, ±0) and (±inf, ±inf).
template <class B>
using lanes_t = typename B::value_type;
template <class B>
constexpr lanes_t<B> exp_safe = std::is_same_v<lanes_t<B>, float> ? 87.0f : 708.0;
template <class B>
constexpr lanes_t<B> exp2_safe = std::is_same_v<lanes_t<B>, float> ? 126.0f : 1022.0;

// Below these exp rounds to +0 (the result is under half the least subnormal) and above
// them it overflows to inf, as xsimd's gives: only the bands between them and the safe
// domain need the C library (a Gaussian's exp(-x^2) of a wide x is far below, and common).
template <class B>
constexpr lanes_t<B> exp_zero = std::is_same_v<lanes_t<B>, float> ? -103.98f : -745.14;
template <class B>
constexpr lanes_t<B> exp_inf = std::is_same_v<lanes_t<B>, float> ? 88.73f : 709.79;

// The common case costs one test: no lane beyond the safe domain (NaN lanes are not, and
// xsimd's exp gives NaN for them). Lanes beyond it are sorted out apart: the heavy
// expression of bench/elementwise.cpp at 2^16 was faster in 7 of 8 alternating pairs than
// with the select and four compares on every batch (medians 251 -> 227 us; noisy VM).
// Gradual underflow is formed scaled and rounded once (underflow.hpp), without the
// subnormal multiplies that cost a microcode assist each; the band below overflow is the C
// library's.
template <class B>
[[gnu::noinline, gnu::cold]] B exp_edges(const B& r, const B& x) {
  B out = xsimd::select(x <= B(exp_zero<B>), B(0), r);
  const auto band = x < B(-exp_safe<B>) && x > B(exp_zero<B>);
  if (xsimd::any(band))
    out = xsimd::select(band,
                        underflow::scale_down<64>(underflow::exp_scaled<64>(
                            xsimd::min(xsimd::max(x, B(exp_zero<B>)), B(-exp_safe<B>)))),
                        out);
  return kiln::detail::scalar_lanes(
      out, x > B(exp_safe<B>) && x < B(exp_inf<B>), [](lanes_t<B> v) { return std::exp(v); }, x);
}
template <class B>
B simd_exp(const B& x) {
  // Clamped at the safe domain's lower end (x86's max gives its second operand, x, for a
  // NaN): xsimd's exp of x just beyond it builds a subnormal, at the cost of an assist.
  const B r = xsimd::exp(xsimd::max(B(-exp_safe<B>), x));
  if (xsimd::any(xsimd::abs(x) > B(exp_safe<B>))) [[unlikely]]
    return exp_edges(r, x);
  return r;
}
template <class B>
B simd_exp2(const B& x) {
  return kiln::detail::scalar_lanes(
      xsimd::exp2(x), xsimd::abs(x) > B(exp2_safe<B>), [](lanes_t<B> v) { return std::exp2(v); },
      x);
}
template <class B>
B simd_expm1(const B& x) {
  const B r = kiln::detail::scalar_lanes(
      xsimd::expm1(x), x > B(exp_safe<B>), [](lanes_t<B> v) { return std::expm1(v); }, x);
  return xsimd::select(x == B(0), x, r);
}
template <class B>
B simd_log1p(const B& x) {
  return xsimd::select(x == B(0), x, xsimd::log1p(x));
}
// f64 only: xsimd's f32 versions handle subnormal inputs themselves.
template <class B, class F>
B fix_subnormal_inputs(const B& r, const B& x, F f) {
  if constexpr (std::is_same_v<lanes_t<B>, float>)
    return r;
  else
    return kiln::detail::scalar_lanes(
        r, xsimd::abs(x) < B(std::numeric_limits<double>::min()) && x != B(0), f, x);
}
// f32 log without a division (xsimd's divides, which costs a third of its time): x = m 2^e
// with m in [sqrt(1/2), sqrt(2)), log(m) = f - f^2/2 + f^3 P(f) for f = m - 1 (the
// classic Cephes logf polynomial, within 1 ulp), plus e log 2 in two parts. Only positive
// normal finite inputs take this path; zero, negatives, subnormals, inf and NaN take the
// C library's.
template <class B>
B log_f32(const B& x) {
  using I = xsimd::batch<std::int32_t, typename B::arch_type>;
  const I bits = xsimd::bitwise_cast<I>(x);
  const I split = I(0x3f3504f3); // sqrt(1/2): the exponent steps where the mantissa wraps
  const I t = bits - split;
  const B m = xsimd::bitwise_cast<B>((t & I(0x007fffff)) + split);
  const B e = xsimd::batch_cast<float>(t >> 23);
  const B f = m - B(1.0f), z = f * f;
  B p = B(7.0376836292e-2f);
  p = xsimd::fma(p, f, B(-1.1514610310e-1f));
  p = xsimd::fma(p, f, B(1.1676998740e-1f));
  p = xsimd::fma(p, f, B(-1.2420140846e-1f));
  p = xsimd::fma(p, f, B(1.4249322787e-1f));
  p = xsimd::fma(p, f, B(-1.6668057665e-1f));
  p = xsimd::fma(p, f, B(2.0000714765e-1f));
  p = xsimd::fma(p, f, B(-2.4999993993e-1f));
  p = xsimd::fma(p, f, B(3.3333331174e-1f));
  B y = xsimd::fma(e, B(-2.12194440e-4f), p * f * z);
  y = xsimd::fma(z, B(-0.5f), y);
  const B r = xsimd::fma(e, B(0.693359375f), f + y);
  // Positive normal finite <=> bits - bits(FLT_MIN) < bits(inf) - bits(FLT_MIN) as unsigned,
  // that is (shifting both sides by 2^31 to compare signed) bits + 0x7f800000 < -2^24.
  const auto redo = xsimd::bool_cast(bits + I(0x7f800000) >= I(-0x01000000));
  return kiln::detail::scalar_lanes(
      r, redo, [](float v) { return std::log(v); }, x);
}
template <class B>
B simd_log(const B& x) {
  if constexpr (std::is_same_v<lanes_t<B>, float>)
    return log_f32(x);
  else
    return fix_subnormal_inputs(xsimd::log(x), x, [](lanes_t<B> v) { return std::log(v); });
}
template <class B>
B simd_acosh(const B& x) {
  return xsimd::select(x < B(1), B(std::numeric_limits<lanes_t<B>>::quiet_NaN()), xsimd::acosh(x));
}
template <class B>
B simd_atan2(const B& y, const B& x) {
  const auto redo = (y == B(0) && x == B(0)) || (xsimd::isinf(y) && xsimd::isinf(x));
  return kiln::detail::scalar_lanes(
      xsimd::atan2(y, x), redo, [](lanes_t<B> a, lanes_t<B> b) { return std::atan2(a, b); }, y, x);
}
// 1 / (1 + e^-x) overflows e^-x for x below about -88 (f32) and returns 0 where the
// answer is e^x, down into gradual underflow: with e = e^-|x| neither side overflows.
template <class T>
T host_sigmoid(T x) {
  const T e = std::exp(-std::fabs(x));
  return x >= T(0) ? T(1) / (T(1) + e) : e / (T(1) + e);
}
template <class B>
B simd_sigmoid(const B& x) {
  const B e = simd_exp(-xsimd::abs(x));
  return xsimd::select(x >= B(0), B(1), e) / (B(1) + e);
}
} // namespace edges

#define KILN_FLOAT_UNARY(Name, host_expr, simd_expr, dfdx)                                         \
  struct Name : op_base {                                                                          \
    static constexpr const char* name = #Name;                                                     \
    static constexpr spelling glsl{.any = "kiln_" #Name "($0)"};                                   \
    static constexpr spelling cuda{.f32 = #Name "f($0)", .f64 = #Name "($0)"}; /* libdevice */     \
    static constexpr spelling msl = glsl; /* kiln_ names: metal/math_names.hpp */                  \
    static constexpr int arity = 1;                                                                \
    using rule = rules::floating;                                                                  \
    template <class T>                                                                             \
    static T host(T x) {                                                                           \
      return host_expr;                                                                            \
    }                                                                                              \
    template <class T>                                                                             \
    static constexpr bool simd_for = detail::is_simd_float<T>;                                     \
    template <class B>                                                                             \
    static B simd(const B& x) {                                                                    \
      return simd_expr;                                                                            \
    }                                                                                              \
    /* d f(x) = f'(x) dx, with f' written in x (D: autodiff's toolkit) */                          \
    struct derivative {                                                                            \
      template <class D, class G, class X>                                                         \
      static auto vjp(const G& g, const X& x) {                                                    \
        return D::tuple(D::mul(g, dfdx));                                                          \
      }                                                                                            \
    };                                                                                             \
  };

KILN_FLOAT_UNARY(exp, std::exp(x), edges::simd_exp(x), D::exp(x))
KILN_FLOAT_UNARY(exp2, std::exp2(x), edges::simd_exp2(x), D::exp2(x) * 0.69314718055994530942)
KILN_FLOAT_UNARY(expm1, std::expm1(x), edges::simd_expm1(x), D::exp(x))
KILN_FLOAT_UNARY(log, std::log(x), edges::simd_log(x), 1.0 / x)
KILN_FLOAT_UNARY(log2, std::log2(x),
                 edges::fix_subnormal_inputs(xsimd::log2(x), x,
                                             [](auto v) { return std::log2(v); }),
                 1.4426950408889634074 / x)
KILN_FLOAT_UNARY(log10, std::log10(x),
                 edges::fix_subnormal_inputs(xsimd::log10(x), x,
                                             [](auto v) { return std::log10(v); }),
                 0.43429448190325182765 / x)
KILN_FLOAT_UNARY(log1p, std::log1p(x), edges::simd_log1p(x), 1.0 / (1.0 + x))
KILN_FLOAT_UNARY(sqrt, std::sqrt(x), xsimd::sqrt(x), 0.5 / D::sqrt(x))
KILN_FLOAT_UNARY(rsqrt, T(1) / std::sqrt(x), B(1) / xsimd::sqrt(x), -0.5 * D::rsqrt(x) / x)
KILN_FLOAT_UNARY(cbrt, std::cbrt(x),
                 edges::fix_subnormal_inputs(xsimd::cbrt(x), x,
                                             [](auto v) { return std::cbrt(v); }),
                 1.0 / (3.0 * D::cbrt(x) * D::cbrt(x)))
KILN_FLOAT_UNARY(sin, std::sin(x), trig::sin(x), D::cos(x))
KILN_FLOAT_UNARY(cos, std::cos(x), trig::cos(x), -D::sin(x))
KILN_FLOAT_UNARY(tan, std::tan(x), trig::tan(x), 1.0 + D::tan(x) * D::tan(x))
KILN_FLOAT_UNARY(asin, std::asin(x), xsimd::asin(x), D::rsqrt(1.0 - x * x))
KILN_FLOAT_UNARY(acos, std::acos(x), xsimd::acos(x), -D::rsqrt(1.0 - x * x))
KILN_FLOAT_UNARY(atan, std::atan(x), xsimd::atan(x), 1.0 / (1.0 + x * x))
KILN_FLOAT_UNARY(sinh, std::sinh(x), xsimd::sinh(x), D::cosh(x))
KILN_FLOAT_UNARY(cosh, std::cosh(x), xsimd::cosh(x), D::sinh(x))
KILN_FLOAT_UNARY(tanh, std::tanh(x), xsimd::tanh(x), 1.0 - D::tanh(x) * D::tanh(x))
KILN_FLOAT_UNARY(asinh, std::asinh(x), xsimd::asinh(x), D::rsqrt(x* x + 1.0))
KILN_FLOAT_UNARY(acosh, std::acosh(x), edges::simd_acosh(x), D::rsqrt(x* x - 1.0))
KILN_FLOAT_UNARY(atanh, std::atanh(x), xsimd::atanh(x), 1.0 / (1.0 - x * x))
KILN_FLOAT_UNARY(sigmoid, edges::host_sigmoid(x), edges::simd_sigmoid(x),
                 D::sigmoid(x) * (1.0 - D::sigmoid(x)))
#undef KILN_FLOAT_UNARY

// erf and erfc: xsimd 8's f64 versions are off by up to ~70 ulp (erf) and ~35000 ulp
// (erfc, near x = 2.3), so f64 runs kiln's own batch version (erf_f64.hpp, within 3 ulp);
// xsimd's f32 erfc is off by 13 ulp, so f32 runs kiln's own (erfc_f32.hpp, within 5 ulp,
// the devices' method); the f32 erf is within 8 ulp and stays xsimd's
// (measured in tests/test_ops_f32/f64.cpp).
struct erf : op_base {
  static constexpr const char* name = "erf";
  static constexpr spelling glsl{.any = "kiln_erf($0)"};
  static constexpr spelling cuda{.f32 = "erff($0)", .f64 = "erf($0)"};
  static constexpr spelling msl = glsl; // kiln_ names: metal/math_names.hpp
  static constexpr int arity = 1;
  using rule = rules::floating;
  template <class T>
  static T host(T x) {
    return std::erf(x);
  }
  template <class T>
  static constexpr bool simd_for = detail::is_simd_float<T>;
  template <class B>
  KILN_SIMD_INLINE B simd(const B& x) {
    if constexpr (std::is_same_v<typename B::value_type, float>)
      return xsimd::erf(x);
    else
      return erf_f64::erf(x);
  }
  // d erf(x) = 2/sqrt(pi) exp(-x^2) dx
  struct derivative {
    template <class D, class G, class X>
    static auto vjp(const G& g, const X& x) {
      return D::tuple(D::mul(g, 1.1283791670955125739 * D::exp(-(x * x))));
    }
  };
};
struct erfc : op_base {
  static constexpr const char* name = "erfc";
  static constexpr spelling glsl{.any = "kiln_erfc($0)"};
  static constexpr spelling cuda{.f32 = "erfcf($0)", .f64 = "erfc($0)"};
  static constexpr spelling msl = glsl; // kiln_ names: metal/math_names.hpp
  static constexpr int arity = 1;
  using rule = rules::floating;
  template <class T>
  static T host(T x) {
    return std::erfc(x);
  }
  template <class T>
  static constexpr bool simd_for = detail::is_simd_float<T>;
  template <class B>
  KILN_SIMD_INLINE B simd(const B& x) {
    if constexpr (std::is_same_v<typename B::value_type, float>)
      return erfc_f32::erfc(x);
    else
      return erf_f64::erfc(x);
  }
  struct derivative {
    template <class D, class G, class X>
    static auto vjp(const G& g, const X& x) {
      return D::tuple(D::mul(g, -1.1283791670955125739 * D::exp(-(x * x))));
    }
  };
};

#define KILN_FLOAT_BINARY(Name, host_expr, simd_expr, dfdx, dfdy)                                  \
  struct Name : op_base {                                                                          \
    static constexpr const char* name = #Name;                                                     \
    static constexpr spelling glsl{.any = "kiln_" #Name "($0, $1)"};                               \
    static constexpr spelling cuda{.f32 = #Name "f($0, $1)", .f64 = #Name "($0, $1)"};             \
    static constexpr spelling msl = glsl; /* kiln_ names: metal/math_names.hpp */                  \
    static constexpr int arity = 2;                                                                \
    using rule = rules::floating;                                                                  \
    template <class T>                                                                             \
    static T host(T x, T y) {                                                                      \
      return host_expr;                                                                            \
    }                                                                                              \
    template <class T>                                                                             \
    static constexpr bool simd_for = detail::is_simd_float<T>;                                     \
    template <class B>                                                                             \
    static B simd(const B& x, const B& y) {                                                        \
      return simd_expr;                                                                            \
    }                                                                                              \
    struct derivative {                                                                            \
      template <class D, class G, class X, class Y>                                                \
      static auto vjp(const G& g, const X& x, const Y& y) {                                        \
        return D::tuple(D::mul(g, dfdx), D::mul(g, dfdy));                                         \
      }                                                                                            \
    };                                                                                             \
  };

// atan2(y, x) with the operands named x, y here: d/dx = y/(x^2+y^2), d/dy = -x/(x^2+y^2).
KILN_FLOAT_BINARY(atan2, std::atan2(x, y), edges::simd_atan2(x, y), y / (x * x + y * y),
                  -x / (x * x + y * y))
#undef KILN_FLOAT_BINARY

// fmod: exact in the C library; xsimd 8's rounds the quotient (see ops::mod).
struct fmod : op_base {
  static constexpr const char* name = "fmod";
  static constexpr spelling glsl{.any = "kiln_fmod($0, $1)"};
  static constexpr spelling cuda{.f32 = "fmodf($0, $1)", .f64 = "fmod($0, $1)"};
  static constexpr spelling msl = glsl; // kiln_ names: metal/math_names.hpp
  static constexpr int arity = 2;
  using rule = rules::floating;
  template <class T>
  static T host(T x, T y) {
    return std::fmod(x, y);
  }
  // x - trunc(x / y) y: d/dx = 1, d/dy = -trunc(x / y) (away from the jumps).
  struct derivative {
    template <class D, class G, class X, class Y>
    static auto vjp(const G& g, const X& x, const Y& y) {
      return D::tuple(g, D::neg(D::mul(g, D::trunc(x / y))));
    }
  };
};

// pow: xsimd computes exp(y log x), which loses up to ~50 ulp (f64) and ~100 ulp (f32)
// once |y log x| is large, and gets x = 0 and other special pairs wrong; the C library is
// within 1 ulp and follows C99 Annex F, so pow runs on it.
struct pow : op_base {
  static constexpr const char* name = "pow";
  static constexpr spelling glsl{.any = "kiln_pow($0, $1)"};
  static constexpr spelling cuda{.f32 = "powf($0, $1)", .f64 = "pow($0, $1)"};
  static constexpr spelling msl = glsl; // kiln_ names: metal/math_names.hpp
  static constexpr int arity = 2;
  using rule = rules::floating;
  template <class T>
  static T host(T x, T y) {
    return std::pow(x, y);
  }
  // d x^y = y x^(y-1) dx + x^y log(x) dy (the dy term where x > 0; 0 elsewhere, where
  // x^y is real only for integer y).
  struct derivative {
    template <class D, class G, class X, class Y>
    static auto vjp(const G& g, const X& x, const Y& y) {
      return D::tuple(D::mul(g, y * D::pow(x, y - 1.0)),
                      D::mul(g, D::mask(D::pow(x, y) * D::log(x), x > 0.0)));
    }
  };
};

// Rounding keeps the type: the identity on integers.
#define KILN_ROUNDING(Name, host_expr, simd_expr)                                                  \
  struct Name : op_base {                                                                          \
    static constexpr const char* name = #Name;                                                     \
    static constexpr spelling glsl{.integer = "$0", .any = "kiln_" #Name "($0)"};                  \
    static constexpr spelling cuda{.integer = "$0", .f32 = #Name "f($0)", .f64 = #Name "($0)"};    \
    static constexpr spelling msl = glsl; /* kiln_ names: metal/math_names.hpp */                  \
    static constexpr int arity = 1;                                                                \
    using rule = rules::rounding;                                                                  \
    template <class T>                                                                             \
    static T host(T x) {                                                                           \
      if constexpr (std::is_integral_v<T>)                                                         \
        return x;                                                                                  \
      else                                                                                         \
        return host_expr;                                                                          \
    }                                                                                              \
    template <class T>                                                                             \
    static constexpr bool simd_for = detail::is_simd_float<T>;                                     \
    template <class B>                                                                             \
    static B simd(const B& x) {                                                                    \
      return simd_expr;                                                                            \
    }                                                                                              \
    using derivative = zero_gradient; /* piecewise constant */                                     \
  };

KILN_ROUNDING(floor, std::floor(x), xsimd::floor(x))
KILN_ROUNDING(ceil, std::ceil(x), xsimd::ceil(x))
KILN_ROUNDING(round, std::round(x), xsimd::round(x))
KILN_ROUNDING(trunc, std::trunc(x), xsimd::trunc(x))
#undef KILN_ROUNDING

} // namespace kiln::ops

namespace kiln {
KILN_UNARY_FUNCTION(exp, ops::exp)
KILN_UNARY_FUNCTION(exp2, ops::exp2)
KILN_UNARY_FUNCTION(expm1, ops::expm1)
KILN_UNARY_FUNCTION(log, ops::log)
KILN_UNARY_FUNCTION(log2, ops::log2)
KILN_UNARY_FUNCTION(log10, ops::log10)
KILN_UNARY_FUNCTION(log1p, ops::log1p)
KILN_UNARY_FUNCTION(sqrt, ops::sqrt)
KILN_UNARY_FUNCTION(rsqrt, ops::rsqrt)
KILN_UNARY_FUNCTION(cbrt, ops::cbrt)
KILN_UNARY_FUNCTION(sin, ops::sin)
KILN_UNARY_FUNCTION(cos, ops::cos)
KILN_UNARY_FUNCTION(tan, ops::tan)
KILN_UNARY_FUNCTION(asin, ops::asin)
KILN_UNARY_FUNCTION(acos, ops::acos)
KILN_UNARY_FUNCTION(atan, ops::atan)
KILN_UNARY_FUNCTION(sinh, ops::sinh)
KILN_UNARY_FUNCTION(cosh, ops::cosh)
KILN_UNARY_FUNCTION(tanh, ops::tanh)
KILN_UNARY_FUNCTION(asinh, ops::asinh)
KILN_UNARY_FUNCTION(acosh, ops::acosh)
KILN_UNARY_FUNCTION(atanh, ops::atanh)
KILN_UNARY_FUNCTION(erf, ops::erf)
KILN_UNARY_FUNCTION(erfc, ops::erfc)
KILN_UNARY_FUNCTION(sigmoid, ops::sigmoid)
KILN_BINARY_FUNCTION(pow, ops::pow)
KILN_BINARY_FUNCTION(atan2, ops::atan2)
KILN_BINARY_FUNCTION(fmod, ops::fmod)
KILN_UNARY_FUNCTION(floor, ops::floor)
KILN_UNARY_FUNCTION(ceil, ops::ceil)
KILN_UNARY_FUNCTION(round, ops::round)
KILN_UNARY_FUNCTION(trunc, ops::trunc)
} // namespace kiln
