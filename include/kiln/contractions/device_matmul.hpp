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
#include "kiln/contractions/product_step.hpp"
#include "kiln/reduce.hpp"

#include <atomic>

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

// A product split along K (split-K): the partial sums of its parts, (parts, batch..., m, n) in
// the accumulator's dtype, for the caller to sum.
struct contract_split {
  std::shared_ptr<storage> partial;
  std::int64_t parts = 0;
};

// The untyped part: the product of contraction `s` whose left operand (shape `left`, read in
// form fl) and right operand are the expressions described by el and er (their leaves and
// scalars one after the other in `leaves`, `scalars`), in accumulator dtype `acc`, stored
// as dtype `result` contiguously from element `out_offset` of `out` (or, with `epilogue`,
// the outputs it lists). False, having done nothing, where the device declines it. Where
// `split` is given (no epilogue) and K is split (split_k_chunk, with the matmul family's
// `split` for this kernel), each part's product is stored in its slot of `split->partial`
// instead, for the caller to sum; with an epilogue, a product the rule would split is declined
// (the product, its sum, then the epilogue's pass).
KILN_CORE_INLINE bool
run_device_contraction(lowering_table& table, dtype acc, dtype result, const storage& out,
                       std::int64_t out_offset, const contraction& s, const kiln::shape& left,
                       matrix_form fl, const kiln::shape& right, matrix_form fr,
                       const ir::expr_description& el, const ir::expr_description& er,
                       std::span<const flat_leaf> leaves, std::span<const flat_scalar> scalars,
                       const device_epilogue* epilogue = nullptr, contract_split* split = nullptr);

// The products a device's vendor library computed (cuBLAS on CUDA), in this process.
inline std::atomic<std::uint64_t>& device_products_provided() {
  static std::atomic<std::uint64_t> n{0};
  return n;
}

// With blas_use::automatic, a product with a fused epilogue of at least this many
// multiply-adds goes to the provider too, its epilogue then a pass: on an H200 cuBLAS's f32
// product and kiln's pass beat kiln's fused kernel 1.13-2.54x at 4096 x 4096 x 64...4096
// (bench_matmul_device --large, bench/RESULTS.md); smaller products keep the one launch.
inline constexpr std::int64_t provider_fused_least = std::int64_t(1) << 24;

// Split-K: the length of K's parts, or 0 for none, for a product of these extents on a device
// that runs `groups` workgroups at once, cut into `parts` (the matmul family's `split`: 0 for
// the rule, 1 for none). The rule: a K of at least 4096 over fewer output tiles than the
// device runs at once is cut so that the parts fill it. A K past one kernel's loop budget is
// always cut.
inline constexpr std::int64_t split_k_least = 4096, split_k_most = 32768;
// The output tiles the rule counts: of the default 64 x 64 tile.
inline std::int64_t split_k_tiles(std::int64_t batch, std::int64_t m, std::int64_t n) {
  return batch * ((m + 63) / 64) * ((n + 63) / 64);
}
KILN_CORE_INLINE std::int64_t split_k_chunk(std::int64_t parts, std::int64_t batch, std::int64_t m,
                                            std::int64_t n, std::int64_t k, std::int64_t groups);

// The product by the device's contraction kernel, or false. With `epilogue` (its lowerings
// kept in `table`), the outputs it lists instead of the product.
template <class R, class A, class B>
bool device_contract(const tensor<R>& out, const A& a, const B& b, const contraction& c,
                     const device_epilogue* epilogue = nullptr, lowering_table* table = nullptr) {
  if (epilogue != nullptr && recording_now() != nullptr) // (plans run products unfused)
    throw error("plan", "internal: a device product fused with its consumer while capturing",
                "matmul of result shape " + out.shape().str());
  if constexpr (!plain_tree<A> || !plain_tree<B>) {
    return false;
  } else {
    using Acc = matmul_acc_t<R>;
    // A result stored transposed is the product of the operands' transposes, swapped.
    const contraction s = c.out_t ? swapped(c) : c;
    contract_split split;
    auto run = [&](const auto& l, matrix_form fl, const auto& r, matrix_form fr) {
      const auto el = kiln::cast<Acc>(l);
      const auto er = kiln::cast<Acc>(r);
      using EL = std::remove_cvref_t<decltype(el)>;
      using ER = std::remove_cvref_t<decltype(er)>;
      struct contracted {}; // keyed apart from a pass of the same expressions
      const flat_pass<EL, ER> flat(el, er);
      return run_device_contraction(table ? *table : lowerings_of<std::tuple<contracted, EL, ER>>(),
                                    dtype_of<Acc>(), dtype_of<R>(), *out.storage(), out.offset(), s,
                                    shape_of(l), fl, shape_of(r), fr, ir::described<EL>,
                                    ir::described<ER>, flat.leaf_span(), flat.scalar_span(),
                                    epilogue, epilogue ? nullptr : &split);
    };
    if (!(c.out_t ? run(b, s.fa, a, s.fb) : run(a, s.fa, b, s.fb))) return false;
    if (split.partial) { // split-K: the parts' sum (the fused reduction) into out
      kiln::shape mn = s.batch;
      mn.push_back(s.m);
      mn.push_back(s.n);
      kiln::shape parts = mn;
      parts.insert(0, split.parts);
      const tensor<Acc> partial(split.partial, layout::contiguous(parts));
      assign(tensor<R>(out.storage(), layout::contiguous(mn, out.offset())),
             kiln::cast<R>(kiln::sum(partial, kiln::axes(0))));
    }
    return true;
  }
}

template <class R, class A, class B>
void device_matmul_run(const tensor<R>& out, const A& a, const B& b, const contraction& c);

// A device product in a captured plan (product_step.hpp): a device step, its launches
// recorded where they can be.
template <class R, class A, class B>
struct device_product_replay : product_operands<R, A, B> {
  static void run(void* p) {
    auto& d = *static_cast<device_product_replay*>(p);
    d.refresh();
    device_matmul_run(d.out, d.a, d.b, d.c);
  }
  static void drop(void* p) { delete static_cast<device_product_replay*>(p); }
  static bool leaves(void* p, std::vector<const storage*>& bound, ir::leaf_table&) {
    auto& d = *static_cast<device_product_replay*>(p);
    const flat_pass<A, B> flat(d.a, d.b);
    bound.assign(1, d.out.storage().get());
    for (const flat_leaf& l : flat.leaf_span())
      bound.push_back(l.storage);
    bool parameters = false;
    for (const flat_scalar& x : flat.scalar_span())
      parameters = parameters || x.source != nullptr;
    return parameters;
  }
};

template <class R, class A, class B>
void device_matmul(const tensor<R>& out, const A& a, const B& b, const contraction& c) {
  if (plan_recording* r = recording_now()) [[unlikely]] {
    using D = device_product_replay<R, A, B>;
    return record_device_step(*r, adopted_product<D>(*r, out, a, b, c),
                              {&D::run, &D::drop, &D::leaves, false});
  }
  device_matmul_run(out, a, b, c);
}

template <class R, class A, class B>
void device_matmul_run(const tensor<R>& out, const A& a, const B& b, const contraction& c) {
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
