#pragma once
// Small products without packing: where both operands are tensors read in place (B by rows,
// unit stride along its cols; A with any strides) and a product is a few dozen on a side,
// packing both operands into panels and running the 12 x 32 register tile (mostly padding
// at 16 x 16) cost more than the arithmetic: 16^3 took 0.72 us, 8^3 0.38 us. Here each
// tile of up to 4 rows x 4 SIMD registers of cols reads B's rows straight from memory and
// broadcasts A's elements; B's last cols (fewer than a register) through a zero-padded copy.
#include "kiln/contractions/gemm_tile.hpp"
#include "kiln/contractions/gemm_types.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

namespace kiln::detail {

namespace gemm_detail {

// Products of at most this many multiply-adds per batch element take the small kernel (AMD
// EPYC, AVX-512, f32: 64^3 in 5.9 us against 7.4 us packed; 96^3 in 24.8 against 21.1).
inline constexpr std::int64_t small_product_madds = std::int64_t(1) << 18;

// C[i0..i0+R) x [j0..j0+V*W) = A B for one batch element, B's V registers of cols read
// straight from its rows; `cols` of them stored (fewer than V*W only for B's tail, whose
// rows were copied zero-padded to W first).
template <class T, int R, int V>
[[gnu::always_inline]] inline void small_tile(std::int64_t k, const T* a, std::int64_t ar,
                                              std::int64_t ac, const T* b, std::int64_t ldb, T* c,
                                              std::int64_t ldc, int cols) {
  using simd = typename gemm_tile<T>::simd;
  constexpr int W = int(simd::size);
  simd acc[R][V];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v)
      acc[r][v] = simd(T(0));
  for (std::int64_t p = 0; p < k; ++p) {
    simd bv[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v)
      bv[v] = simd::load_unaligned(b + p * ldb + v * W);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const simd av(a[r * ar + p * ac]);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v)
        acc[r][v] = fused_madd(av, bv[v], acc[r][v]);
    }
  }
  if (cols == V * W) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v)
        acc[r][v].store_unaligned(c + r * ldc + v * W);
    return;
  }
  for (int r = 0; r < R; ++r) {
    alignas(64) T out[V * W];
    for (int v = 0; v < V; ++v)
      acc[r][v].store_aligned(out + v * W);
    std::memcpy(c + r * ldc, out, sizeof(T) * std::size_t(cols));
  }
}

template <class T, int V>
void small_rows(std::int64_t m, std::int64_t k, const T* a, std::int64_t ar, std::int64_t ac,
                const T* b, std::int64_t ldb, T* c, std::int64_t ldc, int cols) {
  std::int64_t i = 0;
  for (; i + 4 <= m; i += 4)
    small_tile<T, 4, V>(k, a + i * ar, ar, ac, b, ldb, c + i * ldc, ldc, cols);
  for (; i < m; ++i)
    small_tile<T, 1, V>(k, a + i * ar, ar, ac, b, ldb, c + i * ldc, ldc, cols);
}

// Whether the small kernel takes g, where it can (small_applies), on `threads` threads: the
// tuned choice (host_matmul's `small`), else at most small_product_madds per batch element;
// on an Intel core also any product whose B fits an eighth of L2 that one thread would run
// anyway (below 2^22 multiply-adds, or on one thread). Measured on an Intel Xeon, one
// thread, GFLOP/s small against packed: f32 96^3 187-209 / 123-135, 128^3 180-201 / 132-145,
// 256^3 175-200 / 143-163, 384^3 171 / 172, 512^3 131-166 / 176-188; f64 96^3 100 / 83,
// 128^3-192^3 equal, 512^3 36 / 80. On the AMD EPYC the packed kernel won from 96^3.
template <class T>
bool small_by_rule(const gemm_call<T>& g, int threads) {
  if (g.blocking.small != 0) return g.blocking.small == 1;
  const std::int64_t madds = g.m * g.n * g.k;
  if (madds <= small_product_madds) return true;
  return gemm_small_wide() && (threads == 1 || madds < (std::int64_t(1) << 22)) &&
         g.k * g.n * std::int64_t(sizeof(T)) <= gemm_l2_bytes() / 8;
}

// Whether the small kernel can compute g: floats, both operands read in place (B by rows).
template <class T>
bool small_applies(const gemm_call<T>& g) {
  if constexpr (!std::is_floating_point_v<T>) {
    (void)g;
    return false;
  } else {
    return g.direct_a.base && g.direct_b.base && !g.direct_b.view.trans;
  }
}

// Batch element bi of g by the small kernel (small_applies(g)), then its epilogue.
template <class T>
void small_one(const gemm_call<T>& g, std::int64_t bi) {
  if constexpr (std::is_floating_point_v<T>) {
    constexpr int W = gemm_tile<T>::lanes;
    const gemm_direct<T>&da = g.direct_a, &db = g.direct_b;
    // A(i, p) at a[i * ar + p * ac]: stored by rows, or transposed.
    const std::int64_t ar = da.view.trans ? 1 : da.view.ld, ac = da.view.trans ? da.view.ld : 1;
    const std::int64_t ldb = db.view.ld, full = g.n / W * W, tail = g.n - full;
    const T *a = direct_at(g, da, bi), *b = direct_at(g, db, bi);
    T* const c = g.c + bi * g.m * g.n;
    std::int64_t j = 0;
    for (; j + 4 * W <= full; j += 4 * W)
      small_rows<T, 4>(g.m, g.k, a, ar, ac, b + j, ldb, c + j, g.n, 4 * W);
    switch ((full - j) / W) {
    case 3:
      small_rows<T, 3>(g.m, g.k, a, ar, ac, b + j, ldb, c + j, g.n, 3 * W);
      break;
    case 2:
      small_rows<T, 2>(g.m, g.k, a, ar, ac, b + j, ldb, c + j, g.n, 2 * W);
      break;
    case 1:
      small_rows<T, 1>(g.m, g.k, a, ar, ac, b + j, ldb, c + j, g.n, W);
      break;
    default:
      break;
    }
    if (tail) {
      // B's last cols, a register wide per row (lanes past them are computed, not stored).
      thread_local std::vector<T> rows;
      const std::size_t need = std::size_t(std::max<std::int64_t>(g.k, 1) * W);
      if (rows.size() < need) rows.assign(need, T(0));
      for (std::int64_t p = 0; p < g.k; ++p)
        std::memcpy(rows.data() + p * W, b + p * ldb + full, sizeof(T) * std::size_t(tail));
      small_rows<T, 1>(g.m, g.k, a, ar, ac, rows.data(), W, c + full, g.n, int(tail));
    }
  } else {
    (void)g, (void)bi;
  }
  if (g.epilogue) g.epilogue(g.epilogue_ctx, bi, 0, g.m, 0, g.n);
}

} // namespace gemm_detail
} // namespace kiln::detail
