#pragma once
// The planner's side of a reduction on a GPU device (executor.hpp): the typed part. The
// iteration runs over the input's dims reordered as (kept..., reduced...), merged like any
// pass, so element o * count + r is the r-th input of output o; the reduced expression is
// lowered once per specialization and fused into the executor's reduction kernel.
#include "kiln/eval/device_pass.hpp"

namespace kiln::detail {

template <class R, class E>
void device_reduce(const tensor<typename R::template result<value_t<E>>>& out, const E& e,
                   const std::array<bool, max_rank>& mask, std::span<const double> params) {
  using V = value_t<E>;
  const kiln::shape full = shape_of(e);
  const int rank = full.size();
  std::int64_t count = 1;
  std::array<int, max_rank> order{}; // kept dims first, then reduced ones
  int k = 0;
  std::int64_t nout = 1;
  for (int d = 0; d < rank; ++d)
    if (!mask[d]) {
      nout *= full[d];
      order[k++] = d;
    }
  for (int d = 0; d < rank; ++d)
    if (mask[d]) {
      count *= full[d];
      order[k++] = d;
    }
  if (count == 0 && !R::identity && nout > 0)
    throw error(R::name, "reduction over an empty axis has no identity", "shape " + full.str());
  if (nout == 0) return;
  device_executor& ex = executor_of(*out.storage(), R::name);

  const flat_pass<E> flat(e);
  ir::leaf_table lt;
  {
    auto leaves = flat.leaf_span();
    auto scalars = flat.scalar_span();
    lt.add(ir::described<E>, leaves, scalars);
  }
  if constexpr (!is_tensor_v<E>) {
    // A hand-written kernel takes a tensor; a kernel binds a bounded number of buffers.
    if (ex.needs_tensor_input(reduction_info_of<R>, lt.inputs.size())) {
      const tensor<V> tmp(full, out.device());
      assign(tmp, e);
      device_reduce<R>(out, tmp, mask, params);
      return;
    }
  }
  kiln::shape permuted;
  for (int d = 0; d < rank; ++d)
    permuted.push_back(full[order[d]]);
  iteration_space space;
  for (const auto& l : lt.inputs) {
    const layout b = views::broadcast_to(*l.layout, full, R::name);
    operand_strides st{};
    for (int d = 0; d < rank; ++d)
      st[d] = b.strides[order[d]];
    space.strides.push_back(st);
  }
  space.strides.push_back({}); // the output: indexed by o in the kernel, not by strides
  space.merge(permuted);
  space.strides.pop_back();
  const int mrank = space.extents.size();
  const bool strided = is_strided(space.extents, space.strides);
  const bool wide = needs_wide_index(nout * count, lt.inputs, {});

  struct reduced {}; // a reduction's lowering is keyed apart from a pass of the same E
  const lowered_pass& lowered =
      lowerings_of<std::tuple<R, E, reduced>>().find(lt.pattern, strided, mrank, wide, [&] {
        ++lowering_count();
        const dtype value[] = {dtype_of<V>()};
        const ir::expr_description exprs[] = {ir::described<E>};
        return ir::lower(value, lt.pattern, strided, mrank, wide, exprs);
      });
  std::vector<std::uint64_t> bits;
  ex.reduce(device_reduction{reduction_info_of<R>, lowered, lt.inputs, scalar_bits(lt, bits),
                             space.extents, space.strides, count, nout, dtype_of<V>(),
                             dtype_of<typename R::template result<V>>(), *out.storage(),
                             out.layout(), mask, params});
}

} // namespace kiln::detail
