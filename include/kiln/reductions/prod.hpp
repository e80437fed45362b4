#pragma once
// prod: floats in double with their binary exponent kept apart (scaled_product), so no
// partial product overflows or underflows; integers in i64, wrapping like numpy.
#include "kiln/reductions/define.hpp"

namespace kiln {

namespace reductions {

// The running value is multiplied by each factor's mantissa and brought back into range
// when it leaves [2^-500, 2^500], so a product whose partial runs leave double's range
// (1e-3 a million times, then 1e3 a million times) is still right, and the same however
// the work is split over threads (a plain double went to 0 in one part and inf in another:
// NaN when merged).
struct scaled_product {
  double m = 1;
  std::int64_t e = 0;
  void rescale() {
    if (m != 0 && std::isfinite(m) && !(std::abs(m) <= 0x1p500 && std::abs(m) >= 0x1p-500)) {
      int k = 0;
      m = std::frexp(m, &k);
      e += k;
    }
  }
  void times(double x) {
    if (x == 0 || !std::isfinite(x)) {
      m *= x; // 0, inf and NaN decide the product as they are
      return;
    }
    int k = 0;
    m *= std::frexp(x, &k);
    e += k;
    rescale();
  }
  double value() const {
    if (m == 0 || !std::isfinite(m)) return m;
    return std::ldexp(m, static_cast<int>(std::clamp<std::int64_t>(e, -4096, 4096)));
  }
};

struct prod {
  static constexpr const char* name = "prod";
  template <class T>
  using acc_t = std::conditional_t<is_floating(dtype_of<T>()), scaled_product, std::int64_t>;
  template <class T>
  using result = std::conditional_t<is_floating(dtype_of<T>()), T, std::int64_t>;
  static constexpr bool identity = true;
  template <class T>
  static acc_t<T> init() {
    if constexpr (is_floating(dtype_of<T>()))
      return {};
    else
      return 1;
  }
  template <class A, class V>
  static A combine(A a, V v, std::int64_t) {
    if constexpr (std::is_integral_v<A>) { // wraps like numpy, never signed-overflow UB
      return static_cast<A>(static_cast<std::uint64_t>(a) *
                            static_cast<std::uint64_t>(static_cast<A>(v)));
    } else {
      a.times(static_cast<double>(v));
      return a;
    }
  }
  template <class A>
  static A merge(A a, A b) {
    if constexpr (std::is_integral_v<A>) {
      return combine(a, b, 0);
    } else {
      a.m *= b.m; // both within [2^-500, 2^500] (or 0, inf, NaN): no overflow here
      a.e += b.e;
      a.rescale();
      return a;
    }
  }
  template <class R, class A>
  static R finish(A a, std::int64_t) {
    if constexpr (std::is_integral_v<A>)
      return convert<R>(a);
    else
      return convert<R>(a.value());
  }
  static constexpr bool has_simd = false;

  static dtype accumulator(dtype value, bool has_f64) { return wide_dtype(value, has_f64); }
  // A float product's exponent travels in `ai`.
  static bool carries_index(dtype acc) { return is_floating(acc); }
  static reduction_code device(const device_spelling& s, const reduction_dtypes& t) {
    const std::string A = s.type(t.acc), I = s.index, v = s.convert(t.value, t.acc, "v");
    reduction_code c;
    c.init = A + "(1)";
    if (!is_floating(t.acc)) {
      c.combine = "a *= " + v + ";";
      c.merge = "a *= b;";
      c.finish = s.convert(t.acc, t.result, "a");
      return c;
    }
    // As scaled_product: `a` is kept within [2^-E, 2^E] (E = 500 in f64, 60 in f32).
    const std::string E = t.acc == dtype::f64 ? "500" : "60";
    const std::string hi = "ldexp(" + A + "(1), " + E + ")", lo = "ldexp(" + A + "(1), -" + E + ")";
    const std::string rescale = "if (a != " + A + "(0) && !isinf(a) && !isnan(a) && (a > " + hi +
                                " || a < -" + hi + " || (a < " + lo + " && a > -" + lo +
                                "))) { int k; a = " + s.frexp("a", "k") + "; ai += " + I + "(k); }";
    c.index_init = "0";
    c.combine = "{ const " + A + " x = " + v + ";\n  if (x == " + A +
                "(0) || isinf(x) || isnan(x)) a *= x;\n  else { int k; a *= " + s.frexp("x", "k") +
                "; ai += " + I + "(k); }\n  " + rescale + " }";
    c.merge = "a *= b; ai += bi;\n" + rescale;
    // ldexp saturates to inf or 0 as it should
    c.finish = s.convert(t.acc, t.result,
                         "ldexp(a, ai > " + I + "(4096) ? 4096 : ai < " + I +
                             "(-4096) ? -4096 : int(ai))");
    return c;
  }

  // d(prod x) = prod / x: exact where no folded element is 0 (a zero gives NaN or inf).
  struct derivative {
    template <class D, class G, class N>
    static auto vjp(const G& g, const N& n) {
      return D::mul(g, reduce_node<prod, decltype(n.expr)>(n.expr, n.over, true) / n.expr);
    }
  };
};

} // namespace reductions

KILN_REDUCTION_FUNCTION(prod, reductions::prod)

} // namespace kiln
