#pragma once
// Arithmetic ops: + - * / %, unary minus, abs, sign, maximum, minimum, clamp.
// Integer / and % follow C++ (truncate toward zero, remainder takes the dividend's
// sign), except that dividing by zero gives 0 instead of trapping. Floating % is fmod.
// maximum/minimum/clamp propagate NaN, as numpy does.
#include "kiln/ops/define.hpp"
#include "kiln/ops/rules.hpp"

namespace kiln::detail {
template <class T>
constexpr auto unsigned_of(T v) {
  return static_cast<std::make_unsigned_t<T>>(v);
}
} // namespace kiln::detail

namespace kiln::ops {

template <class T>
inline constexpr bool simd_number = detail::is_simd_float<T> || detail::is_simd_int<T>;

struct add : op_base {
  static constexpr const char* name = "add";
  static constexpr spelling glsl{.any = "($0 + $1)"};
  // CUDA C++: integers wrap through uint64_t (signed overflow is undefined there, not in GLSL).
  static constexpr spelling cuda{.integer = "$T(uint64_t($0) + uint64_t($1))", .any = "($0 + $1)"};
  static constexpr spelling msl = cuda; // MSL is C++ too: the same wrapping
  static constexpr int arity = 2;
  using rule = rules::arithmetic;
  template <class T>
  static T host(T a, T b) {
    if constexpr (std::is_integral_v<T>) // wraps, never signed-overflow UB
      return static_cast<T>(detail::unsigned_of<T>(a) + detail::unsigned_of<T>(b));
    else
      return static_cast<T>(a + b);
  }
  template <class T>
  static constexpr bool simd_for = simd_number<T>;
  template <class B>
  static B simd(const B& a, const B& b) {
    return a + b;
  }
  // d(a + b) = da + db
  struct derivative {
    template <class D, class G, class A, class B>
    static auto vjp(const G& g, const A&, const B&) {
      return D::tuple(g, g);
    }
  };
};

struct sub : op_base {
  static constexpr const char* name = "sub";
  static constexpr spelling glsl{.any = "($0 - $1)"};
  static constexpr spelling cuda{.integer = "$T(uint64_t($0) - uint64_t($1))", .any = "($0 - $1)"};
  static constexpr spelling msl = cuda; // MSL is C++ too: the same wrapping
  static constexpr int arity = 2;
  using rule = rules::arithmetic;
  template <class T>
  static T host(T a, T b) {
    if constexpr (std::is_integral_v<T>) // wraps, never signed-overflow UB
      return static_cast<T>(detail::unsigned_of<T>(a) - detail::unsigned_of<T>(b));
    else
      return static_cast<T>(a - b);
  }
  template <class T>
  static constexpr bool simd_for = simd_number<T>;
  template <class B>
  static B simd(const B& a, const B& b) {
    return a - b;
  }
  // d(a - b) = da - db
  struct derivative {
    template <class D, class G, class A, class B>
    static auto vjp(const G& g, const A&, const B&) {
      return D::tuple(g, D::neg(g));
    }
  };
};

struct mul : op_base {
  static constexpr const char* name = "mul";
  static constexpr spelling glsl{.any = "($0 * $1)"};
  static constexpr spelling cuda{.integer = "$T(uint64_t($0) * uint64_t($1))", .any = "($0 * $1)"};
  static constexpr spelling msl = cuda; // MSL is C++ too: the same wrapping
  static constexpr int arity = 2;
  using rule = rules::arithmetic;
  template <class T>
  static T host(T a, T b) {
    if constexpr (std::is_integral_v<T>) // wraps, never signed-overflow UB
      return static_cast<T>(detail::unsigned_of<T>(a) * detail::unsigned_of<T>(b));
    else
      return static_cast<T>(a * b);
  }
  template <class T>
  static constexpr bool simd_for = simd_number<T>;
  template <class B>
  static B simd(const B& a, const B& b) {
    return a * b;
  }
  // d(a b) = b da + a db
  struct derivative {
    template <class D, class G, class A, class B>
    static auto vjp(const G& g, const A& a, const B& b) {
      return D::tuple(D::mul(g, b), D::mul(g, a));
    }
  };
};

struct div : op_base {
  static constexpr const char* name = "div";
  // Integers: the divisor is made safe first (both arms of a select may run, and
  // INT_MIN / -1 traps on x86), then the results above are selected.
  static constexpr spelling glsl{
      .integer = "($1 == $T(0) ? $T(0) : ($T(-1) < $T(0) && $1 == ~$T(0)) ? $T(0) - $0 : "
                 "$0 / (($1 == $T(0) || ($T(-1) < $T(0) && $1 == ~$T(0))) ? $T(1) : $1))",
      .any = "($0 / $1)"};
  static constexpr spelling cuda{
      .integer = "($1 == $T(0) ? $T(0) : ($T(-1) < $T(0) && $1 == ~$T(0)) ? "
                 "$T(uint64_t(0) - uint64_t($0)) : "
                 "$0 / (($1 == $T(0) || ($T(-1) < $T(0) && $1 == ~$T(0))) ? $T(1) : $1))",
      .any = "($0 / $1)"};
  static constexpr spelling msl = cuda; // MSL is C++ too: the same wrapping
  static constexpr int arity = 2;
  using rule = rules::arithmetic;
  template <class T>
  static T host(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      if (b == 0) return 0;
      if constexpr (std::is_signed_v<T>)
        if (b == -1) return static_cast<T>(T(0) - static_cast<std::make_unsigned_t<T>>(a));
    }
    return static_cast<T>(a / b);
  }
  template <class T>
  static constexpr bool simd_for = detail::is_simd_float<T>;
  template <class B>
  static B simd(const B& a, const B& b) {
    return a / b;
  }
  // d(a / b) = da / b - a / b^2 db
  struct derivative {
    template <class D, class G, class A, class B>
    static auto vjp(const G& g, const A& a, const B& b) {
      return D::tuple(D::div(g, b), D::neg(D::mul(g, a / (b * b))));
    }
  };
};

struct mod : op_base {
  static constexpr const char* name = "mod";
  static constexpr const char* integer_mod =
      "(($1 == $T(0) || ($T(-1) < $T(0) && $1 == ~$T(0))) ? $T(0) : "
      "$0 - ($0 / (($1 == $T(0) || ($T(-1) < $T(0) && $1 == ~$T(0))) ? $T(1) : $1)) * "
      "$1)";
  static constexpr spelling glsl{.integer = integer_mod, .any = "kiln_fmod($0, $1)"};
  static constexpr spelling cuda{
      .integer = integer_mod, .f32 = "fmodf($0, $1)", .f64 = "fmod($0, $1)"};
  static constexpr spelling msl{.integer = integer_mod, .any = "kiln_fmod($0, $1)"};
  static constexpr int arity = 2;
  using rule = rules::arithmetic;
  template <class T>
  static T host(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      if (b == 0) return 0;
      if constexpr (std::is_signed_v<T>)
        if (b == -1) return 0;
      return static_cast<T>(a % b);
    } else {
      return std::fmod(a, b);
    }
  }
  // No simd(): xsimd 8's fmod rounds the quotient, and near an integer quotient gives a
  // result of the wrong sign; the C library's fmod is exact.
  // Floats: a - trunc(a / b) b, so d/da = 1 and d/db = -trunc(a / b) (away from the jumps).
  struct derivative {
    template <class D, class G, class A, class B>
    static auto vjp(const G& g, const A& a, const B& b) {
      return D::tuple(g, D::neg(D::mul(g, D::trunc(a / b))));
    }
  };
};

struct neg : op_base {
  static constexpr const char* name = "neg";
  static constexpr spelling glsl{.integer = "($T(0) - $0)", .any = "(-$0)"};
  static constexpr spelling cuda{.integer = "$T(uint64_t(0) - uint64_t($0))", .any = "(-$0)"};
  static constexpr spelling msl = cuda; // MSL is C++ too: the same wrapping
  static constexpr int arity = 1;
  using rule = rules::arithmetic;
  template <class T>
  static T host(T a) {
    if constexpr (std::is_integral_v<T>) // wraps like unsigned arithmetic, never UB
      return static_cast<T>(T(0) - static_cast<std::make_unsigned_t<T>>(a));
    else
      return -a;
  }
  template <class T>
  static constexpr bool simd_for = detail::is_simd_float<T> || std::is_same_v<T, std::int32_t>;
  template <class B>
  static B simd(const B& a) {
    // Flip the sign bit (xsimd 8's unary minus computes 0 - a, which loses -0).
    if constexpr (std::is_floating_point_v<typename B::value_type>)
      return xsimd::bitwise_xor(a, B(typename B::value_type(-0.0)));
    else
      return -a;
  }
  struct derivative {
    template <class D, class G, class A>
    static auto vjp(const G& g, const A&) {
      return D::tuple(D::neg(g));
    }
  };
};

struct abs : op_base {
  static constexpr const char* name = "abs";
  static constexpr spelling glsl{.integer = "($0 < $T(0) ? $T(0) - $0 : $0)", .any = "abs($0)"};
  static constexpr spelling cuda{.integer = "($0 < $T(0) ? $T(uint64_t(0) - uint64_t($0)) : $0)",
                                 .f32 = "fabsf($0)",
                                 .f64 = "fabs($0)"};
  static constexpr spelling msl{.integer = cuda.integer, .any = "abs($0)"};
  static constexpr int arity = 1;
  using rule = rules::arithmetic;
  template <class T>
  static T host(T a) {
    if constexpr (std::is_unsigned_v<T>)
      return a;
    else if constexpr (std::is_integral_v<T>)
      return a < 0 ? neg::host(a) : a;
    else
      return std::fabs(a);
  }
  template <class T>
  static constexpr bool simd_for = detail::is_simd_float<T>;
  template <class B>
  static B simd(const B& a) {
    return xsimd::abs(a);
  }
  // d|x| = sign(x) dx (0 at 0).
  struct derivative {
    template <class D, class G, class A>
    static auto vjp(const G& g, const A& a) {
      return D::tuple(D::mul(g, D::sign(a)));
    }
  };
};

struct sign : op_base {
  static constexpr const char* name = "sign";
  static constexpr spelling glsl{.integer = "($0 > $T(0) ? $T(1) : $0 < $T(0) ? $T(-1) : $T(0))",
                                 .any = "($0 > $T(0) ? $T(1) : $0 < $T(0) ? $T(-1) : $0)"};
  static constexpr spelling cuda = glsl; // valid C++ with the same meaning
  static constexpr spelling msl = glsl;
  static constexpr int arity = 1;
  using rule = rules::arithmetic;
  template <class T>
  static T host(T a) {
    if constexpr (std::is_floating_point_v<T>)
      if (a != a || a == T(0)) return a; // NaN stays NaN, -0 stays -0 (as the SIMD path)
    return static_cast<T>((T(0) < a) - (a < T(0)));
  }
  template <class T>
  static constexpr bool simd_for = detail::is_simd_float<T>;
  template <class B>
  static B simd(const B& a) {
    const B one(1), zero(0);
    return xsimd::select(a > zero, one, xsimd::select(a < zero, -one, a)); // keeps 0 and NaN
  }
  using derivative = zero_gradient; // piecewise constant
};

struct maximum : op_base {
  static constexpr const char* name = "maximum";
  static constexpr spelling glsl{.integer = "($0 < $1 ? $1 : $0)",
                                 .any = "((isnan($0) || isnan($1)) ? $0 + $1 : $0 < $1 ? $1 : $0)"};
  static constexpr spelling cuda = glsl;
  static constexpr spelling msl = glsl;
  static constexpr int arity = 2;
  using rule = rules::arithmetic;
  template <class T>
  static T host(T a, T b) {
    if constexpr (std::is_floating_point_v<T>)
      if (a != a || b != b) return a + b;
    return a < b ? b : a;
  }
  template <class T>
  static constexpr bool simd_for = simd_number<T>;
  template <class B>
  static B simd(const B& a, const B& b) {
    if constexpr (std::is_floating_point_v<typename B::value_type>)
      return xsimd::select(xsimd::isnan(a) || xsimd::isnan(b), a + b, xsimd::max(a, b));
    else
      return xsimd::max(a, b);
  }
  // The adjoint goes to the larger operand; a tie routes it to the first.
  struct derivative {
    template <class D, class G, class A, class B>
    static auto vjp(const G& g, const A& a, const B& b) {
      return D::tuple(D::mask(g, a >= b), D::mask(g, a < b));
    }
  };
};

struct minimum : op_base {
  static constexpr const char* name = "minimum";
  static constexpr spelling glsl{.integer = "($1 < $0 ? $1 : $0)",
                                 .any = "((isnan($0) || isnan($1)) ? $0 + $1 : $1 < $0 ? $1 : $0)"};
  static constexpr spelling cuda = glsl;
  static constexpr spelling msl = glsl;
  static constexpr int arity = 2;
  using rule = rules::arithmetic;
  template <class T>
  static T host(T a, T b) {
    if constexpr (std::is_floating_point_v<T>)
      if (a != a || b != b) return a + b;
    return b < a ? b : a;
  }
  template <class T>
  static constexpr bool simd_for = simd_number<T>;
  template <class B>
  static B simd(const B& a, const B& b) {
    if constexpr (std::is_floating_point_v<typename B::value_type>)
      return xsimd::select(xsimd::isnan(a) || xsimd::isnan(b), a + b, xsimd::min(a, b));
    else
      return xsimd::min(a, b);
  }
  // The adjoint goes to the smaller operand; a tie routes it to the first.
  struct derivative {
    template <class D, class G, class A, class B>
    static auto vjp(const G& g, const A& a, const B& b) {
      return D::tuple(D::mask(g, a <= b), D::mask(g, a > b));
    }
  };
};

struct clamp : op_base {
  static constexpr const char* name = "clamp";
  // minimum(maximum(x, lo), hi), with NaN propagating as in those two.
  static constexpr spelling glsl{.integer = "($2 < ($0 < $1 ? $1 : $0) ? $2 : ($0 < $1 ? $1 : $0))",
                                 .any = "((isnan($0) || isnan($1) || isnan($2)) ? $0 + $1 + $2 : "
                                        "$2 < ($0 < $1 ? $1 : $0) ? $2 : ($0 < $1 ? $1 : $0))"};
  static constexpr spelling cuda = glsl;
  static constexpr spelling msl = glsl;
  static constexpr int arity = 3;
  using rule = rules::arithmetic;
  template <class T>
  static T host(T x, T lo, T hi) {
    return minimum::host(maximum::host(x, lo), hi);
  }
  template <class T>
  static constexpr bool simd_for = simd_number<T>;
  template <class B>
  static B simd(const B& x, const B& lo, const B& hi) {
    return minimum::simd(maximum::simd(x, lo), hi);
  }
  // To x inside [lo, hi] (bounds included), else to the bound that was taken.
  struct derivative {
    template <class D, class G, class X, class L, class H>
    static auto vjp(const G& g, const X& x, const L& lo, const H& hi) {
      return D::tuple(D::mask(g, (x >= lo) && (x <= hi)), D::mask(g, (x < lo) && (lo <= hi)),
                      D::mask(g, (x > hi) || (lo > hi)));
    }
  };
};

} // namespace kiln::ops

namespace kiln {
KILN_BINARY_FUNCTION(operator+, ops::add)
KILN_BINARY_FUNCTION(operator-, ops::sub)
KILN_BINARY_FUNCTION(operator*, ops::mul)
KILN_BINARY_FUNCTION(operator/, ops::div)
KILN_BINARY_FUNCTION(operator%, ops::mod)
KILN_UNARY_FUNCTION(operator-, ops::neg)
KILN_UNARY_FUNCTION(abs, ops::abs)
KILN_UNARY_FUNCTION(sign, ops::sign)
KILN_BINARY_FUNCTION(maximum, ops::maximum)
KILN_BINARY_FUNCTION(minimum, ops::minimum)
KILN_TERNARY_FUNCTION(clamp, ops::clamp)
} // namespace kiln
