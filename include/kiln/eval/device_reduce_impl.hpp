#pragma once
// The untyped part of a reduction on a device (declared in device_reduce.hpp; see
// kiln/linkage.hpp for where it is compiled).
#include "kiln/eval/device_reduce.hpp"

#include <vector>

namespace kiln::detail {

KILN_CORE_INLINE bool
run_device_reduction(lowering_table& table, const reduction_info& info, bool identity, dtype value,
                     dtype result, const storage& out, const layout& out_layout,
                     const kiln::shape& full, const std::array<bool, max_rank>& mask,
                     const ir::expr_description& expr, std::span<const flat_leaf> leaves,
                     std::span<const flat_scalar> scalars, std::span<const double> params,
                     bool tensor_input) {
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
  if (count == 0 && !identity && nout > 0)
    throw error(info.name, "reduction over an empty axis has no identity", "shape " + full.str());
  if (nout == 0) return true;
  device_executor& ex = executor_of(out, info.name);

  ir::leaf_table lt;
  lt.add(expr, leaves, scalars);
  // A hand-written kernel takes a tensor; a kernel binds a bounded number of buffers.
  if (!tensor_input && ex.needs_tensor_input(info, lt.inputs.size())) return false;

  kiln::shape permuted;
  for (int d = 0; d < rank; ++d)
    permuted.push_back(full[order[d]]);
  iteration_space space;
  for (const auto& l : lt.inputs) {
    const layout b = views::broadcast_to(*l.layout, full, info.name);
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

  const lowered_pass& lowered = table.find(lt.pattern, strided, mrank, wide, [&] {
    ++lowering_count();
    const dtype values[] = {value};
    const ir::expr_description exprs[] = {expr};
    return ir::lower(values, lt.pattern, strided, mrank, wide, exprs);
  });
  std::vector<std::uint64_t> bits;
  ex.reduce(device_reduction{info, lowered, lt.inputs, scalar_bits(lt, bits), space.extents,
                             space.strides, count, nout, value, result, out, out_layout, mask,
                             params});
  return true;
}

} // namespace kiln::detail
