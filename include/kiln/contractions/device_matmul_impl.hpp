#pragma once
// The untyped part of a product on a device (declared in device_matmul.hpp; see
// kiln/linkage.hpp for where it is compiled).
#include "kiln/contractions/blas.hpp"
#include "kiln/contractions/device_matmul.hpp"

#include <cstring>
#include <deque>
#include <optional>
#include <vector>

namespace kiln::detail {

namespace provider_detail {

// Whether an operand expression is one tensor as it is, or converted to the accumulator.
inline bool plain(const ir::expr_description& e, dtype acc) {
  const auto& n = e.nodes;
  if (n.size() == 1) return n[0].code == ir::ir_code::load;
  return n.size() == 2 && n[0].code == ir::ir_code::load && n[1].code == ir::ir_code::apply &&
         n[1].op && std::strcmp(n[1].op->name, "cast") == 0 && n[1].type == acc;
}

// One stride that walks the batch dims flattened (row-major), if there is one: the innermost
// dim's that is not 1, which each outer one's must be times the extents inside it.
inline std::optional<std::int64_t> batch_stride(const kiln::shape& batch, const layout& v) {
  std::optional<std::int64_t> s;
  std::int64_t inner = 1;
  for (int d = batch.size(); d-- > 0;) {
    if (batch[d] == 1) continue;
    if (!s) s = v.strides[d];
    if (v.strides[d] != *s * inner) return std::nullopt;
    inner *= batch[d];
  }
  return s.value_or(0);
}

} // namespace provider_detail

// The one target of an epilogue that stores the product as it is (one output, the product's
// own leaf, a contiguous target of the product's shape and dtype that no operand reads), else
// nothing.
inline const flat_leaf* stored_as_is(const device_epilogue* e, const storage& out,
                                     std::int64_t out_offset, dtype result, const contraction& s,
                                     std::span<const flat_leaf> operands) {
  if (!e || e->exprs.size() != 1 || e->targets.size() != 1 || e->leaves.size() != 1) return nullptr;
  const auto& n = e->exprs[0].nodes;
  const flat_leaf &leaf = e->leaves[0], &t = e->targets[0];
  if (n.size() != 1 || n[0].code != ir::ir_code::load || leaf.storage != &out ||
      leaf.layout->shape != s.out || !leaf.layout->is_contiguous() ||
      leaf.layout->offset != out_offset || t.type != result || t.layout->shape != s.out ||
      !t.layout->is_contiguous())
    return nullptr;
  for (const flat_leaf& o : operands)
    if (o.storage == t.storage) return nullptr;
  return &t;
}

// A plain product (each operand one tensor read in place, possibly converted to the
// accumulator; float dtypes the libraries take) as a vendor library's call, else nothing.
// `mapped`: the two operands' leaves with their layouts over (batch..., m, n, k).
inline std::optional<device_gemm> plain_device_gemm(dtype acc, dtype result, const storage& out,
                                                    std::int64_t out_offset, const contraction& s,
                                                    const ir::expr_description& el,
                                                    const ir::expr_description& er,
                                                    std::span<const flat_leaf> mapped) {
  using namespace provider_detail;
  // (An empty product, or one of K = 0, is kiln's: nothing to store, or zeros.)
  if (!plain(el, acc) || !plain(er, acc) || mapped.size() != 2 || s.k == 0 || s.m == 0 ||
      s.n == 0 || s.batch_count() == 0)
    return std::nullopt;
  const dtype t = mapped[0].type;
  if (mapped[1].type != t) return std::nullopt;
  const bool half = t == dtype::f16 || t == dtype::bf16;
  if (!(half || t == dtype::f32 || t == dtype::f64) || acc != (t == dtype::f64 ? t : dtype::f32) ||
      (result != t && result != acc))
    return std::nullopt;
  const int nb = s.batch.size();
  device_gemm g;
  g.type = t;
  g.result = result;
  g.batch = s.batch_count();
  g.m = s.m;
  g.n = s.n;
  g.k = s.k;
  g.c = &out;
  g.c_offset = out_offset;
  // A over (batch..., m, n, k) reads (m, k); B reads (k, n).
  auto take = [&](const flat_leaf& f, std::int64_t rows, std::int64_t cols, int rd, int cd,
                  device_gemm::operand& o) {
    const layout& v = *f.layout;
    const blas_matrix bm = blas_view(rows, cols, v.strides[rd], v.strides[cd]);
    const auto bs = batch_stride(s.batch, v);
    if (bm.ld == 0 || !bs || *bs < 0) return false; // (a batch walked backwards: kiln's)
    o = {f.storage, v.offset, bm.ld, *bs, bm.trans};
    return true;
  };
  if (!take(mapped[0], s.m, s.k, nb, nb + 2, g.a) ||
      !take(mapped[1], s.k, s.n, nb + 2, nb + 1, g.b))
    return std::nullopt;
  return g;
}

KILN_CORE_INLINE bool
run_device_contraction(lowering_table& table, dtype acc, dtype result, const storage& out,
                       std::int64_t out_offset, const contraction& s, const kiln::shape& left,
                       matrix_form fl, const kiln::shape& right, matrix_form fr,
                       const ir::expr_description& el, const ir::expr_description& er,
                       std::span<const flat_leaf> leaves, std::span<const flat_scalar> scalars,
                       const device_epilogue* epilogue, contract_split* split) {
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
  // A plain product may go to the device's vendor library where one is loaded: with
  // blas_use always, or automatic as the matmul family's `provider` chooses for this kernel
  // (the rule where nothing is tuned: plain products, and fused ones past
  // provider_fused_least). An epilogue that only stores the product into one target
  // (`c = einsum(...)`) is none: the library stores it there. Another epilogue's fusion is
  // declined: the library's product, then the epilogue's pass.
  const flat_leaf* stored = stored_as_is(epilogue, out, out_offset, result, s, mapped);
  const bool fused = epilogue && !stored;
  const blas_use use = current_blas_use();
  std::optional<device_gemm> g;
  if (use != blas_use::never)
    g = plain_device_gemm(acc, result, stored ? *stored->storage : out,
                          stored ? stored->layout->offset : out_offset, s, el, er, mapped);
  const bool library = g && ex.provider_gemm(*g, true);
  // The library's product: false (the fusion declined) with a fused epilogue; an unforeseen
  // refusal leaves it to kiln's kernel (nullopt).
  auto by_library = [&]() -> std::optional<bool> {
    if (fused) return false;
    if (!ex.provider_gemm(*g)) return std::nullopt;
    device_products_provided().fetch_add(1, std::memory_order_relaxed);
    return true;
  };
  if (library && use == blas_use::always)
    if (const auto r = by_library()) return *r;
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
  // A target stored contiguously over `ext` but its last dim (k: stride 0), as a kernel
  // without an epilogue stores: the product, or a split's slots of partial sums.
  auto contiguous_over = [](const kiln::shape& ext) {
    operand_strides t{};
    std::int64_t e = 1;
    for (int d = ext.size() - 1; d-- > 0;) {
      t[d] = e;
      e *= ext[d];
    }
    return t;
  };
  std::vector<operand_strides> target_strides{contiguous_over(extents)};
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
  std::vector<std::uint64_t> bits;
  scalar_bits(lt, bits);
  // The contraction over `ext` (rank r, batch rank b) of inputs `in` with their strides, into
  // targets `tg` storing `stored`, lowered.
  auto described = [&](const kiln::shape& ext, int b, std::span<const device_leaf> in,
                       std::span<const operand_strides> st, std::span<const storage* const> tg,
                       std::span<const std::int64_t> offs, std::span<const operand_strides> tst,
                       dtype stored, bool part, bool parts_first) {
    const int r = ext.size();
    std::int64_t outputs = 1;
    for (int d = 0; d < r - 1; ++d)
      outputs *= ext[d];
    const bool wide = needs_wide_index(outputs, in, tg);
    const lowered_pass& lowered = table.find(lt.pattern, true, r, wide, [&] {
      ++lowering_count();
      return ir::lower(values, lt.pattern, true, r, wide, exprs);
    });
    device_contraction dc{lowered, in, bits, ext, st, b, acc, stored, tg, offs, tst, product};
    dc.parts_first = parts_first;
    dc.whole_k = part ? s.k : 0;
    return dc;
  };
  device_contraction whole = described(extents, nb, lt.inputs, strides, targets, target_offsets,
                                       target_strides, result, false, false);
  if (library && use == blas_use::automatic) {
    whole.provider_rule =
        !fused || s.batch_count() * s.m * s.n * s.k >= provider_fused_least ? 1 : 0;
    if (ex.contract_provider(whole) == 1)
      if (const auto r = by_library()) return *r;
  }
  // Split-K: the kernel's tuned `split`, or the rule (with an epilogue, the rule alone: a
  // fused kernel the rule declines is not a site a tuner should see). A product asked about
  // is then launched, whole or in parts (contract takes the choice it was asked for).
  const std::int64_t parts = epilogue || !split ? 0 : ex.contract_parts(whole);
  const std::int64_t chunk =
      nb + 4 > max_rank || parts < 0
          ? 0
          : split_k_chunk(parts, s.batch_count(), s.m, s.n, s.k, ex.concurrent_groups());
  if (chunk > 0 && (epilogue || !split)) {
    ex.contract_declined(); // (the choice contract_provider kept for `whole`)
    return false;
  }
  if (chunk == 0) return ex.contract(whole);
  // Split-K: K in parts of `chunk` (the last shorter where K is not a multiple), each part's
  // partial product stored in its slot of `out` ((parts, batch..., m, n), contiguous, as a
  // kernel without an epilogue stores): the full parts as one launch with the part as the
  // first batch dim, the short one as another.
  const std::int64_t full = s.k / chunk, tail = s.k - full * chunk;
  split->parts = full + (tail > 0);
  split->partial =
      std::make_shared<storage>(acc, split->parts * s.batch_count() * s.m * s.n, out.device());
  const storage* const into[1] = {split->partial.get()};
  std::vector<device_leaf> in(lt.inputs.begin(), lt.inputs.end());
  std::deque<layout> kept;
  std::vector<operand_strides> st(in.size());
  if (full > 0) {
    kiln::shape ext = extents;
    ext.insert(0, full);
    ext[nb + 3] = chunk;
    for (std::size_t i = 0; i < in.size(); ++i) {
      const layout& l = *lt.inputs[i].layout;
      layout v = l;
      v.shape.insert(0, full);
      v.strides.insert(0, chunk * l.strides[nb + 2]);
      v.shape[nb + 3] = chunk;
      in[i].layout = &kept.emplace_back(v);
      for (int d = 0; d < nb + 4; ++d)
        st[i][d] = v.strides[d];
    }
    const operand_strides ts = contiguous_over(ext);
    const std::int64_t off[1] = {0};
    if (!ex.contract(described(ext, nb + 1, in, st, into, off, std::span(&ts, 1), acc, true, true)))
      return false;
  }
  if (tail > 0) {
    kiln::shape ext = extents;
    ext[nb + 2] = tail;
    for (std::size_t i = 0; i < in.size(); ++i) {
      const layout& l = *lt.inputs[i].layout;
      layout v = l;
      v.offset += full * chunk * l.strides[nb + 2];
      v.shape[nb + 2] = tail;
      in[i].layout = &kept.emplace_back(v);
      for (int d = 0; d < nb + 3; ++d)
        st[i][d] = v.strides[d];
    }
    const operand_strides ts = contiguous_over(ext);
    const std::int64_t off[1] = {full * s.batch_count() * s.m * s.n};
    // (Chosen, as the full parts' launch, at the whole product's size, which the kernel took:
    // it declines nothing here. Were it to, the caller computes the whole product again.)
    if (!ex.contract(described(ext, nb, in, st, into, off, std::span(&ts, 1), acc, true, false)))
      return false;
  }
  return true;
}

KILN_CORE_INLINE std::int64_t split_k_chunk(std::int64_t parts, std::int64_t batch, std::int64_t m,
                                            std::int64_t n, std::int64_t k, std::int64_t groups) {
  // Workgroups of the default 64 x 64 tile: fewer than the device runs at once leave it
  // partly idle, and twice as many parts as it runs balance them (parts of at least 1024 of
  // K: a shorter part's partial sums cost more than its tile's work); a K past the kernel's
  // loop budget (16,384 trips of its K step, 8 at the least) is cut whatever the count.
  if (m == 0 || n == 0 || batch == 0 || k < 128) return 0;
  if (parts == 0 && k >= split_k_least) {
    const std::int64_t tiles = split_k_tiles(batch, m, n);
    if (tiles < groups) parts = std::min((2 * groups + tiles - 1) / tiles, k / 1024);
  }
  // At least the parts the loop budget needs, at most parts of 64.
  parts = std::min(std::max(parts, (k + split_k_most - 1) / split_k_most), k / 64);
  if (parts <= 1) return 0;
  // Equal parts, a multiple of 64 long (the K step of any tile divides it).
  return ((k + parts - 1) / parts + 63) / 64 * 64;
}

} // namespace kiln::detail
