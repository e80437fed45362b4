#pragma once
// argmax and argmin: the first index of the extreme value (a NaN counts as extreme), as a
// flat row-major index over the reduced axes; an empty reduction is a kiln::error.
#include "kiln/reductions/extremum.hpp"

namespace kiln {

namespace reductions {

template <bool Max>
struct arg_extremum {
  static constexpr const char* name = Max ? "argmax" : "argmin";
  template <class T>
  struct acc {
    compute_t<T> value;
    std::int64_t index;
  };
  template <class T>
  using acc_t = acc<T>;
  template <class T>
  using result = std::int64_t;
  static constexpr bool identity = false;
  template <class T>
  static acc_t<T> init() {
    return {extremum<Max>::template init<T>(), -1};
  }
  template <class A, class V>
  static A combine(A a, V v, std::int64_t i) {
    const auto x = static_cast<decltype(a.value)>(v);
    if (a.index < 0) return {x, i};
    if constexpr (std::is_floating_point_v<decltype(x)>) {
      if (a.value != a.value) return a;
      if (x != x) return {x, i};
    }
    return (Max ? a.value < x : x < a.value) ? A{x, i} : a;
  }
  template <class A>
  static A merge(A a, A b) { // a holds the lower indices
    if (b.index < 0) return a;
    if (a.index < 0) return b;
    return combine(a, b.value, b.index);
  }
  template <class R, class A>
  static R finish(A a, std::int64_t) {
    return a.index;
  }
  static constexpr bool has_simd = false;

  static dtype accumulator(dtype value, bool has_f64) {
    return extremum<Max>::accumulator(value, has_f64);
  }
  static bool carries_index(dtype) { return true; } // the index of `a`
  static reduction_code device(const device_spelling& s, const reduction_dtypes& t) {
    const std::string A = s.type(t.acc);
    const std::string nan_a = extremum<Max>::nan_test(t, "a"),
                      nan_x = extremum<Max>::nan_test(t, "x"),
                      better = extremum<Max>::better("x", "a");
    reduction_code c;
    c.init = A + "(" + s.limit(t.acc, Max) + ")";
    c.combine = "{ const " + A + " x = " + s.convert(t.value, t.acc, "v") +
                ";\n  if (ai < 0 || (!(" + nan_a + ") && ((" + nan_x + ") || " + better +
                "))) { a = x; ai = r; } }";
    c.merge = "{ const " + A +
              " x = b; bool take;\n"
              "  if (bi < 0) take = false; else if (ai < 0) take = true;\n"
              "  else if ((" +
              nan_a + ") && (" + nan_x + ")) take = bi < ai;\n  else if (" + nan_a +
              ") take = false; else if (" + nan_x +
              ") take = true;\n"
              "  else if (a == x) take = bi < ai; else take = " +
              better + ";\n  if (take) { a = x; ai = bi; } }";
    c.finish = "int64_t(ai)";
    return c;
  }

  using derivative = zero_gradient; // piecewise constant
};

using argmax = arg_extremum<true>;
using argmin = arg_extremum<false>;

} // namespace reductions

KILN_REDUCTION_FUNCTION(argmax, reductions::argmax)
KILN_REDUCTION_FUNCTION(argmin, reductions::argmin)

} // namespace kiln
