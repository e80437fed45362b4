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
                       std::span<const flat_leaf> leaves, std::span<const flat_scalar> scalars,
                       const device_epilogue* epilogue) {
  const int nb = s.batch.size();
  if (nb + 3 > max_rank) return false;
  // An epilogue's outputs have the product's (batch..., m, n): no inserted dim, not transposed.
  if (epilogue && (s.out_t || !has_rows(s.fa) || !has_cols(s.fb))) return false;
  device_executor& ex = executor_of(out, "matmul");
  // Each leaf's layout over (batch..., m, n, k): broadcast to its operand's shape, then read
  // as that operand. (Copies: a leaf both operands read is two inputs with their own strides.)
  std::vector<layout> views;
  views.reserve(leaves.size() +
                (epilogue ? epilogue->leaves.size() + epilogue->targets.size() : 0));
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
  kiln::shape extents = s.batch;
  extents.push_back(s.m);
  extents.push_back(s.n);
  extents.push_back(s.k);
  const int rank = extents.size();
  // A layout of the product's shape over (batch..., m, n, k): stride 0 along k.
  auto over_k = [&](const layout& l) {
    layout v = views::broadcast_to(l, s.out, "matmul");
    v.shape.push_back(s.k);
    v.strides.push_back(0);
    return v;
  };
  std::vector<flat_leaf> outer;
  if (epilogue) {
    outer.assign(epilogue->leaves.begin(), epilogue->leaves.end());
    for (flat_leaf& leaf : outer) {
      views.push_back(over_k(*leaf.layout));
      leaf.layout = &views.back();
    }
  }
  ir::leaf_table lt;
  std::span<const flat_leaf> lv(mapped);
  lt.add(el, lv, scalars);
  lt.add(er, lv, scalars);
  std::vector<dtype> values{acc, acc};
  std::vector<ir::expr_description> exprs{el, er};
  std::vector<const storage*> targets{&out};
  std::vector<std::int64_t> target_offsets{out_offset};
  std::vector<operand_strides> target_strides(1);
  {
    // Without an epilogue: the product, contiguous.
    std::int64_t st = 1;
    for (int d = rank - 1; d-- > 0;) {
      target_strides[0][d] = st;
      st *= extents[d];
    }
  }
  int product = -1;
  if (epilogue) {
    std::span<const flat_leaf> ov(outer);
    auto os = epilogue->scalars;
    for (const auto& e : epilogue->exprs)
      lt.add(e, ov, os);
    for (std::size_t i = 0; i < lt.inputs.size(); ++i)
      if (lt.inputs[i].storage == &out) product = static_cast<int>(i);
    targets.clear();
    target_offsets.clear();
    target_strides.clear();
    for (std::size_t o = 0; o < epilogue->targets.size(); ++o) {
      const flat_leaf& t = epilogue->targets[o];
      const layout v = over_k(*t.layout);
      operand_strides st{};
      for (int d = 0; d < rank; ++d)
        st[d] = v.strides[d];
      targets.push_back(t.storage);
      target_offsets.push_back(v.offset);
      target_strides.push_back(st);
      values.push_back(t.type);
      exprs.push_back(epilogue->exprs[o]);
    }
  }
  std::vector<operand_strides> strides;
  for (const auto& in : lt.inputs) {
    operand_strides st{};
    for (int d = 0; d < rank; ++d)
      st[d] = in.layout->strides[d];
    strides.push_back(st);
  }
  const bool wide = needs_wide_index(s.batch_count() * s.m * s.n, lt.inputs, targets);
  const lowered_pass& lowered = table.find(lt.pattern, true, rank, wide, [&] {
    ++lowering_count();
    return ir::lower(values, lt.pattern, true, rank, wide, exprs);
  });
  std::vector<std::uint64_t> bits;
  return ex.contract(device_contraction{lowered, lt.inputs, scalar_bits(lt, bits), extents, strides,
                                        nb, acc, result, targets, target_offsets, target_strides,
                                        product});
}

} // namespace kiln::detail
