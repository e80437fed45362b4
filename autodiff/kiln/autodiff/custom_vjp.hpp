#pragma once
// Composites with a derivative of their own (JAX's custom_vjp): kiln::custom_vjp(rule, f,
// args...) is f(args...) for every evaluation, fused as f's expression is, while autodiff
// (grad, vjp, jvp, and the derivatives of those) pushes adjoints through `rule` instead of
// through f's ops. For a numerically stable gradient (softplus, logsumexp), a subgradient
// where f's has none (a norm at 0), or a gradient that is not f's at all (straight-through,
// clipped).
//
// A rule is an object with
//   template <class D, class G, class Out, class... A>
//   auto vjp(const G& g, const Out& out, const A&... args) const;
// returning D::tuple(adjoint of each arg), each a kiln expression in g (the adjoint of the
// composite's value, of its shape), out (the composite itself: differentiating the rule's
// expression again, for second order, uses the rule again) and the args, combined through
// D::mul / D::add ... (g may be a type-level one or zero), or D::zero for an arg that gets
// no gradient. The rule may hold state (a clipping bound): it is copied into the node.
//
// The node is removed by materialize (found by argument-dependent lookup, as autodiff's own
// node kinds are): evaluators and the JIT see f's expression only.
#include "kiln/autodiff/nodes.hpp"

#include <boost/hana/tuple.hpp>
#include <boost/hana/unpack.hpp>

#include <type_traits>
#include <utility>

namespace kiln::autodiff {

template <class Rule, class Fwd, class... Args>
struct custom_vjp_node : expression_base<custom_vjp_node<Rule, Fwd, Args...>> {
  using value_type = value_t<Fwd>;
  Rule rule;
  Fwd fwd;                   // f(args...): what the node evaluates to
  hana::tuple<Args...> args; // what the rule differentiates by
  custom_vjp_node(Rule r, Fwd f, hana::tuple<Args...> a)
      : rule(std::move(r)), fwd(std::move(f)), args(std::move(a)) {}
};

template <class Rule, class Fwd, class... Args>
kiln::shape shape_of(const custom_vjp_node<Rule, Fwd, Args...>& n) {
  return shape_of(n.fwd);
}
template <class Rule, class Fwd, class... Args, class F>
void visit_devices(const custom_vjp_node<Rule, Fwd, Args...>& n, F&& f) {
  visit_devices(n.fwd, f);
}
template <class Rule, class Fwd, class... Args>
decltype(auto) materialize(const custom_vjp_node<Rule, Fwd, Args...>& n) {
  return materialize(n.fwd);
}
template <class Rule, class Fwd, class... Args>
auto materialize_off(const custom_vjp_node<Rule, Fwd, Args...>& n) {
  return materialize_off(n.fwd);
}

// The adjoint g (of shape `full`) of a composite of shape `own`, summed down to `own`, for
// its rule: the composite may be used broadcast (lse(x) of shape {r, 1} in x - lse(x)), and a
// rule that is not elementwise needs the adjoint of its own value. Which case holds is known
// at run time, and both materialize to one type: g itself where the shapes agree (fused,
// nothing computed), else g evaluated and summed (a pass and a reduction of its own).
template <class G>
struct sum_to_node : expression_base<sum_to_node<G>> {
  using value_type = value_t<G>;
  G g;
  kiln::shape full, own;
  sum_to_node(G g_, kiln::shape f, kiln::shape o)
      : g(std::move(g_)), full(std::move(f)), own(std::move(o)) {}
};
template <class G>
kiln::shape shape_of(const sum_to_node<G>& n) {
  return n.own;
}
template <class G, class F>
void visit_devices(const sum_to_node<G>& n, F&& f) {
  visit_devices(n.g, f);
}
// gate(m, m_on) + gate(t, t_on): the one type every case of sum_to_node materializes to.
template <class G, class M, class V = value_t<G>>
auto sum_to_terms(M m, bool m_on, tensor<V> t, bool t_on) {
  using gated = expr_node<ops::gate, M, scalar_expr<V>>;
  using gated_t = expr_node<ops::gate, tensor<V>, scalar_expr<V>>;
  return gated(std::in_place, std::move(m), scalar_expr<V>(V(m_on))) +
         gated_t(std::in_place, std::move(t), scalar_expr<V>(V(t_on)));
}
template <class G>
auto materialize(const sum_to_node<G>& n) {
  using V = value_t<G>;
  using M = std::remove_cvref_t<decltype(materialize(n.g))>;
  const kiln::device dev = detail::device_of(n.g);
  if (n.full == n.own)
    return sum_to_terms<G>(M(detail::materialized_value(n.g)), true, scalar_zero<V>(dev), false);
  layout unused;
  const tensor<V> t = unbroadcast(evaluate_as(n.g, n.full, dev), layout::contiguous(n.own), unused);
  return sum_to_terms<G>(M(materialize_off(n.g)), false, t, true);
}
// (The type materialize gives, computing nothing.)
template <class G>
auto materialize_off(const sum_to_node<G>& n) {
  using M = std::remove_cvref_t<decltype(materialize(n.g))>;
  return sum_to_terms<G>(M(materialize_off(n.g)), false,
                         scalar_zero<value_t<G>>(detail::device_of(n.g)), false);
}

} // namespace kiln::autodiff

namespace kiln {

template <class Rule, class Fwd, class... Args>
struct is_expression_type<autodiff::custom_vjp_node<Rule, Fwd, Args...>> : std::true_type {};
template <class G>
struct is_expression_type<autodiff::sum_to_node<G>> : std::true_type {};

// f(args...), differentiated through `rule` (see the top of this file). f is called once,
// here, with the args; it returns a kiln expression.
template <class Rule, class F, class... A>
auto custom_vjp(Rule rule, F&& f, const A&... args) {
  static_assert(sizeof...(A) >= 1, "kiln: custom_vjp needs at least one argument to "
                                   "differentiate by");
  static_assert((expression<A> && ...), "kiln: custom_vjp's arguments are kiln tensors or "
                                        "expressions (capture constants in f)");
  using Fwd = std::remove_cvref_t<decltype(std::forward<F>(f)(args...))>;
  static_assert(expression<Fwd>, "kiln: custom_vjp's function must return a kiln expression");
  static_assert(is_floating(dtype_of<value_t<Fwd>>()),
                "kiln: custom_vjp's function must compute a floating-point value");
  return autodiff::custom_vjp_node<Rule, Fwd, A...>(std::move(rule), std::forward<F>(f)(args...),
                                                    hana::make_tuple(args...));
}

} // namespace kiln
