#pragma once
// The typed front of a product on the host: a packer per operand expression type (it reads
// the operand through the host evaluator's readers, so an expression operand is computed
// while its panels are packed and never stored whole), handed with the contraction to the
// kernel compiled once (gemm.hpp). A result whose type is not the accumulator's (f16, bf16,
// i32...) is accumulated in a temporary and converted by one pass.
#include "kiln/contractions/blas.hpp"
#include "kiln/contractions/form.hpp"
#include "kiln/contractions/gemm.hpp"
#include "kiln/contractions/product_step.hpp"
#include "kiln/eval/assign.hpp"
#include "kiln/eval/readers.hpp"

#include <climits>
#include <type_traits>

namespace kiln {

namespace detail {

// An operand as a packer reads it: its reader over (batch..., q, p).
template <class E>
struct packed_operand {
  using reader_type =
      decltype(make_reader(std::declval<const E&>(), std::declval<const std::int64_t* (&)()>()));
  reader_type rd;
  const kiln::shape* batch;
};

template <class Acc, class E>
void pack_operand(const void* operand, Acc* dst, std::int64_t bi, std::int64_t p0, std::int64_t np,
                  std::int64_t q0, std::int64_t nq, int R) {
  const auto& o = *static_cast<const packed_operand<E>*>(operand);
  if constexpr (is_tensor_v<E>) {
    // A tensor: straight from memory, panel by panel, each written in order.
    const int nb = o.batch->size();
    const std::int64_t* st = o.rd.st;
    const auto* base = o.rd.base;
    for (int d = nb - 1; d >= 0; --d) {
      base += (bi % (*o.batch)[d]) * st[d];
      bi /= (*o.batch)[d];
    }
    const std::int64_t sq = st[nb], sp = st[nb + 1];
    for (std::int64_t p = 0; p < np; p += R) {
      const std::int64_t rows = std::min<std::int64_t>(R, np - p);
      const auto* src = base + (p0 + p) * sp + q0 * sq;
      for (std::int64_t q = 0; q < nq; ++q, dst += R) {
        const auto* s = src + q * sq;
        std::int64_t r = 0;
        if (sp == 1)
          for (; r < rows; ++r)
            dst[r] = convert<Acc>(s[r]);
        else
          for (; r < rows; ++r)
            dst[r] = convert<Acc>(s[r * sp]);
        for (; r < R; ++r)
          dst[r] = Acc(0);
      }
    }
    return;
  }
  auto rd = o.rd;
  const int nb = o.batch->size();
  std::int64_t idx[max_rank] = {};
  for (int d = nb - 1; d >= 0; --d) {
    idx[d] = bi % (*o.batch)[d];
    bi /= (*o.batch)[d];
  }
  const std::int64_t panels = (np + R - 1) / R;
  using V = value_t<E>;
  // An expression that runs on SIMD batches is read a batch at a time (its math functions
  // then take their vector forms), its values spread over the panels.
  constexpr bool simd = lane_bytes<E> == sizeof(V) && std::is_same_v<V, Acc>;
  constexpr std::int64_t W = [] {
    if constexpr (simd)
      return std::int64_t(batch<V>::size);
    else
      return std::int64_t(1);
  }();
  for (std::int64_t q = 0; q < nq; ++q) {
    idx[nb] = q0 + q;
    rd.set_row(idx, nb + 1);
    // Values in p order go to lane r of panel `d`, the next panel R * nq further on.
    Acc* d = dst + q * R;
    std::int64_t r = 0, p = 0;
    auto put = [&](Acc v) {
      d[r] = v;
      if (++r == R) {
        r = 0;
        d += R * nq;
      }
    };
    if constexpr (simd) {
      alignas(64) V v[W];
      for (; p + W <= np; p += W) {
        rd.load(p0 + p).store_aligned(v);
        for (std::int64_t l = 0; l < W; ++l)
          put(v[l]);
      }
    }
    for (; p < np; ++p)
      put(convert<Acc>(rd.at(p0 + p)));
    for (; p < panels * R; ++p)
      put(Acc(0));
  }
}

// Sets up the packer of operand e (read in form f; `left`: it is A) for contraction c.
template <class E>
packed_operand<E> make_packed(const E& e, const contraction& c, matrix_form f, bool left) {
  const kiln::shape& s = shape_of(e);
  const int nb = c.batch.size();
  // Each leaf's strides over (batch..., q, p): q the contracted dim, p the one panelled.
  std::vector<std::array<std::int64_t, max_rank>> st;
  for_each_leaf(e, [&](const auto& t) {
    const layout b = views::broadcast_to(t.layout(), s, "matmul");
    const operand_walk w = strides_of(s, b.strides.data(), f, nb);
    std::array<std::int64_t, max_rank> r{};
    std::copy(w.batch, w.batch + nb, r.begin());
    r[nb] = left ? w.cols : w.rows;
    r[nb + 1] = left ? w.rows : w.cols;
    st.push_back(r);
  });
  std::size_t i = 0;
  auto next = [&]() -> const std::int64_t* { return st[i++].data(); };
  packed_operand<E> o{make_reader(e, next), &c.batch};
  set_inner(o.rd, c.batch.size() + 1);
  return o;
}

// A packer of another's operand from an offset batch element and panel dim: a chunk of a
// product run as a product of its own.
template <class Acc>
struct offset_operand {
  gemm_pack<Acc> pack;
  const void* operand;
  std::int64_t batch = 0, p0 = 0;
};
template <class Acc>
void pack_offset(const void* operand, Acc* dst, std::int64_t bi, std::int64_t p0, std::int64_t np,
                 std::int64_t q0, std::int64_t nq, int R) {
  const auto& o = *static_cast<const offset_operand<Acc>*>(operand);
  o.pack(o.operand, dst, o.batch + bi, o.p0 + p0, np, q0, nq, R);
}

// A tensor operand the provider reads in place, where its matrix is one a row-major CBLAS
// call takes (blas_view); else nothing (the provider then reads its packed copy).
template <class T, class E>
gemm_direct<T> direct_operand(const packed_operand<E>& o, int nb, std::int64_t ps, std::int64_t qs,
                              bool left) {
  if constexpr (is_tensor_v<E> && std::is_same_v<value_t<E>, T>) {
    const std::int64_t sq = o.rd.st[nb], sp = o.rd.st[nb + 1];
    const blas_matrix v = left ? blas_view(ps, qs, sp, sq) : blas_view(qs, ps, sq, sp);
    if (v.ld > 0) return {o.rd.base, o.rd.st, v};
  } else {
    (void)o, (void)nb, (void)ps, (void)qs, (void)left;
  }
  return {};
}

// Bytes of accumulators a product of another result type computes before converting them.
inline constexpr std::int64_t acc_chunk_bytes = std::int64_t{64} << 20;

template <class R, class A, class B>
void host_matmul_run(const tensor<R>& out, const A& a, const B& b, const contraction& c,
                     gemm_epilogue epilogue, const void* epilogue_ctx);

// A product in a captured plan (product_step.hpp), run again at each replay.
template <class R, class A, class B>
struct product_replay : product_operands<R, A, B> {
  static void run(void* p) {
    auto& d = *static_cast<product_replay*>(p);
    d.refresh();
    host_matmul_run(d.out, d.a, d.b, d.c, nullptr, nullptr);
  }
  static void drop(void* p) { delete static_cast<product_replay*>(p); }
};

// The product of a and b into `out` (fresh, contiguous); with an epilogue (R must then be
// the accumulator type), each finished strip of `out` is handed to it. While a plan is
// captured it is recorded, and run unfused (a statement's consumer of it is then a pass of
// its own).
template <class R, class A, class B>
void host_matmul(const tensor<R>& out, const A& a, const B& b, const contraction& c,
                 gemm_epilogue epilogue = nullptr, const void* epilogue_ctx = nullptr) {
  if (plan_recording* r = recording_now()) [[unlikely]] {
    if (epilogue != nullptr)
      throw error("plan", "internal: a product fused with its consumer while capturing",
                  "matmul of result shape " + out.shape().str());
    using D = product_replay<R, A, B>;
    D* d = adopted_product<D>(*r, out, a, b, c);
    try { // (what it runs inside, a conversion of its accumulators, is part of this step)
      const nested_recording nested(*r);
      host_matmul_run(d->out, d->a, d->b, d->c, nullptr, nullptr);
    } catch (...) {
      delete d;
      throw;
    }
    return plan_add(*r, d, &D::run, &D::drop);
  }
  host_matmul_run(out, a, b, c, epilogue, epilogue_ctx);
}

template <class R, class A, class B>
void host_matmul_run(const tensor<R>& out, const A& a, const B& b, const contraction& c,
                     gemm_epilogue epilogue, const void* epilogue_ctx) {
  using Acc = matmul_acc_t<R>;
  // A result stored transposed is the product of the operands' transposes, swapped.
  const contraction s = c.out_t ? swapped(c) : c;
  const packed_operand<A> pa = make_packed(a, s, c.out_t ? s.fb : s.fa, !c.out_t);
  const packed_operand<B> pb = make_packed(b, s, c.out_t ? s.fa : s.fb, c.out_t);
  gemm_call<Acc> g;
  g.batch = s.batch_count();
  g.m = s.m;
  g.n = s.n;
  g.k = s.k;
  g.pack_a = c.out_t ? &pack_operand<Acc, B> : &pack_operand<Acc, A>;
  g.pack_b = c.out_t ? &pack_operand<Acc, A> : &pack_operand<Acc, B>;
  g.a = c.out_t ? static_cast<const void*>(&pb) : &pa;
  g.b = c.out_t ? static_cast<const void*>(&pa) : &pb;
  if constexpr (std::is_same_v<R, Acc>) {
    g.c = out.data(); // fresh and contiguous
    g.epilogue = epilogue;
    g.epilogue_ctx = epilogue_ctx;
    gemm_site site{static_cast<int>(dtype_of<Acc>()),
                   epilogue != nullptr,
                   false,
                   false,
                   g.batch,
                   g.m,
                   g.n,
                   g.k};
    if constexpr (std::is_floating_point_v<Acc>) {
      // The computed product's left operand is a unless the result is stored transposed.
      const int nb = s.batch.size();
      g.batch_shape = s.batch.data();
      g.batch_rank = nb;
      g.direct_a = c.out_t ? direct_operand<Acc>(pb, nb, g.m, g.k, true)
                           : direct_operand<Acc>(pa, nb, g.m, g.k, true);
      g.direct_b = c.out_t ? direct_operand<Acc>(pa, nb, g.n, g.k, false)
                           : direct_operand<Acc>(pb, nb, g.n, g.k, false);
      site.prologue = !g.direct_a.base || !g.direct_b.base;
      if (current_blas_use() != blas_use::never && std::max({g.m, g.n, g.k}) <= INT_MAX)
        site.provider = !host_blas().path.empty();
    }
    g.blocking = choose_gemm(site);
    if constexpr (std::is_floating_point_v<Acc>) {
      // The provider stores an operand it cannot read in place whole: past 256 MiB of such
      // copies, kiln's kernel, which never does, computes the product instead.
      const std::int64_t copies =
          ((g.direct_a.base ? 0 : g.m * g.k) + (g.direct_b.base ? 0 : g.k * g.n)) *
          std::int64_t(sizeof(Acc));
      if (g.blocking.provider == 1 && copies <= (std::int64_t(256) << 20))
        return run_blas_gemm(host_blas(), g);
    }
    run_gemm(g);
  } else if (g.batch * g.m * g.n * std::int64_t(sizeof(Acc)) <= acc_chunk_bytes) {
    const tensor<Acc> acc(out.shape());
    g.c = acc.data();
    run_gemm(g);
    assign(out, kiln::cast<R>(acc));
  } else {
    // A large result of another type (u8 of 2^31 elements accumulates in 16 GiB of i64):
    // computed by chunks, each converted into `out` (fresh, contiguous, the product's own
    // order) before the next: whole batch elements where one fits, else rows of one.
    const std::int64_t per = g.m * g.n * std::int64_t(sizeof(Acc)); // one batch element
    const bool whole = per <= acc_chunk_bytes;
    const std::int64_t elements = whole ? acc_chunk_bytes / std::max<std::int64_t>(per, 1) : 1;
    const std::int64_t rows =
        whole ? g.m
              : std::max<std::int64_t>(1, acc_chunk_bytes / (g.n * std::int64_t(sizeof(Acc))));
    const tensor<Acc> acc(kiln::shape{std::min(elements, g.batch) * rows * g.n});
    offset_operand<Acc> oa{g.pack_a, g.a}, ob{g.pack_b, g.b};
    gemm_call<Acc> part = g;
    part.pack_a = &pack_offset<Acc>;
    part.pack_b = &pack_offset<Acc>;
    part.a = &oa;
    part.b = &ob;
    part.c = acc.data();
    for (std::int64_t bi = 0; bi < g.batch; bi += elements)
      for (std::int64_t r0 = 0; r0 < g.m; r0 += rows) {
        oa.batch = ob.batch = bi;
        oa.p0 = r0;
        part.batch = std::min(elements, g.batch - bi);
        part.m = std::min(rows, g.m - r0);
        run_gemm(part);
        const std::int64_t count = part.batch * part.m * g.n;
        assign(tensor<R>(out.storage(),
                         layout::contiguous({count}, out.offset() + (bi * g.m + r0) * g.n)),
               kiln::cast<R>(tensor<Acc>(acc.storage(), layout::contiguous({count}, 0))));
      }
  }
}
} // namespace detail

} // namespace kiln
