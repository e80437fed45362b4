#pragma once
// What every reduction file uses: the lazy node a reduction builds, the device parts'
// vocabulary (executor.hpp), and the macro giving a reduction its user-facing function.
//
// A reduction is one struct in one file of this folder (sum.hpp is the smallest):
//   name;
//   host:   acc_t<T>, result<T>, init<T>(), combine(a, v, index), merge(a, b),
//           finish<R>(a, count), has_simd (whether sums of lanes may be taken first);
//   identity: false where an empty reduction has no value (max: a kiln::error);
//   device: accumulator(value, has_f64), carries_index(acc) and second (optional: the
//           state has `ai`, `a2`), device(spelling, dtypes) -> reduction_code;
//   derivative: vjp<D>(g, node) -> the adjoint of the input, g already broadcast back over
//           the folded axes; or `using derivative = zero_gradient;`.
// Reductions built from others (logsumexp, var, norm) are functions of expressions: their
// kernels and gradients are those of their parts.
#include "kiln/eval/assign.hpp"
#include "kiln/ir/lower.hpp"
#include "kiln/ops/arithmetic.hpp"
#include "kiln/ops/compare.hpp"
#include "kiln/ops/math.hpp"
#include "kiln/ops/select.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <span>

namespace kiln {

namespace reductions {

// The host accumulator of a sum: double for floats, i64 for integers and bools.
template <class T>
using wide_t = std::conditional_t<is_floating(dtype_of<T>()), double, std::int64_t>;

// The device accumulator of a sum: double where the device has it, else f32; i64.
inline dtype wide_dtype(dtype value, bool has_f64) {
  if (!is_floating(value)) return dtype::i64;
  return has_f64 ? dtype::f64 : dtype::f32;
}

} // namespace reductions

namespace detail {

// Which dims of an input of rank `rank` a reduction over `over` folds (an axis out of range,
// or one given twice, is an error naming the reduction), and the shape it leaves of `in`.
// Compiled once with the core (kiln/linkage.hpp): the same code for every reduction node.
KILN_CORE_INLINE std::array<bool, max_rank> reduction_mask(const kiln::axes& over, int rank,
                                                           const char* op);
KILN_CORE_INLINE kiln::shape reduced_shape(const kiln::shape& in, const kiln::axes& over,
                                           bool keepdims, const char* op);

// How many run-time parameters R takes (a custom reduction's `params`; 0 for most).
template <class R>
constexpr int param_count_of() {
  if constexpr (requires { R::params; })
    return R::params;
  else
    return 0;
}

// A reduction node's run-time parameters: N doubles, or nothing (no storage) for N = 0.
template <int N>
struct reduce_params {
  std::array<double, N> v{};
  std::span<const double> values() const { return v; }
};
template <>
struct reduce_params<0> {
  std::span<const double> values() const { return {}; }
};

} // namespace detail

template <class R, class E>
struct reduce_node : expression_base<reduce_node<R, E>> {
  using value_type = typename R::template result<value_t<E>>;
  using reduction = R;
  // The result shape is computed, and the axes checked, when the node is built: an axis
  // error is raised at the reduction that causes it. The shape first, from the operands
  // before they are moved in; keepdims in the tail of `over`: no holes (kiln/linkage.hpp).
  kiln::shape out_shape;
  E expr;
  [[no_unique_address]] kiln::axes over;
  bool keepdims;
  [[no_unique_address]] detail::reduce_params<detail::param_count_of<R>()> q;
  reduce_node(E e, kiln::axes a, bool k, std::span<const double> params = {})
      : out_shape(make_shape(e, a, k)), expr(std::move(e)), over(std::move(a)), keepdims(k) {
    constexpr int n = detail::param_count_of<R>();
    if (params.size() != std::size_t(n))
      throw error(R::name, "the reduction takes another number of run-time parameters",
                  std::to_string(params.size()) + " given, " + std::to_string(n) + " declared");
    if constexpr (n > 0) std::copy(params.begin(), params.end(), q.v.begin());
  }
  reduce_node(const reduce_node&) = default;
  reduce_node(reduce_node&&) = default;
  reduce_node& operator=(const reduce_node&) = default;
  reduce_node& operator=(reduce_node&&) = default;
  KILN_STATEMENT ~reduce_node() {} // a call where the node was a temporary
  // The run-time parameters (a custom reduction's), for the evaluators and derivative rules.
  std::span<const double> params() const { return q.values(); }

  // Which input dims are folded (validated against the input's rank).
  std::array<bool, max_rank> mask(int rank) const {
    return detail::reduction_mask(over, rank, R::name);
  }
  const kiln::shape& result_shape() const { return out_shape; }
  // The number of input elements folded into each output.
  std::int64_t count() const {
    const kiln::shape& s = shape_of(expr);
    const auto m = mask(s.size());
    std::int64_t n = 1;
    for (int d = 0; d < s.size(); ++d)
      if (m[d]) n *= s[d];
    return n;
  }

private:
  static kiln::shape make_shape(const E& e, const kiln::axes& a, bool k) {
    detail::require_operand(e, R::name);
    return detail::reduced_shape(shape_of(e), a, k, R::name);
  }
};
template <class R, class E>
struct is_expression_type<reduce_node<R, E>> : std::true_type {};

template <class R, class E>
const kiln::shape& shape_of(const reduce_node<R, E>& n) {
  return n.result_shape();
}
template <class R, class E, class F>
void visit_devices(const reduce_node<R, E>& n, F&& f) {
  visit_devices(n.expr, f);
}

namespace detail {

template <class R>
bool carries_index_of(dtype acc) {
  if constexpr (requires { R::carries_index(acc); })
    return R::carries_index(acc);
  else
    return false;
}

template <class R>
constexpr bool builtin_of() {
  if constexpr (requires { R::builtin; })
    return R::builtin;
  else
    return true;
}

template <class R>
constexpr bool second_of() {
  if constexpr (requires { R::second; })
    return R::second;
  else
    return false;
}

} // namespace detail

// The device parts of reduction R, for executor.hpp's device_reduction.
template <class R>
inline constexpr reduction_info reduction_info_of{
    R::name,    &R::accumulator,         &detail::carries_index_of<R>, detail::second_of<R>(),
    &R::device, detail::builtin_of<R>(), detail::param_count_of<R>(),  detail::tunables_of<R>()};

} // namespace kiln

// fn(x, axes = everything, keepdims = false): the reduction R of expression x.
#define KILN_REDUCTION_FUNCTION(fn, R)                                                             \
  template <class X>                                                                               \
  requires ::kiln::expression<X> KILN_STATEMENT auto fn(X&& x, ::kiln::axes over = {},             \
                                                        bool keepdims = false) {                   \
    return ::kiln::reduce_node<R, std::remove_cvref_t<X>>(std::forward<X>(x), std::move(over),     \
                                                          keepdims);                               \
  }

#if KILN_CORE_DEFINITIONS
#include "kiln/reductions/define_impl.hpp"
#endif
