#pragma once
// var and stddev with ddof (numpy's: the divisor is count - ddof), over the sum of squared
// deviations from the mean, accumulated in one pass by Welford's update and merged by
// Chan's formula: stable where the mean is large against the spread (the naive
// sum(x^2) - n mean^2 loses every digit there). Floats accumulate in double (f32 where the
// device has no f64); integers give f64. ddof < 0, or ddof >= count where there is
// something to reduce, is a kiln::error.
#include "kiln/reductions/mean.hpp"

namespace kiln {

namespace reductions {

// The sum of squared deviations from the mean. State: the count n (`ai` on a device), the
// mean (`a`) and the sum of squared deviations (`a2`).
struct sum_sq_dev {
  static constexpr const char* name = "var";
  struct acc {
    std::int64_t n = 0;
    double mean = 0, m2 = 0;
  };
  template <class T>
  using acc_t = acc;
  template <class T>
  using result = float_of_t<T>;
  static constexpr bool identity = true;
  template <class T>
  static acc init() {
    return {};
  }
  template <class A, class V>
  static A combine(A a, V v, std::int64_t) {
    const double x = static_cast<double>(compute_t<V>(v));
    ++a.n;
    const double d = x - a.mean;
    a.mean += d / static_cast<double>(a.n);
    a.m2 += d * (x - a.mean);
    return a;
  }
  template <class A>
  static A merge(A a, A b) {
    if (b.n == 0) return a;
    if (a.n == 0) return b;
    const double na = static_cast<double>(a.n), nb = static_cast<double>(b.n), n = na + nb;
    const double d = b.mean - a.mean;
    a.mean += d * (nb / n);
    a.m2 += b.m2 + d * d * (na * nb / n);
    a.n += b.n;
    return a;
  }
  template <class R, class A>
  static R finish(A a, std::int64_t) {
    return convert<R>(a.m2);
  }
  static constexpr bool has_simd = false;

  static dtype accumulator(dtype, bool has_f64) { return has_f64 ? dtype::f64 : dtype::f32; }
  static bool carries_index(dtype) { return true; } // the count
  static constexpr bool second = true;              // a: the mean, a2: the sum of squares
  static reduction_code device(const device_spelling& s, const reduction_dtypes& t) {
    const std::string A = s.type(t.acc);
    reduction_code c;
    c.init = A + "(0)";
    c.index_init = "0";
    c.init2 = A + "(0)";
    c.combine = "{ const " + A + " x = " + s.convert(t.value, t.acc, "v") +
                ";\n  ai += " + s.index + "(1);\n  const " + A + " d = x - a;\n  a += d / " + A +
                "(ai);\n  a2 += d * (x - a); }";
    c.merge = "if (bi > " + s.index + "(0)) {\n  if (ai == " + s.index +
              "(0)) { a = b; a2 = b2; ai = bi; }\n  else {\n    const " + A + " na = " + A +
              "(ai), nb = " + A +
              "(bi), n = na + nb, d = b - a;\n    a += d * (nb / n);\n"
              "    a2 += b2 + d * d * (na * nb / n);\n    ai += bi;\n  }\n}";
    c.finish = s.convert(t.acc, t.result, "a2");
    return c;
  }

  // d sum((x - mean)^2) = 2 (x - mean) dx (the mean's own change sums to zero)
  struct derivative {
    template <class D, class G, class N>
    static auto vjp(const G& g, const N& n) {
      using F = float_of_t<value_t<decltype(n.expr)>>;
      return D::mul(g, (n.expr - reduce_node<mean, decltype(n.expr)>(n.expr, n.over, true)) *
                           scalar_expr<F>(F(2)));
    }
  };
};

} // namespace reductions

// The divisor of var: count - ddof, checked.
struct ddof {
  int value = 0;
  explicit ddof(int v) : value(v) {}
};

namespace detail {
template <class N>
float_of_t<value_t<N>> var_divisor(const N& n, int ddof, const char* op) {
  const std::int64_t count = n.count();
  if (ddof < 0) throw error(op, "ddof must not be negative", "ddof " + std::to_string(ddof));
  if (count - ddof <= 0 && numel(n.result_shape()) > 0)
    throw error(op, "ddof must be less than the number of elements reduced",
                "ddof " + std::to_string(ddof) + ", " + std::to_string(count) +
                    " elements per output, input shape " + shape_of(n.expr).str());
  return static_cast<float_of_t<value_t<N>>>(count - ddof);
}
} // namespace detail

// var(x, axes, keepdims, ddof(k)) and var(x, axes, ddof(k)); stddev likewise: ddof is a type of its
// own, so that a bare integer never lands in keepdims.
template <class X>
requires expression<X>
auto var(X&& x, kiln::axes over = {}, bool keepdims = false, ddof d = ddof(0)) {
  const reduce_node<reductions::sum_sq_dev, std::remove_cvref_t<X>> n(std::forward<X>(x),
                                                                      std::move(over), keepdims);
  using F = value_t<decltype(n)>;
  const F divisor = detail::var_divisor(n, d.value, "var");
  return n / scalar_expr<F>(divisor);
}
template <class X>
requires expression<X>
auto var(X&& x, kiln::axes over, ddof d) {
  return var(std::forward<X>(x), std::move(over), false, d);
}

template <class X>
requires expression<X>
auto stddev(X&& x, kiln::axes over = {}, bool keepdims = false, ddof d = ddof(0)) {
  return sqrt(var(std::forward<X>(x), std::move(over), keepdims, d));
}
template <class X>
requires expression<X>
auto stddev(X&& x, kiln::axes over, ddof d) {
  return sqrt(var(std::forward<X>(x), std::move(over), false, d));
}

} // namespace kiln
