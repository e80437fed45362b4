#pragma once
// logsumexp: log(sum(exp(x))) without overflow or underflow, in one pass: the state is the
// running maximum m and s = sum(exp(x - m)), rescaled when m grows (the online softmax
// normalizer). -inf for an empty reduction or all -inf; +inf where an element is +inf; NaN
// where one is NaN. Floats accumulate in double (f32 where the device has no f64);
// integers give f64.
#include "kiln/reductions/define.hpp"

namespace kiln {

namespace reductions {

struct logsumexp {
  static constexpr const char* name = "logsumexp";
  struct acc {
    double m = -std::numeric_limits<double>::infinity();
    double s = 0;
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
  // Folds (m2, s2) into (m, s): the larger maximum stays; NaN wins.
  static acc fold(acc a, double m2, double s2) {
    if (m2 != m2 || a.m != a.m) return {std::numeric_limits<double>::quiet_NaN(), 0};
    if (s2 == 0) return a;
    if (a.m < m2) {
      a.s = a.s * std::exp(a.m - m2) + s2; // exp(-inf) = 0: the first value
      a.m = m2;
    } else {
      a.s += a.m == m2 ? s2 : s2 * std::exp(m2 - a.m); // equal infinities: no inf - inf
    }
    return a;
  }
  template <class A, class V>
  static A combine(A a, V v, std::int64_t) {
    const double x = static_cast<double>(compute_t<V>(v));
    if (x == -std::numeric_limits<double>::infinity()) return a;
    return fold(a, x, 1);
  }
  template <class A>
  static A merge(A a, A b) {
    return fold(a, b.m, b.s);
  }
  template <class R, class A>
  static R finish(A a, std::int64_t) {
    if (a.m != a.m) return convert<R>(a.m);
    return convert<R>(a.s == 0 ? -std::numeric_limits<double>::infinity() : a.m + std::log(a.s));
  }
  static constexpr bool has_simd = false;

  static dtype accumulator(dtype, bool has_f64) { return has_f64 ? dtype::f64 : dtype::f32; }
  static constexpr bool second = true; // a: the maximum, a2: the scaled sum
  static reduction_code device(const device_spelling& s, const reduction_dtypes& t) {
    const std::string A = s.type(t.acc), x = s.convert(t.value, t.acc, "v");
    auto exp = [&](const std::string& e) { return s.apply(ir::op_info<ops::exp>, t.acc, e); };
    // As fold(): (m2, s2) into (a, a2).
    auto fold = [&](const std::string& m2, const std::string& s2) {
      return "if (isnan(" + m2 + ") || isnan(a)) { a = " + m2 + " + a; a2 = " + A +
             "(0); }\nelse if (" + s2 + " != " + A + "(0)) {\n  if (a < " + m2 + ") { a2 = a2 * " +
             exp("a - " + m2) + " + " + s2 + "; a = " + m2 + "; }\n  else a2 += a == " + m2 +
             " ? " + s2 + " : " + s2 + " * " + exp(m2 + " - a") + ";\n}";
    };
    reduction_code c;
    c.init = A + "(-1.0 / 0.0)";
    c.init2 = A + "(0)";
    c.combine = "{ const " + A + " x = " + x + ";\nif (!isinf(x) || x > " + A + "(0)) {\n" +
                fold("x", A + "(1)") + "\n} }";
    c.merge = fold("b", "b2");
    c.finish = s.convert(t.acc, t.result,
                         "isnan(a) ? a : a2 == " + A + "(0) ? " + A + "(-1.0 / 0.0) : a + " +
                             s.apply(ir::op_info<ops::log>, t.acc, "a2"));
    return c;
  }

  // d logsumexp(x) = exp(x - logsumexp(x)) dx: the softmax.
  struct derivative {
    template <class D, class G, class N>
    static auto vjp(const G& g, const N& n) {
      return D::mul(g,
                    exp(n.expr - reduce_node<logsumexp, decltype(n.expr)>(n.expr, n.over, true)));
    }
  };
};

} // namespace reductions

KILN_REDUCTION_FUNCTION(logsumexp, reductions::logsumexp)

} // namespace kiln
