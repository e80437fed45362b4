#pragma once
// all and any: whether every (some) element converts to true.
#include "kiln/reductions/define.hpp"

namespace kiln {

namespace reductions {

template <bool All>
struct boolean {
  static constexpr const char* name = All ? "all" : "any";
  template <class T>
  using acc_t = std::uint8_t; // not bool: accumulators live in a std::vector
  template <class T>
  using result = bool;
  static constexpr bool identity = true;
  template <class T>
  static std::uint8_t init() {
    return All;
  }
  template <class A, class V>
  static A combine(A a, V v, std::int64_t) {
    return All ? (a && convert<bool>(v)) : (a || convert<bool>(v));
  }
  template <class A>
  static A merge(A a, A b) {
    return All ? a && b : a || b;
  }
  template <class R, class A>
  static R finish(A a, std::int64_t) {
    return a;
  }
  static constexpr bool has_simd = false;

  static dtype accumulator(dtype, bool) { return dtype::b8; }
  static reduction_code device(const device_spelling& s, const reduction_dtypes& t) {
    const std::string op = All ? " && " : " || ";
    reduction_code c;
    c.init = All ? "true" : "false";
    c.combine = "a = a" + op + s.convert(t.value, t.acc, "v") + ";";
    c.merge = "a = a" + op + "b;";
    c.finish = s.convert(t.acc, t.result, "a");
    return c;
  }

  using derivative = zero_gradient; // not a number
};

using all = boolean<true>;
using any = boolean<false>;

} // namespace reductions

KILN_REDUCTION_FUNCTION(any, reductions::any)

// kiln::all is both the reduction and the "whole dim" index tag of tensor::operator().
template <class X>
requires expression<X>
auto all_t::operator()(X&& x, kiln::axes over, bool keepdims) const {
  return reduce_node<reductions::all, std::remove_cvref_t<X>>(std::forward<X>(x), std::move(over),
                                                              keepdims);
}

} // namespace kiln
