#pragma once
// The user-facing transforms:
//   auto [dx, dy] = kiln::grad(f, x, y);    f of rank 0
//   auto [dx] = kiln::vjp(e, seed, x);      seed of e's shape
//   auto t = kiln::jvp(e, {x, dx});         forward mode: e's change along dx
// Each result is an unevaluated expression of its tensor's shape; evaluate it like any
// other (`tensor<double> g = dx;`, or kiln::eval(y = e, gx = dx) for one fused pass).
// A tensor is found by identity: a leaf over the same storage with the same layout is
// that tensor (fused); a view of its storage, or a broadcast use, is summed back into
// its shape; anything else contributes nothing, and a tensor f does not use gets zeros.
#include "kiln/autodiff/adjoint.hpp"

#include <boost/hana/range.hpp>

#include <tuple>

namespace kiln {

namespace autodiff {
template <class F>
inline constexpr bool is_reduction = false;
template <class R, class E>
inline constexpr bool is_reduction<reduce_node<R, E>> = true;

template <class X>
constexpr void check_wrt() {
  static_assert(is_tensor_v<std::remove_cvref_t<X>>,
                "kiln: differentiate with respect to tensors (kiln::tensor<T>), not expressions "
                "or scalars");
  static_assert(is_floating(dtype_of<value_t<X>>()),
                "kiln: differentiate with respect to floating-point tensors only");
}
template <class X>
void check_wrt_value(const X& x, const char* op) {
  if (x.empty()) throw error(op, "a tensor to differentiate with respect to is empty", "");
}
} // namespace autodiff

template <class F, class... X>
requires expression<F> KILN_STATEMENT auto grad(const F& f, const X&... x) {
  (autodiff::check_wrt<X>(), ...);
  static_assert(sizeof...(X) >= 1, "kiln: grad needs at least one tensor to differentiate by");
  static_assert(is_floating(dtype_of<value_t<F>>()),
                "kiln: grad differentiates a floating-point expression");
  (autodiff::check_wrt_value(x, "grad"), ...);
  const kiln::shape s = shape_of(f);
  if (s.size() != 0)
    throw error("grad", "the expression is not a scalar (rank 0)",
                "shape " + s.str() + "; reduce it (sum, mean) or use vjp with a seed");
  const auto recs = [&] {
    // f = sum(e) (or another reduction): its adjoint is one of e's shape, kept type-level.
    if constexpr (autodiff::is_reduction<F>) {
      const auto a = autodiff::reduction_adjoint<true>(f, autodiff::one_t<value_t<F>>{}, s);
      if constexpr (autodiff::is_zero<decltype(a)>)
        return autodiff::no_records{};
      else
        return autodiff::backprop(f.expr, a, shape_of(f.expr), true);
    } else {
      return autodiff::backprop(f, autodiff::one_t<value_t<F>>{}, s, true);
    }
  }();
  return std::make_tuple(autodiff::collect(recs, x)...);
}

template <class E, class S, class... X>
requires(expression<E>&& expression<S>) KILN_STATEMENT
    auto vjp(const E& e, const S& seed, const X&... x) {
  (autodiff::check_wrt<X>(), ...);
  static_assert(sizeof...(X) >= 1, "kiln: vjp needs at least one tensor to differentiate by");
  (autodiff::check_wrt_value(x, "vjp"), ...);
  const kiln::shape s = shape_of(e), ss = shape_of(seed);
  kiln::shape b = s;
  if (!broadcast_into(b, ss) || b != s)
    throw error("vjp", "the seed does not have the expression's shape",
                "seed shape " + ss.str() + " for an expression of shape " + s.str());
  const auto recs = autodiff::backprop(e, seed, s, true);
  return std::make_tuple(autodiff::collect(recs, x)...);
}

// A tangent for jvp: the direction dx (x's shape) in which x moves.
template <element T>
struct tangent {
  tensor<T> x;
  tensor<T> dx;
};

// Forward mode, kiln::jvp(e, {x, dx}, {y, dy}): the derivative of e (e's shape) when x
// moves by dx and y by dy. Written as the transpose of vjp: vjp(e, u, x) is linear in the
// seed u, so the gradient in u of sum(vjp(e, u, x) * dx) is J dx, whatever u holds. The
// result needs no value of u; u is a zero tensor of e's shape that only names the seed.
template <class E, class... T>
KILN_STATEMENT auto jvp_impl(const E& e, const tangent<T>&... t) {
  (autodiff::check_wrt_value(t.x, "jvp"), ...);
  auto check_shape = [](const auto& p) {
    if (p.dx.empty() || p.dx.shape() != p.x.shape())
      throw error("jvp", "a tangent does not have its tensor's shape",
                  "tensor shape " + p.x.shape().str() + ", tangent shape " +
                      (p.dx.empty() ? std::string("(empty)") : p.dx.shape().str()));
  };
  (check_shape(t), ...);
  using V = value_t<E>;
  tensor<V> u(shape_of(e), detail::device_of(e));
  u = V(0);
  const auto g = vjp(e, u, t.x...);
  const auto dot =
      hana::unpack(hana::make_range(hana::size_c<0>, hana::size_c<sizeof...(T)>), [&](auto... i) {
        const auto dxs = std::make_tuple(t.dx...);
        return (kiln::sum(std::get<i>(g) * std::get<i>(dxs)) + ...);
      });
  return std::get<0>(grad(dot, u));
}

template <class E>
requires expression<E>
auto jvp(const E& e, const tangent<value_t<E>>& a) { return jvp_impl(e, a); }
template <class E>
requires expression<E>
auto jvp(const E& e, const tangent<value_t<E>>& a, const tangent<value_t<E>>& b) {
  return jvp_impl(e, a, b);
}
template <class E>
requires expression<E>
auto jvp(const E& e, const tangent<value_t<E>>& a, const tangent<value_t<E>>& b,
         const tangent<value_t<E>>& c) {
  return jvp_impl(e, a, b, c);
}

} // namespace kiln
