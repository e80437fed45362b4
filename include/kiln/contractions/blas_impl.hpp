#pragma once
// The BLAS provider's definitions (declared in blas.hpp; kiln/linkage.hpp says where they
// are compiled).
#include "kiln/contractions/blas.hpp"
#include "kiln/error.hpp"
#include "kiln/eval/host_launch.hpp"
#include "kiln/eval/thread_pool.hpp"
#include "kiln/settings.hpp"

#include <algorithm>
#include <atomic>
#include <climits>
#include <dlfcn.h>
#include <memory>

namespace kiln {

namespace detail {
inline std::atomic<blas_use>& blas_use_slot() {
  static std::atomic<blas_use> u{blas_use::automatic};
  return u;
}
} // namespace detail

KILN_CORE_INLINE blas_use set_blas_use(blas_use u) { return detail::blas_use_slot().exchange(u); }
KILN_CORE_INLINE blas_use current_blas_use() {
  return detail::blas_use_slot().load(std::memory_order_relaxed);
}

KILN_CORE_INLINE std::string blas_library() { return detail::host_blas().path; }

namespace detail {

KILN_CORE_INLINE blas_functions open_blas(const std::string& library) {
  // RTLD_LOCAL: the provider's symbols stay out of the program's namespace (a program that
  // links another BLAS keeps its own).
  void* h = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* why = ::dlerror();
    throw error("matmul", "the BLAS library does not load",
                "KILN_BLAS_LIBRARY=" + library + ": " + (why ? why : "dlopen failed"));
  }
  blas_functions b;
  b.path = library;
  b.sgemm = reinterpret_cast<cblas_gemm<float>>(::dlsym(h, "cblas_sgemm"));
  b.dgemm = reinterpret_cast<cblas_gemm<double>>(::dlsym(h, "cblas_dgemm"));
  if (!b.sgemm || !b.dgemm) {
    ::dlclose(h);
    throw error("matmul", "the library is not a CBLAS",
                "KILN_BLAS_LIBRARY=" + library + " has no " +
                    (b.sgemm ? "cblas_dgemm" : "cblas_sgemm"));
  }
  // The provider's own thread count, so that it can be made kiln's (OpenBLAS's pthread
  // build starts one thread per core otherwise, whatever KILN_NUM_THREADS says). Both take an
  // int. (BLIS's setter takes a 64-bit dim_t: BLIS keeps BLIS_NUM_THREADS.) Where the program
  // itself uses the same library, dlopen returns that copy: kiln's count is then its count.
  for (const char* name : {"openblas_set_num_threads", "MKL_Set_Num_Threads"})
    if (void* f = ::dlsym(h, name)) {
      b.set_threads = reinterpret_cast<void (*)(int)>(f);
      break;
    }
  return b; // the handle stays open for the process
}

KILN_CORE_INLINE const blas_functions& host_blas() {
  static const blas_functions b = [] {
    if (const auto v = settings::text("KILN_BLAS_LIBRARY")) {
      if (*v == "none") return blas_functions{};
      return open_blas(*v);
    }
    // Not the generic libblas.so.3: where it is the reference BLAS it is slower than kiln.
    for (const char* name : {"libopenblas.so.0", "libmkl_rt.so.2", "libmkl_rt.so", "libblis.so.4"})
      try {
        return open_blas(name);
      } catch (const error&) {
      }
    return blas_functions{};
  }();
  return b;
}

KILN_CORE_INLINE void blas_threads(const blas_functions& b, int threads) {
  // Per calling thread: OpenBLAS's OpenMP build keeps the setting per thread (OpenMP's
  // nthreads-var), its pthread build for the process (then a thread's call can follow
  // another's: a matter of speed only).
  thread_local int now = 0;
  if (b.set_threads && now != threads) {
    b.set_threads(threads);
    now = threads;
  }
}

KILN_CORE_INLINE blas_matrix blas_view(std::int64_t rows, std::int64_t cols, std::int64_t rs,
                                       std::int64_t cs) {
  const std::int64_t r1 = std::max<std::int64_t>(rows, 1), c1 = std::max<std::int64_t>(cols, 1);
  if (r1 > INT_MAX || c1 > INT_MAX) return {};
  if (rows == 0 || cols == 0) return {int(c1), false}; // nothing is read
  if (rows == 1) rs = c1; // a stride over an extent of 1 is never applied
  if (cols == 1) cs = 1;
  if (cs == 1 && rs >= c1 && rs <= INT_MAX) return {int(rs), false};
  if (cols == 1) cs = r1;
  if (rows == 1) rs = 1;
  if (rs == 1 && cs >= r1 && cs <= INT_MAX) return {int(cs), true};
  return {};
}

// Measured on an AMD EPYC (AVX-512, 2 cores) against OpenBLAS 0.3.21 (bench/RESULTS.md,
// "Issue 33, continued: the BLAS provider"). Products of one matrix up to 64^3 ran 1.1-1.3x
// faster on the provider than in kiln's small kernel. From 128^3 on, alone on one thread,
// they were even (0.94-1.07x, f64 at 2048^3 1.19x); on two threads, taking turns with kiln's
// passes as a program's statements do, the provider's threads had to wake each time and
// kiln's kernel was 1.6-1.8x faster at 256^3 and 512^3. Batches of small products: kiln's
// kernel as fast or faster in f32. Fused products: kiln's kernel, whose epilogue costs no
// pass (the provider and its pass lost 0.74-0.96x from 128^3 on). Beyond this rule, the
// tuner measures.
KILN_CORE_INLINE bool blas_by_default(const gemm_site& s) {
  return s.provider && !s.epilogue && !s.prologue && s.batch == 1 &&
         s.m * s.n * s.k <= (std::int64_t(1) << 18);
}

KILN_CORE_INLINE gemm_blocking choose_gemm(const gemm_site& s) {
  gemm_blocking b;
  if (host_chooser_wanted().load(std::memory_order_relaxed))
    if (const gemm_chooser f = host_gemm_chooser_slot().load(std::memory_order_acquire)) b = f(s);
  switch (current_blas_use()) {
  case blas_use::never:
    b.provider = 0;
    break;
  case blas_use::always:
    b.provider = 1;
    break;
  case blas_use::automatic:
    if (b.provider < 0) b.provider = blas_by_default(s) ? 1 : 0;
    break;
  }
  if (!s.provider) b.provider = 0;
  return b;
}

namespace blas_detail {

template <class T>
void run(const blas_functions& lib, const gemm_call<T>& g) {
  auto& counts = host_gemm_counts();
  counts.products.fetch_add(1, std::memory_order_relaxed);
  counts.provided.fetch_add(1, std::memory_order_relaxed);
  if (g.epilogue) counts.fused.fetch_add(1, std::memory_order_relaxed);
  if (g.m == 0 || g.n == 0 || g.batch == 0) return;
  if (g.k == 0) { // the sum of no products, whatever the provider makes of k = 0
    std::fill(g.c, g.c + g.batch * g.m * g.n, T(0));
    if (g.epilogue)
      for (std::int64_t bi = 0; bi < g.batch; ++bi)
        g.epilogue(g.epilogue_ctx, bi, 0, g.m, 0, g.n);
    return;
  }
  thread_pool& tp = thread_pool::instance();
  blas_threads(lib, gemm_threads(g.blocking, tp.threads()));
  // kiln's helpers, spinning after the last pass, would share the cores with the provider's
  // threads (2 threads: OpenBLAS's DGEMM at 256^3 ran at 12 GFLOP/s right after a kiln pass).
  tp.quiesce();
  cblas_gemm<T> gemm;
  if constexpr (std::is_same_v<T, float>)
    gemm = lib.sgemm;
  else
    gemm = lib.dgemm;
  constexpr int row_major = 101, no_trans = 111, trans = 112;
  // An operand not read in place is packed whole per batch element, as one panel as tall as
  // its free dim: A then lies k x m (A transposed), B k x n.
  std::unique_ptr<T[]> pa, pb;
  if (!g.direct_a.base) pa.reset(new T[std::size_t(std::max<std::int64_t>(g.m * g.k, 1))]);
  if (!g.direct_b.base) pb.reset(new T[std::size_t(std::max<std::int64_t>(g.k * g.n, 1))]);
  const blas_matrix va =
      g.direct_a.base ? g.direct_a.view : blas_matrix{int(std::max<std::int64_t>(g.m, 1)), true};
  const blas_matrix vb =
      g.direct_b.base ? g.direct_b.view : blas_matrix{int(std::max<std::int64_t>(g.n, 1)), false};
  for (std::int64_t bi = 0; bi < g.batch; ++bi) {
    const T *a = direct_at(g, g.direct_a, bi), *b = direct_at(g, g.direct_b, bi);
    if (!a) {
      g.pack_a(g.a, pa.get(), bi, 0, g.m, 0, g.k, int(g.m));
      a = pa.get();
    }
    if (!b) {
      g.pack_b(g.b, pb.get(), bi, 0, g.n, 0, g.k, int(g.n));
      b = pb.get();
    }
    T* c = g.c + bi * g.m * g.n;
    gemm(row_major, va.trans ? trans : no_trans, vb.trans ? trans : no_trans, int(g.m), int(g.n),
         int(g.k), T(1), a, va.ld, b, vb.ld, T(0), c, int(g.n));
    if (g.epilogue) g.epilogue(g.epilogue_ctx, bi, 0, g.m, 0, g.n);
  }
}

} // namespace blas_detail

KILN_CORE_INLINE void run_blas_gemm(const blas_functions& lib, const gemm_call<float>& g) {
  blas_detail::run(lib, g);
}
KILN_CORE_INLINE void run_blas_gemm(const blas_functions& lib, const gemm_call<double>& g) {
  blas_detail::run(lib, g);
}

} // namespace detail
} // namespace kiln
