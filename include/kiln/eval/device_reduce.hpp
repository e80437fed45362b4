#pragma once
// The planner's side of a reduction on a GPU device (executor.hpp). The iteration runs over
// the input's dims reordered as (kept..., reduced...), merged like any pass, so element
// o * count + r is the r-th input of output o; the reduced expression is lowered once per
// specialization and fused into the executor's reduction kernel. As for a pass
// (device_pass.hpp), the typed part only lists the expression's leaves and names its
// description; the rest is compiled once per program (kiln/linkage.hpp).
#include "kiln/eval/device_pass.hpp"

namespace kiln::detail {

// Reduction `info` (`identity`: it has one) of the expression described by `expr`, whose
// values have dtype `value` and whose flat leaves and scalars are `leaves` and `scalars`,
// over the dims of `full` marked in `mask`, into `out`; the lowerings of this reduction of
// this expression type are kept in `table`. False, having done nothing, where the device
// runs this reduction only on a tensor and `tensor_input` is false.
KILN_CORE_INLINE bool
run_device_reduction(lowering_table& table, const reduction_info& info, bool identity, dtype value,
                     dtype result, const storage& out, const layout& out_layout,
                     const kiln::shape& full, const std::array<bool, max_rank>& mask,
                     const ir::expr_description& expr, std::span<const flat_leaf> leaves,
                     std::span<const flat_scalar> scalars, std::span<const double> params,
                     bool tensor_input);

template <class R, class E>
void device_reduce(const tensor<typename R::template result<value_t<E>>>& out, const E& e,
                   const std::array<bool, max_rank>& mask, std::span<const double> params) {
  using V = value_t<E>;
  struct reduced {}; // a reduction's lowering is keyed apart from a pass of the same E
  const flat_pass<E> flat(e);
  if (run_device_reduction(lowerings_of<std::tuple<R, E, reduced>>(), reduction_info_of<R>,
                           R::identity, dtype_of<V>(), dtype_of<typename R::template result<V>>(),
                           *out.storage(), out.layout(), shape_of(e), mask, ir::described<E>,
                           flat.leaf_span(), flat.scalar_span(), params, is_tensor_v<E>))
    return;
  if constexpr (!is_tensor_v<E>) {
    // A hand-written kernel takes a tensor: the expression is evaluated into one first.
    const tensor<V> tmp(shape_of(e), out.device());
    assign(tmp, e);
    device_reduce<R>(out, tmp, mask, params);
  }
}

} // namespace kiln::detail

#if KILN_CORE_DEFINITIONS
#include "kiln/eval/device_reduce_impl.hpp"
#endif
