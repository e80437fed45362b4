#pragma once
// norm<1>, norm<2>, norm<inf_norm>: vector norms of the elements over the reduced axes (as
// torch.linalg.vector_norm; over a matrix's two axes, norm<2> is its Frobenius norm).
// norm<2> neither overflows nor underflows where the norm itself is in range: the state is
// a scale (the largest magnitude so far) and the sum of squares of the elements over it
// (LAPACK's dnrm2 update), in double (f32 where the device has no f64); integers give f64.
// norm<1> is sum(abs(x)) and norm<inf_norm> max(abs(x)), in x's dtype as those are (an
// empty reduction has no infinity norm: a kiln::error, as max's).
#include "kiln/reductions/extremum.hpp"
#include "kiln/reductions/sum.hpp"

namespace kiln {

namespace reductions {

struct norm2 {
  static constexpr const char* name = "norm";
  // On the host the sum of squares is compensated (Neumaier): one thread's part of a long
  // reduction adds millions of inexact (x / scale)^2 terms in sequence.
  struct acc {
    double scale = 0, ssq = 0, c = 0;
    void add(double t) {
      const double y = ssq + t;
      c += std::abs(ssq) >= std::abs(t) ? (ssq - y) + t : (t - y) + ssq;
      ssq = y;
    }
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
    const double x = std::abs(static_cast<double>(compute_t<V>(v)));
    if (x == 0) return a;
    if (a.scale < x) {
      const double r = a.scale / x;
      a.ssq = 1 + (a.ssq + a.c) * r * r;
      a.c = 0;
      a.scale = x;
    } else {
      const double r = x / a.scale; // x == scale == inf: 1, not NaN
      a.add(x == a.scale ? 1 : r * r);
    }
    return a;
  }
  template <class A>
  static A merge(A a, A b) {
    if (a.scale < b.scale) std::swap(a, b);
    if (b.scale == 0 && b.ssq == 0) return a;
    const double r = b.scale / a.scale, q = b.ssq + b.c;
    a.add(b.scale == a.scale ? q : q * r * r);
    return a;
  }
  template <class R, class A>
  static R finish(A a, std::int64_t) {
    return convert<R>(a.scale * std::sqrt(a.ssq + a.c));
  }
  static constexpr bool has_simd = false;

  static dtype accumulator(dtype, bool has_f64) { return has_f64 ? dtype::f64 : dtype::f32; }
  static constexpr bool second = true; // a: the scale, a2: the scaled sum of squares
  static reduction_code device(const device_spelling& s, const reduction_dtypes& t) {
    const std::string A = s.type(t.acc);
    const std::string abs = s.apply(ir::op_info<ops::abs>, t.acc, s.convert(t.value, t.acc, "v"));
    reduction_code c;
    c.init = A + "(0)";
    c.init2 = A + "(0)";
    c.combine = "{ const " + A + " x = " + abs + ";\n  if (x != " + A +
                "(0)) {\n    if (a < x) { const " + A + " q = a / x; a2 = " + A +
                "(1) + a2 * q * q; a = x; }\n    else { const " + A +
                " q = x / a; a2 += x == a ? " + A + "(1) : q * q; }\n  } }";
    c.merge = "{ " + A + " s = b, q2 = b2;\n  if (a < s) { const " + A +
              " t = a; a = s; s = t; const " + A + " u = a2; a2 = q2; q2 = u; }\n  if (s != " + A +
              "(0) || q2 != " + A + "(0)) { const " + A +
              " q = s / a; a2 += s == a ? q2 : q2 * q * q; } }";
    c.finish = s.convert(t.acc, t.result, "a * " + s.apply(ir::op_info<ops::sqrt>, t.acc, "a2"));
    return c;
  }

  // d |x|_2 = x / |x|_2 dx; 0 where the norm is 0 (a subgradient, as torch's).
  struct derivative {
    template <class D, class G, class N>
    static auto vjp(const G& g, const N& n) {
      using F = float_of_t<value_t<decltype(n.expr)>>;
      const auto y = reduce_node<norm2, decltype(n.expr)>(n.expr, n.over, true);
      return D::mul(g, where(y != F(0), n.expr / y, F(0)));
    }
  };
};

} // namespace reductions

// The infinity norm's order, for norm<inf_norm>.
inline constexpr int inf_norm = -1;

template <int Ord = 2, class X>
requires expression<X>
auto norm(X&& x, kiln::axes over = {}, bool keepdims = false) {
  static_assert(Ord == 1 || Ord == 2 || Ord == inf_norm,
                "kiln: norm<Ord> takes Ord 1, 2 or kiln::inf_norm");
  if constexpr (Ord == 1)
    return sum(abs(std::forward<X>(x)), std::move(over), keepdims);
  else if constexpr (Ord == 2)
    return reduce_node<reductions::norm2, std::remove_cvref_t<X>>(std::forward<X>(x),
                                                                  std::move(over), keepdims);
  else
    return max(abs(std::forward<X>(x)), std::move(over), keepdims);
}

} // namespace kiln
