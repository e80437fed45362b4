#pragma once
// The untyped part of a product on a device (declared in device_matmul.hpp; see
// kiln/linkage.hpp for where it is compiled).
#include "kiln/contractions/device_matmul.hpp"

#include <vector>

namespace kiln::detail {

KILN_CORE_INLINE bool
run_device_contraction(lowering_table& table, dtype acc, dtype result, const storage& out,
                       std::int64_t out_offset, const contraction& s, const kiln::shape& left,
                       matrix_form fl, const kiln::shape& right, matrix_form fr,
                       const ir::expr_description& el, const ir::expr_description& er,
                       std::span<const flat_leaf> leaves, std::span<const flat_scalar> scalars) {
  const int nb = s.batch.size();
  if (nb + 3 > max_rank) return false;
  device_executor& ex = executor_of(out, "matmul");
  // Each leaf's layout over (batch..., m, n, k): broadcast to its operand's shape, then read
  // as that operand. (Copies: a leaf both operands read is two inputs with their own strides.)
  std::vector<layout> views;
  views.reserve(leaves.size());
  std::vector<flat_leaf> mapped(leaves.begin(), leaves.end());
  std::size_t at = 0;
  auto map = [&](const ir::expr_description& e, const kiln::shape& sh, matrix_form f, bool l) {
    for (const auto& d : e.leaves)
      if (d.code == ir::ir_code::load) {
        flat_leaf& leaf = mapped[at++];
        views.push_back(product_view(views::broadcast_to(*leaf.layout, sh, "matmul"), s, f, l));
        leaf.layout = &views.back();
      }
  };
  map(el, left, fl, true);
  map(er, right, fr, false);
  ir::leaf_table lt;
  std::span<const flat_leaf> lv(mapped);
  lt.add(el, lv, scalars);
  lt.add(er, lv, scalars);
  kiln::shape extents = s.batch;
  extents.push_back(s.m);
  extents.push_back(s.n);
  extents.push_back(s.k);
  const int rank = extents.size();
  std::vector<operand_strides> strides;
  for (const auto& in : lt.inputs) {
    operand_strides st{};
    for (int d = 0; d < rank; ++d)
      st[d] = in.layout->strides[d];
    strides.push_back(st);
  }
  const storage* const targets[] = {&out};
  const bool wide = needs_wide_index(s.batch_count() * s.m * s.n, lt.inputs, targets);
  const lowered_pass& lowered = table.find(lt.pattern, true, rank, wide, [&] {
    ++lowering_count();
    const dtype values[] = {acc, acc};
    const ir::expr_description exprs[] = {el, er};
    return ir::lower(values, lt.pattern, true, rank, wide, exprs);
  });
  std::vector<std::uint64_t> bits;
  return ex.contract(device_contraction{lowered, lt.inputs, scalar_bits(lt, bits), extents, strides,
                                        nb, acc, result, out, out_offset});
}

} // namespace kiln::detail
