#pragma once
// max and min: NaN propagates, as numpy's; an empty reduction has no value (kiln::error).
#include "kiln/reductions/sum.hpp"

namespace kiln {

namespace reductions {

template <bool Max>
struct extremum {
  static constexpr const char* name = Max ? "max" : "min";
  template <class T>
  using acc_t = compute_t<T>;
  template <class T>
  using result = T;
  static constexpr bool identity = false;
  template <class T>
  static acc_t<T> init() {
    using C = compute_t<T>;
    if constexpr (std::is_floating_point_v<C>)
      return Max ? -std::numeric_limits<C>::infinity() : std::numeric_limits<C>::infinity();
    else
      return Max ? std::numeric_limits<C>::lowest() : std::numeric_limits<C>::max();
  }
  template <class A, class V>
  static A combine(A a, V v, std::int64_t) {
    const A x = static_cast<A>(v);
    if constexpr (std::is_floating_point_v<A>)
      if (x != x || a != a) return a != a ? a : x;
    return (Max ? a < x : x < a) ? x : a;
  }
  template <class A>
  static A merge(A a, A b) {
    return combine(a, b, 0);
  }
  template <class R, class A>
  static R finish(A a, std::int64_t) {
    return convert<R>(a);
  }
  static constexpr bool has_simd = false;

  // The value's compute type (bools as u8).
  static dtype accumulator(dtype value, bool) {
    return value == dtype::b8 ? dtype::u8 : ir::compute_dtype(value);
  }
  // The statement taking x into `a` where it is the better one (NaN first); shared with
  // argmax/argmin's nan tests.
  static std::string nan_test(const reduction_dtypes& t, const std::string& x) {
    return is_floating(t.acc) ? "isnan(" + x + ")" : "false";
  }
  static std::string better(const std::string& x, const std::string& a) {
    return Max ? a + " < " + x : x + " < " + a;
  }
  static reduction_code device(const device_spelling& s, const reduction_dtypes& t) {
    const std::string A = s.type(t.acc);
    const std::string step = "if (" + nan_test(t, "x") + " || " + nan_test(t, "a") + ") { if (!(" +
                             nan_test(t, "a") + ")) a = x; } else if (" + better("x", "a") +
                             ") a = x;";
    reduction_code c;
    c.init = A + "(" + s.limit(t.acc, Max) + ")";
    c.combine = "{ const " + A + " x = " + s.convert(t.value, t.acc, "v") + "; " + step + " }";
    c.merge = "{ const " + A + " x = b; " + step + " }";
    c.finish = s.convert(t.acc, t.result, "a");
    return c;
  }

  // Ties split the adjoint evenly among the elements that reach the extreme.
  struct derivative {
    template <class D, class G, class N>
    static auto vjp(const G& g, const N& n) {
      using V = value_t<decltype(n.expr)>;
      const auto hit =
          kiln::cast<V>(n.expr == reduce_node<extremum, decltype(n.expr)>(n.expr, n.over, true));
      return D::mul(g, hit / reduce_node<sum, decltype(hit)>(hit, n.over, true));
    }
  };
};

using max = extremum<true>;
using min = extremum<false>;

} // namespace reductions

KILN_REDUCTION_FUNCTION(max, reductions::max)
KILN_REDUCTION_FUNCTION(min, reductions::min)

} // namespace kiln
