#pragma once
// mean: accumulates in double (f32 where the device has no f64); integers give f64.
#include "kiln/reductions/define.hpp"

namespace kiln {

namespace reductions {

struct mean {
  static constexpr const char* name = "mean";
  template <class T>
  using acc_t = double;
  template <class T>
  using result = float_of_t<T>;
  static constexpr bool identity = true; // the mean of nothing is NaN (0 / 0), as numpy's
  template <class T>
  static double init() {
    return 0;
  }
  template <class A, class V>
  static A combine(A a, V v, std::int64_t) {
    return a + static_cast<double>(v);
  }
  template <class A>
  static A merge(A a, A b) {
    return a + b;
  }
  template <class R, class A>
  static R finish(A a, std::int64_t n) {
    return convert<R>(a / static_cast<double>(n));
  }
  static constexpr bool has_simd = true;

  static dtype accumulator(dtype, bool has_f64) { return has_f64 ? dtype::f64 : dtype::f32; }
  static reduction_code device(const device_spelling& s, const reduction_dtypes& t) {
    const std::string A = s.type(t.acc);
    reduction_code c;
    c.init = A + "(0)";
    c.combine = "a += " + s.convert(t.value, t.acc, "v") + ";";
    c.merge = "a += b;";
    c.finish = s.convert(t.acc, t.result, "(a / " + A + "(" + s.count + "))");
    return c;
  }

  // d(mean x) = dx / count, broadcast back
  struct derivative {
    template <class D, class G, class N>
    static auto vjp(const G& g, const N& n) {
      using F = float_of_t<value_t<decltype(n.expr)>>;
      return D::mul(g, scalar_expr<F>(F(1) / static_cast<F>(n.count())));
    }
  };
};

} // namespace reductions

KILN_REDUCTION_FUNCTION(mean, reductions::mean)

} // namespace kiln
