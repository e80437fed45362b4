#pragma once
// A product on a GPU device. Both operands are read over the dims (batch..., m, n, k), each
// with stride 0 along the dim it does not have; there the device's contraction kernel
// (kernels/contract_template.hpp, through executor.hpp's contract) computes it with both
// operand expressions fused into its tile loads — a cast, a transposed view, relu(x) * mask
// cost no temporary. Where the device declines the shape (a matrix-vector product, a K too
// long for one kernel's loops), the product is the device's fused reduction over broadcast
// views of the operands, evaluated into tensors first: with the reductions' bounded loops,
// edges of any size and accumulators. The typed part lists the leaves; the rest is compiled
// once (kiln/linkage.hpp).
#include "kiln/contractions/form.hpp"
#include "kiln/reduce.hpp"

namespace kiln::detail {

// The layout of operand t (form f; `left`: it is A) over the dims (batch..., m, n, k).
inline layout product_view(const layout& l, const contraction& c, matrix_form f, bool left) {
  const int nb = c.batch.size();
  const operand_walk w = strides_of(l.shape, l.strides.data(), f, nb);
  layout v;
  v.offset = l.offset;
  for (int i = 0; i < nb; ++i) {
    v.shape.push_back(c.batch[i]);
    v.strides.push_back(w.batch[i]);
  }
  v.shape.push_back(c.m);
  v.strides.push_back(left ? w.rows : 0);
  v.shape.push_back(c.n);
  v.strides.push_back(left ? 0 : w.cols);
  v.shape.push_back(c.k);
  v.strides.push_back(left ? w.cols : w.rows);
  return v;
}

// What the outputs of an epilogue are: expressions of the product's shape (batch..., m, n)
// that read the product's own tensor (`out`, never read or written itself) as a leaf, stored
// in `targets` instead of the product.
struct device_epilogue {
  std::span<const ir::expr_description> exprs;
  std::span<const flat_leaf> leaves; // the expressions', one after another
  std::span<const flat_scalar> scalars;
  std::span<const flat_leaf> targets; // storage, layout (of the product's shape), dtype
};

// The untyped part: the product of contraction `s` whose left operand (shape `left`, read in
// form fl) and right operand are the expressions described by el and er (their leaves and
// scalars one after the other in `leaves`, `scalars`), in accumulator dtype `acc`, stored
// as dtype `result` contiguously from element `out_offset` of `out` (or, with `epilogue`,
// the outputs it lists). False, having done nothing, where the device declines it. With a
// `chunk` (split-K, no epilogue), K is cut into parts of that length (the last shorter) and
// each part's product, in the accumulator's dtype, is stored in its slot of `out`, a buffer of
// (parts, batch..., m, n), for the caller to sum.
KILN_CORE_INLINE bool
run_device_contraction(lowering_table& table, dtype acc, dtype result, const storage& out,
                       std::int64_t out_offset, const contraction& s, const kiln::shape& left,
                       matrix_form fl, const kiln::shape& right, matrix_form fr,
                       const ir::expr_description& el, const ir::expr_description& er,
                       std::span<const flat_leaf> leaves, std::span<const flat_scalar> scalars,
                       const device_epilogue* epilogue = nullptr, std::int64_t chunk = 0);

// Split-K: the length of K's parts for a product of these extents on a device that runs
// `groups` workgroups at once, or 0 for none. A long K over fewer output tiles than that is
// cut so that the parts fill the device (then summed by the fused reduction); a K past one
// kernel's loop budget is always cut.
inline constexpr std::int64_t split_k_least = 4096, split_k_most = 32768;
KILN_CORE_INLINE std::int64_t split_k_chunk(std::int64_t batch, std::int64_t m, std::int64_t n,
                                            std::int64_t k, std::int64_t groups);

// The product by the device's contraction kernel, or false. With `epilogue` (its lowerings
// kept in `table`), the outputs it lists instead of the product.
template <class R, class A, class B>
bool device_contract(const tensor<R>& out, const A& a, const B& b, const contraction& c,
                     const device_epilogue* epilogue = nullptr, lowering_table* table = nullptr) {
  if constexpr (!plain_tree<A> || !plain_tree<B>) {
    return false;
  } else {
    using Acc = matmul_acc_t<R>;
    // A result stored transposed is the product of the operands' transposes, swapped.
    const contraction s = c.out_t ? swapped(c) : c;
    auto run = [&](const auto& l, matrix_form fl, const auto& r, matrix_form fr,
                   const storage& into, std::int64_t into_offset, std::int64_t chunk) {
      const auto el = kiln::cast<Acc>(l);
      const auto er = kiln::cast<Acc>(r);
      using EL = std::remove_cvref_t<decltype(el)>;
      using ER = std::remove_cvref_t<decltype(er)>;
      struct contracted {}; // keyed apart from a pass of the same expressions
      const flat_pass<EL, ER> flat(el, er);
      return run_device_contraction(
          table ? *table : lowerings_of<std::tuple<contracted, EL, ER>>(), dtype_of<Acc>(),
          chunk > 0 ? dtype_of<Acc>() : dtype_of<R>(), into, into_offset, s, shape_of(l), fl,
          shape_of(r), fr, ir::described<EL>, ir::described<ER>, flat.leaf_span(),
          flat.scalar_span(), epilogue, chunk);
    };
    auto run_into = [&](const storage& into, std::int64_t into_offset, std::int64_t chunk) {
      return c.out_t ? run(b, s.fa, a, s.fb, into, into_offset, chunk)
                     : run(a, s.fa, b, s.fb, into, into_offset, chunk);
    };
    // A product split along K is not fused: its parts, their sum, then the epilogue's pass.
    const std::int64_t chunk = split_k_chunk(s.batch_count(), s.m, s.n, s.k,
                                             executor_of(*out.storage(), "matmul").concurrent_groups());
    if (epilogue != nullptr && chunk > 0) return false;
    if (epilogue == nullptr) {
      if (chunk > 0) {
        // Split-K: the parts' products, then their sum (the fused reduction) into out.
        kiln::shape mn = s.batch;
        mn.push_back(s.m);
        mn.push_back(s.n);
        kiln::shape parts = mn;
        parts.insert(0, (s.k + chunk - 1) / chunk);
        const tensor<Acc> partial(parts, out.device());
        if (run_into(*partial.storage(), partial.offset(), chunk)) {
          assign(tensor<R>(out.storage(), layout::contiguous(mn, out.offset())),
                 kiln::cast<R>(kiln::sum(partial, kiln::axes(0))));
          return true;
        }
      }
    }
    return run_into(*out.storage(), out.offset(), 0);
  }
}

template <class R, class A, class B>
void device_matmul(const tensor<R>& out, const A& a, const B& b, const contraction& c) {
  if (device_contract(out, a, b, c)) return;
  using Acc = matmul_acc_t<R>;
  const tensor<value_t<A>> ta = evaluate(a);
  const tensor<value_t<B>> tb = evaluate(b);
  // A result stored transposed is the product of the operands' transposes, swapped.
  const contraction s = c.out_t ? swapped(c) : c;
  const tensor<value_t<A>> va(ta.storage(),
                              product_view(ta.layout(), s, c.out_t ? s.fb : s.fa, !c.out_t));
  const tensor<value_t<B>> vb(tb.storage(),
                              product_view(tb.layout(), s, c.out_t ? s.fa : s.fb, c.out_t));
  kiln::shape mn = s.batch;
  mn.push_back(s.m);
  mn.push_back(s.n);
  const tensor<R> o(out.storage(), layout::contiguous(mn, out.offset()));
  assign(o, kiln::cast<R>(kiln::sum(kiln::cast<Acc>(va) * kiln::cast<Acc>(vb), kiln::axes(-1))));
}

} // namespace kiln::detail

#if KILN_CORE_DEFINITIONS
#include "kiln/contractions/device_matmul_impl.hpp"
#endif
