#pragma once
// The host product kernel, compiled in the file that uses it with that file's flags (like
// every host pass: -march=native gives it AVX2 or AVX-512 registers; the runtime library,
// compiled once for any machine of the architecture, would give it SSE2's). The loop nest is the
// classic one (Goto and van de Geijn): for each nc block of B's cols and kc block of the contracted
// dim, B's block is packed once into NR-wide panels (shared by the threads), then each task packs
// an mc block of A's rows into MR-tall panels and runs the micro-kernel over its part of the
// block's tiles.
#include "kiln/contractions/gemm_small.hpp"
#include "kiln/contractions/gemm_tile.hpp"
#include "kiln/contractions/gemm_types.hpp"
#include "kiln/eval/thread_pool.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

namespace kiln::detail {

namespace gemm_detail {

inline std::int64_t round_up(std::int64_t x, std::int64_t r) { return (x + r - 1) / r * r; }

// A buffer per thread and purpose, kept between calls (a product in a loop allocates once).
template <class T, int Slot>
T* scratch(std::size_t count) {
  struct buffer {
    T* p = nullptr;
    std::size_t n = 0;
    ~buffer() { ::operator delete[](p, std::align_val_t{64}); }
  };
  thread_local buffer b;
  if (b.n < count) {
    ::operator delete[](b.p, std::align_val_t{64});
    b.p = nullptr;
    b.p = static_cast<T*>(::operator new[](count * sizeof(T), std::align_val_t{64}));
    b.n = count;
  }
  return b.p;
}

// One MR x NR tile: C (ldc apart) = or += the kc-long product of an A panel (its first MR of
// tile::mr rows: a block's last panel may have fewer) and a B panel; only the top-left
// mr x nr of it where the tile overhangs C's edge.
template <class T, int MR>
[[gnu::always_inline]] inline void micro_kernel(std::int64_t kc, const T* __restrict ap,
                                                const T* __restrict bp, T* c, std::int64_t ldc,
                                                bool accumulate, int mr, int nr) {
  using tile = gemm_tile<T>;
  using simd = typename tile::simd;
  constexpr int NV = tile::nv, W = tile::lanes;
  simd acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      acc[i][v] = simd(T(0));
  for (std::int64_t p = 0; p < kc; ++p) {
    simd b[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      b[v] = simd::load_aligned(bp + v * W);
    __builtin_prefetch(bp + 8 * NV * W);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const simd a(ap[i]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        if constexpr (std::is_floating_point_v<T>)
          acc[i][v] = fused_madd(a, b[v], acc[i][v]);
        else
          acc[i][v] += a * b[v];
      }
    }
    ap += tile::mr;
    bp += NV * W;
  }
  if (mr == MR && nr == NV * W) {
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        T* dst = c + i * ldc + v * W;
        const simd x = accumulate ? acc[i][v] + simd::load_unaligned(dst) : acc[i][v];
        x.store_unaligned(dst);
      }
    return;
  }
  alignas(64) T t[MR * NV * W];
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v)
      acc[i][v].store_aligned(t + i * NV * W + v * W);
  for (int i = 0; i < mr; ++i)
    for (int j = 0; j < nr; ++j)
      c[i * ldc + j] = accumulate ? c[i * ldc + j] + t[i * NV * W + j] : t[i * NV * W + j];
}

// Where a finished strip of C goes next: the epilogue, with the strip's place in C.
struct strip_sink {
  gemm_epilogue fn = nullptr;
  const void* ctx = nullptr;
  std::int64_t batch = 0, i0 = 0, j0 = 0;
};

// The tiles of an mc x [panel range) block: A's packed mc rows against B's packed panels;
// with `last`, each panel's strip goes to the epilogue once its tiles are done.
template <class T>
void macro_kernel(std::int64_t mc, std::int64_t kc, const T* ap, const T* bp, std::int64_t j0,
                  std::int64_t j1, std::int64_t ncols, T* c, std::int64_t ldc, bool accumulate,
                  const strip_sink& sink) {
  using tile = gemm_tile<T>;
  constexpr int MR = tile::mr, NR = tile::nr;
  // A strip is 256 cols at least: the epilogue pass walks it a row at a time, and a row of
  // one panel's width cost more to set up than to compute. Where the block is whole rows of
  // C and they fit twice the L2 cache, it is one strip: one contiguous run for the pass
  // (gelu at 2048^2 x 64 on an Intel Xeon: 5-9% less for the statement than 256-col strips).
  const std::int64_t cols = j0 == 0 && j1 == ncols && ncols == ldc &&
                                    mc * ldc * std::int64_t(sizeof(T)) <= 2 * gemm_l2_bytes()
                                ? ncols
                                : 256;
  std::int64_t strip = j0;
  for (std::int64_t j = j0; j < j1; j += NR) {
    const int nr = int(std::min<std::int64_t>(NR, ncols - j));
    const T* b = bp + j * kc;
    for (std::int64_t i = 0; i < mc; i += MR) {
      const int mr = int(std::min<std::int64_t>(MR, mc - i));
      // A last panel of a third or two of MR rows takes a tile of that height (64 rows are
      // 5 x 12 + 4: a full tile there was an eighth of the work wasted).
      if (mr > 2 * MR / 3)
        micro_kernel<T, MR>(kc, ap + i * kc, b, c + i * ldc + j, ldc, accumulate, mr, nr);
      else if (mr > MR / 3)
        micro_kernel<T, 2 * MR / 3>(kc, ap + i * kc, b, c + i * ldc + j, ldc, accumulate, mr, nr);
      else
        micro_kernel<T, MR / 3>(kc, ap + i * kc, b, c + i * ldc + j, ldc, accumulate, mr, nr);
    }
    if (sink.fn && (j + nr - strip >= cols || j + NR >= j1)) {
      sink.fn(sink.ctx, sink.batch, sink.i0, mc, sink.j0 + strip, j + nr - strip);
      strip = j + nr;
    }
  }
}

// One batch element on up to `threads` threads.
template <class T>
void gemm_one(const gemm_call<T>& g, const gemm_blocking& blk, std::int64_t bi, int threads) {
  using tile = gemm_tile<T>;
  constexpr int MR = tile::mr, NR = tile::nr;
  const std::int64_t m = g.m, n = g.n, k = g.k;
  T* const C = g.c + bi * m * n;
  if (k == 0) { // nothing contracted: the sum of no products
    std::fill(C, C + m * n, T(0));
    if (g.epilogue) g.epilogue(g.epilogue_ctx, bi, 0, m, 0, n);
    return;
  }
  thread_pool& pool = thread_pool::instance();
  // Rows per task: an mc block, or fewer so that every thread gets a block. Where the
  // blocks dealt in turn would give one thread 8% more rows than its share, they are made
  // smaller, as many as a multiple of the threads (1024 rows in blocks of 336 were four
  // tasks, 672 rows for one thread and 352 for the other: 1.54x one thread's speed on two,
  // 1.9-2.0x now). Smaller blocks elsewhere cost: 2048 and 4096 rows on two threads read
  // 2-8% slower in blocks of 264 than in the balanced ones of 336.
  std::int64_t mc = std::min(blk.mc, round_up((m + threads - 1) / threads, MR));
  if (threads > 1) {
    std::int64_t most = 0;
    for (int t = 0; t < threads; ++t) {
      std::int64_t rows = 0;
      for (std::int64_t i0 = t * mc; i0 < m; i0 += threads * mc)
        rows += std::min(mc, m - i0);
      most = std::max(most, rows);
    }
    if (most * threads > m + m / 12) {
      const std::int64_t blocks = round_up((m + mc - 1) / mc, threads);
      mc = round_up((m + blocks - 1) / blocks, MR);
    }
  }
  const std::int64_t mblocks = (m + mc - 1) / mc;
  for (std::int64_t jc = 0; jc < n; jc += blk.nc) {
    const std::int64_t nc = std::min(blk.nc, n - jc), panels = (nc + NR - 1) / NR;
    // With fewer row blocks than threads, the block's panels are split too.
    const std::int64_t nsplit =
        std::clamp<std::int64_t>((threads + mblocks - 1) / mblocks, 1, panels);
    const int tasks = int(mblocks * nsplit);
    for (std::int64_t pc = 0; pc < k; pc += blk.kc) {
      const std::int64_t kc = std::min(blk.kc, k - pc);
      T* const bp = scratch<T, 0>(std::size_t(panels * NR * kc));
      auto pack_b = [&](int t) {
        const std::int64_t lo = panels * t / threads, hi = panels * (t + 1) / threads;
        if (lo < hi)
          g.pack_b(g.b, bp + lo * NR * kc, bi, jc + lo * NR, std::min(nc, hi * NR) - lo * NR, pc,
                   kc, NR);
      };
      const bool accumulate = pc > 0, last = pc + kc >= k;
      auto compute = [&](int t) {
        const std::int64_t ib = t / nsplit, js = t % nsplit;
        const std::int64_t i0 = ib * mc, mcb = std::min(mc, m - i0);
        T* const ap = scratch<T, 1>(std::size_t(round_up(mcb, MR) * kc));
        g.pack_a(g.a, ap, bi, i0, mcb, pc, kc, MR);
        const std::int64_t p0 = panels * js / nsplit, p1 = panels * (js + 1) / nsplit;
        const strip_sink sink{last ? g.epilogue : nullptr, g.epilogue_ctx, bi, i0, jc};
        macro_kernel<T>(mcb, kc, ap, bp, p0 * NR, std::min(nc, p1 * NR), nc, C + i0 * n + jc, n,
                        accumulate, sink);
      };
      if (threads <= 1) {
        pack_b(0);
        for (int t = 0; t < tasks; ++t)
          compute(t);
      } else {
        pool.parallel_for(threads, pack_b, threads);
        pool.parallel_for(tasks, compute, threads);
      }
    }
  }
}

template <class T>
void gemm_driver(const gemm_call<T>& g) {
  host_gemm_counts().products.fetch_add(1, std::memory_order_relaxed);
  if (g.epilogue) host_gemm_counts().fused.fetch_add(1, std::memory_order_relaxed);
  if (g.m == 0 || g.n == 0 || g.batch == 0) return;
  gemm_blocking blk = default_gemm_blocking(int(sizeof(T)), gemm_tile<T>::nr);
  if (g.blocking.mc > 0) blk.mc = round_up(g.blocking.mc, gemm_tile<T>::mr);
  if (g.blocking.nc > 0) blk.nc = round_up(g.blocking.nc, gemm_tile<T>::nr);
  if (g.blocking.kc > 0) blk.kc = g.blocking.kc;
  int threads = gemm_threads(g.blocking, thread_pool::instance().threads());
  const bool small_kernel = small_applies(g) && small_by_rule(g, threads);
  if (small_kernel) host_gemm_counts().small.fetch_add(1, std::memory_order_relaxed);
  // Below 2^22 multiply-adds (~40 us on one core) a product runs on the caller: waking a
  // thread and splitting the packing cost more than they save (AMD EPYC, f32 128^3 = 2^21:
  // 49 us on one thread, 83 us on two; 192^3: 152 and 98 us).
  // Many products whose sum is that large split over the batch instead (before, this branch
  // was dead: the small-product rule had set one thread already).
  constexpr std::int64_t small = std::int64_t(1) << 22;
  const std::int64_t work = g.m * g.n * std::max<std::int64_t>(g.k, 1);
  // One batch element: by the small kernel (gemm_small.hpp, always on one thread) where it
  // applies, else packed.
  auto one = [&](std::int64_t bi, int t) {
    if (small_kernel)
      small_one(g, bi);
    else
      gemm_one(g, blk, bi, t);
  };
  if (g.batch > 1 && threads > 1 && g.batch * work >= small &&
      (work < small || g.batch >= 4 * threads)) {
    // Many small products: one product per task, each on one thread.
    thread_pool::instance().parallel_for(
        int(std::min<std::int64_t>(g.batch, 1 << 20)),
        [&](int t) {
          const std::int64_t tasks = std::min<std::int64_t>(g.batch, 1 << 20);
          for (std::int64_t bi = g.batch * t / tasks; bi < g.batch * (t + 1) / tasks; ++bi)
            one(bi, 1);
        },
        threads);
    return;
  }
  if (work < small) threads = 1;
  for (std::int64_t bi = 0; bi < g.batch; ++bi)
    one(bi, threads);
}

} // namespace gemm_detail

// C = A · B for every batch element.
template <class T>
void run_gemm(const gemm_call<T>& g) {
  gemm_detail::gemm_driver(g);
}

} // namespace kiln::detail
