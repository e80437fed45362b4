#pragma once
// Math functions. They compute in a float type (integers promote, see float_of_t in
// dtype.hpp); the host evaluator uses the xsimd implementation for f32/f64 and the C
// library for 16-bit floats and leftovers. round() rounds half away from zero, as
// std::round does; rsqrt is 1/sqrt computed exactly, not the hardware estimate.
#include "kiln/ops/define.hpp"
#include "kiln/ops/rules.hpp"

namespace kiln::ops {

#define KILN_FLOAT_UNARY(Name, host_expr, simd_expr)                                               \
  struct Name : op_base {                                                                          \
    static constexpr const char* name = #Name;                                                     \
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
  };

KILN_FLOAT_UNARY(exp, std::exp(x), xsimd::exp(x))
KILN_FLOAT_UNARY(exp2, std::exp2(x), xsimd::exp2(x))
KILN_FLOAT_UNARY(expm1, std::expm1(x), xsimd::expm1(x))
KILN_FLOAT_UNARY(log, std::log(x), xsimd::log(x))
KILN_FLOAT_UNARY(log2, std::log2(x), xsimd::log2(x))
KILN_FLOAT_UNARY(log10, std::log10(x), xsimd::log10(x))
KILN_FLOAT_UNARY(log1p, std::log1p(x), xsimd::log1p(x))
KILN_FLOAT_UNARY(sqrt, std::sqrt(x), xsimd::sqrt(x))
KILN_FLOAT_UNARY(rsqrt, T(1) / std::sqrt(x), B(1) / xsimd::sqrt(x))
KILN_FLOAT_UNARY(cbrt, std::cbrt(x), xsimd::cbrt(x))
KILN_FLOAT_UNARY(sin, std::sin(x), xsimd::sin(x))
KILN_FLOAT_UNARY(cos, std::cos(x), xsimd::cos(x))
KILN_FLOAT_UNARY(tan, std::tan(x), xsimd::tan(x))
KILN_FLOAT_UNARY(asin, std::asin(x), xsimd::asin(x))
KILN_FLOAT_UNARY(acos, std::acos(x), xsimd::acos(x))
KILN_FLOAT_UNARY(atan, std::atan(x), xsimd::atan(x))
KILN_FLOAT_UNARY(sinh, std::sinh(x), xsimd::sinh(x))
KILN_FLOAT_UNARY(cosh, std::cosh(x), xsimd::cosh(x))
KILN_FLOAT_UNARY(tanh, std::tanh(x), xsimd::tanh(x))
KILN_FLOAT_UNARY(asinh, std::asinh(x), xsimd::asinh(x))
KILN_FLOAT_UNARY(acosh, std::acosh(x), xsimd::acosh(x))
KILN_FLOAT_UNARY(atanh, std::atanh(x), xsimd::atanh(x))
KILN_FLOAT_UNARY(sigmoid, T(1) / (T(1) + std::exp(-x)), B(1) / (B(1) + xsimd::exp(-x)))
#undef KILN_FLOAT_UNARY

// erf and erfc: xsimd 8's f64 versions are off by up to ~70 ulp (erf) and ~35000 ulp
// (erfc, near x = 2.3), and its f32 erfc by 13 ulp, so those run on the C library; the
// f32 erf is within 8 ulp and stays vectorized (measured in tests/test_ops.cpp).
struct erf : op_base {
  static constexpr const char* name = "erf";
  static constexpr int arity = 1;
  using rule = rules::floating;
  template <class T>
  static T host(T x) {
    return std::erf(x);
  }
  template <class T>
  static constexpr bool simd_for = std::is_same_v<T, float>;
  template <class B>
  static B simd(const B& x) {
    return xsimd::erf(x);
  }
};
struct erfc : op_base {
  static constexpr const char* name = "erfc";
  static constexpr int arity = 1;
  using rule = rules::floating;
  template <class T>
  static T host(T x) {
    return std::erfc(x);
  }
};

#define KILN_FLOAT_BINARY(Name, host_expr, simd_expr)                                              \
  struct Name : op_base {                                                                          \
    static constexpr const char* name = #Name;                                                     \
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
  };

KILN_FLOAT_BINARY(atan2, std::atan2(x, y), xsimd::atan2(x, y))
#undef KILN_FLOAT_BINARY

// fmod: exact in the C library; xsimd 8's rounds the quotient (see ops::mod).
struct fmod : op_base {
  static constexpr const char* name = "fmod";
  static constexpr int arity = 2;
  using rule = rules::floating;
  template <class T>
  static T host(T x, T y) {
    return std::fmod(x, y);
  }
};

// pow: xsimd computes exp(y log x); in f64 that loses up to ~50 ulp once |y log x| is
// near 37, so f64 uses the C library (within 1 ulp). f32 stays vectorized (<= 64 ulp).
struct pow : op_base {
  static constexpr const char* name = "pow";
  static constexpr int arity = 2;
  using rule = rules::floating;
  template <class T>
  static T host(T x, T y) {
    return std::pow(x, y);
  }
  template <class T>
  static constexpr bool simd_for = std::is_same_v<T, float>;
  template <class B>
  static B simd(const B& x, const B& y) {
    return xsimd::pow(x, y);
  }
};

// Rounding keeps the type: the identity on integers.
#define KILN_ROUNDING(Name, host_expr, simd_expr)                                                  \
  struct Name : op_base {                                                                          \
    static constexpr const char* name = #Name;                                                     \
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
