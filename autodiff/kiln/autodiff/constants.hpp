#pragma once
// Type-level zero and one, and the arithmetic on adjoints that folds them away: an adjoint
// that is zero is not built at all (x * 0 disappears), and one times e is e, so adjoint
// types stay as small as the rules allow. `one<T>` carries its value type so that -1 or
// 1 + e can still be spelled when one meets something other than a product.
#include "kiln/autodiff/gate.hpp"
#include "kiln/ops/arithmetic.hpp"
#include "kiln/ops/compare.hpp"
#include "kiln/ops/math.hpp"
#include "kiln/ops/select.hpp"

#include <boost/hana/tuple.hpp>

namespace kiln::autodiff {

struct zero_t {};
template <class T>
struct one_t {};

template <class X>
inline constexpr bool is_zero = std::is_same_v<std::remove_cvref_t<X>, zero_t>;
template <class X>
inline constexpr bool is_one = false;
template <class T>
inline constexpr bool is_one<one_t<T>> = true;

// The toolkit a derivative rule is written with (passed as the template parameter D, so
// that a rule in the op catalog needs no autodiff header and names ops that its file
// defines later). Products, sums and negations fold zero and one.
struct toolkit {
  static constexpr zero_t zero{};

  template <class... A>
  static auto tuple(A&&... a) {
    return hana::make_tuple(std::forward<A>(a)...);
  }

  template <class T>
  static scalar_expr<T> one_value(one_t<T>) {
    return scalar_expr<T>(T(1));
  }
  template <class G>
  static auto expr(const G& g) {
    if constexpr (is_one<G>)
      return one_value(g);
    else
      return g;
  }

  template <class A, class B>
  static auto mul(const A& a, const B& b) {
    if constexpr (is_zero<A> || is_zero<B>)
      return zero;
    else if constexpr (is_one<A>)
      return b;
    else if constexpr (is_one<B>)
      return a;
    else
      return a * b;
  }
  template <class A, class B>
  static auto add(const A& a, const B& b) {
    if constexpr (is_zero<A>)
      return b;
    else if constexpr (is_zero<B>)
      return a;
    else
      return expr(a) + expr(b);
  }
  template <class A>
  static auto neg(const A& a) {
    if constexpr (is_zero<A>)
      return zero;
    else
      return -expr(a);
  }
  template <class A, class B>
  static auto sub(const A& a, const B& b) {
    return add(a, neg(b));
  }
  // g / b (b an expression).
  template <class A, class B>
  static auto div(const A& a, const B& b) {
    if constexpr (is_zero<A>)
      return zero;
    else
      return expr(a) / b;
  }
  // g where cond holds, else 0 (a selection, so an inf in g elsewhere stays out).
  template <class G, class C>
  static auto mask(const G& g, const C& cond) {
    if constexpr (is_zero<G>)
      return zero;
    else if constexpr (is_one<G>)
      return kiln::cast<typename decltype(one_type(g))::type>(cond);
    else
      return kiln::where(cond, g, value_t<G>(0));
  }
  template <class G, class M>
  static auto gate(const G& g, const M& m) {
    if constexpr (is_zero<G>)
      return zero;
    else
      return make_node<ops::gate>(expr(g), m);
  }
  // The adjoint of cast<To>(x): g back in x's type.
  template <class G, class X>
  static auto cast_like(const G& g, const X&) {
    using F = value_t<X>;
    if constexpr (is_zero<G> || !is_floating(dtype_of<F>()))
      return zero; // an integer operand: piecewise constant
    else if constexpr (is_one<G>)
      return one_t<F>{};
    else if constexpr (std::is_same_v<value_t<G>, F>)
      return g;
    else
      return kiln::cast<F>(g);
  }

  // The catalog's functions, named through D so that a rule may use an op its file
  // defines after the rule.
#define KILN_AD_FN(fn)                                                                             \
  template <class... X>                                                                            \
  static auto fn(const X&... x) {                                                                  \
    return kiln::fn(x...);                                                                         \
  }
  KILN_AD_FN(exp)
  KILN_AD_FN(exp2)
  KILN_AD_FN(log)
  KILN_AD_FN(sqrt)
  KILN_AD_FN(rsqrt)
  KILN_AD_FN(cbrt)
  KILN_AD_FN(sin)
  KILN_AD_FN(cos)
  KILN_AD_FN(tan)
  KILN_AD_FN(sinh)
  KILN_AD_FN(cosh)
  KILN_AD_FN(tanh)
  KILN_AD_FN(sigmoid)
  KILN_AD_FN(pow)
  KILN_AD_FN(trunc)
  KILN_AD_FN(sign)
#undef KILN_AD_FN

private:
  template <class T>
  static std::type_identity<T> one_type(one_t<T>);
};

} // namespace kiln::autodiff
