#pragma once
// where(cond, a, b), the float predicates isnan/isinf/isfinite, and cast<T>.
#include "kiln/ops/define.hpp"
#include "kiln/ops/rules.hpp"

namespace kiln::ops {

struct where : op_base {
  static constexpr const char* name = "where";
  static constexpr spelling glsl{.any = "($0 ? $1 : $2)"};
  static constexpr spelling cuda = glsl;
  static constexpr spelling msl = glsl;
  static constexpr int arity = 3;
  using rule = rules::select;
  template <class T>
  static T host(bool c, T a, T b) {
    return c ? a : b;
  }
  // The adjoint goes to the branch taken; the condition is not differentiated.
  struct derivative {
    template <class D, class G, class C, class A, class B>
    static auto vjp(const G& g, const C& c, const A&, const B&) {
      return D::tuple(D::zero, D::mask(g, c), D::mask(g, !c));
    }
  };
};

#define KILN_PREDICATE(Name, float_expr, int_value, glsl_float)                                    \
  struct Name : op_base {                                                                          \
    static constexpr const char* name = #Name;                                                     \
    static constexpr spelling glsl{.integer = #int_value, .any = glsl_float};                      \
    static constexpr spelling cuda = glsl; /* CUDA's isnan and isinf take float and double */      \
    static constexpr spelling msl = glsl;                                                          \
    static constexpr int arity = 1;                                                                \
    using rule = rules::predicate;                                                                 \
    template <class T>                                                                             \
    static bool host(T x) {                                                                        \
      if constexpr (std::is_floating_point_v<T>)                                                   \
        return float_expr;                                                                         \
      else                                                                                         \
        return int_value;                                                                          \
    }                                                                                              \
    using derivative = zero_gradient; /* a bool */                                                 \
  };
KILN_PREDICATE(isnan, std::isnan(x), false, "isnan($0)")
KILN_PREDICATE(isinf, std::isinf(x), false, "isinf($0)")
KILN_PREDICATE(isfinite, std::isfinite(x), true, "(!isnan($0) && !isinf($0))")
#undef KILN_PREDICATE

template <element To>
struct cast : op_base {
  static constexpr const char* name = "cast";
  static constexpr spelling glsl{.any = "$0"}; // converted on the way out too
  static constexpr spelling cuda = glsl;
  static constexpr spelling msl = glsl;
  static constexpr int arity = 1;
  using rule = rules::conversion<To>;
  template <class T>
  static T host(T x) {
    return x;
  } // the conversion itself happens on the way out
  // The adjoint converted back to the operand's type (zero through an integer cast: the
  // operand's leaves are then integers, never differentiated).
  struct derivative {
    template <class D, class G, class X>
    static auto vjp(const G& g, const X& x) {
      return D::tuple(D::cast_like(g, x));
    }
  };
};

} // namespace kiln::ops

namespace kiln {
KILN_TERNARY_FUNCTION(where, ops::where)
KILN_UNARY_FUNCTION(isnan, ops::isnan)
KILN_UNARY_FUNCTION(isinf, ops::isinf)
KILN_UNARY_FUNCTION(isfinite, ops::isfinite)

template <element To, class X>
requires expression<X>
auto cast(X&& x) { return make_node<ops::cast<To>>(std::forward<X>(x)); }
} // namespace kiln
