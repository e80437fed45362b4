#pragma once
// The user-facing transforms:
//   auto [dx, dy] = kiln::grad(f, x, y);    f of rank 0
//   auto [dx] = kiln::vjp(e, seed, x);      seed of e's shape
// Each result is an unevaluated expression of its tensor's shape; evaluate it like any
// other (`tensor<double> g = dx;`, or kiln::eval(y = e, gx = dx) for one fused pass).
// A tensor is found by identity: a leaf over the same storage with the same layout is
// that tensor (fused); a view of its storage, or a broadcast use, is summed back into
// its shape; anything else contributes nothing, and a tensor f does not use gets zeros.
#include "kiln/autodiff/adjoint.hpp"

#include <tuple>

namespace kiln {

namespace autodiff {
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
requires expression<F>
auto grad(const F& f, const X&... x) {
  (autodiff::check_wrt<X>(), ...);
  static_assert(sizeof...(X) >= 1, "kiln: grad needs at least one tensor to differentiate by");
  static_assert(is_floating(dtype_of<value_t<F>>()),
                "kiln: grad differentiates a floating-point expression");
  (autodiff::check_wrt_value(x, "grad"), ...);
  const kiln::shape s = shape_of(f);
  if (s.size() != 0)
    throw error("grad", "the expression is not a scalar (rank 0)",
                "shape " + s.str() + "; reduce it (sum, mean) or use vjp with a seed");
  const auto recs = autodiff::backprop(f, autodiff::one_t<value_t<F>>{}, s, true);
  return std::make_tuple(autodiff::collect(recs, x)...);
}

template <class E, class S, class... X>
requires(expression<E>&& expression<S>) auto vjp(const E& e, const S& seed, const X&... x) {
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

} // namespace kiln
