#pragma once
// What the host's product kernel receives, untyped in its operands: the packers, the
// extents, the result, the blocking and the epilogue. What an operand is (a tensor, a view,
// an expression) is the packer's business: the kernel asks it for panels, so an operand
// expression is evaluated while its tiles are packed, into no temporary.
#include "kiln/linkage.hpp"

#include <atomic>
#include <cstdint>

namespace kiln::detail {

// Writes elements (p, q), p in [p0, p0 + np), q in [q0, q0 + nq), of batch element `batch`
// of an operand's matrix, where p is the dim the kernel panels (A's rows, B's cols) and q
// the contracted dim, to dst[(p' / R) * R * nq + q' * R + p' % R] (p' = p - p0, q' = q - q0),
// the last panel padded with zeros up to a multiple of R.
template <class T>
using gemm_pack = void (*)(const void* operand, T* dst, std::int64_t batch, std::int64_t p0,
                           std::int64_t np, std::int64_t q0, std::int64_t nq, int R);

// Cache blocking: kc of the contracted dim per panel (a kc x NR panel of B stays in L1), mc
// rows of A per block (in L2), nc cols of B per block (in L3); `threads` at most (0: the
// pool's). Zero sizes: the defaults for the machine's caches.
struct gemm_blocking {
  std::int64_t mc = 0, nc = 0, kc = 0;
  int threads = 0;
  int provider = -1; // 1: the BLAS provider computes it (blas.hpp), 0: kiln's kernel, -1: the
                     // default rule
  int small = 0;     // 1: the small kernel where it can read the operands (gemm_small.hpp), 2:
                     // the packed one, 0: the rule (small_by_rule)
};

// A host product as the chooser sees it: what is tuned per kernel and size.
struct gemm_site {
  int dtype = 0;         // the accumulator's kiln::dtype
  bool epilogue = false; // a consuming expression runs on its strips
  bool prologue = false; // an operand is an expression (or a layout the provider cannot read)
  bool provider = false; // a BLAS provider is loaded and can take it
  std::int64_t batch = 1, m = 0, n = 0, k = 0;
};

// The tuning database's choice for a product (jit/kiln/jit/tune/host_gemm.hpp installs it):
// the blocking, threads and provider it was tuned to; absent or untuned, the defaults.
using gemm_chooser = gemm_blocking (*)(const gemm_site&);
inline std::atomic<gemm_chooser>& host_gemm_chooser_slot() {
  static std::atomic<gemm_chooser> f{nullptr};
  return f;
}

// Called on each part of C as soon as it holds its final values, from the thread that
// computed it (parts are disjoint; several run at once): rows [i0, i0 + rows) and cols
// [j0, j0 + cols) of batch element `batch`: from the packed kernel a strip of a few hundred
// cols while it is still in cache; from the small kernel and the BLAS provider a whole batch
// element (small, or computed by another library). The fused epilogue (epilogue.hpp) runs
// there.
using gemm_epilogue = void (*)(const void* ctx, std::int64_t batch, std::int64_t i0,
                               std::int64_t rows, std::int64_t j0, std::int64_t cols);

// A matrix as a row-major CBLAS call reads it in place: stored by rows (ld apart), or
// transposed (stored by cols, ld apart). ld 0: it cannot be.
struct blas_matrix {
  int ld = 0;
  bool trans = false;
};

// An operand the BLAS provider reads in place: its matrix at batch element `bi` starts at
// base + sum_d index_d(bi) * st[d] over the batch dims. base null: it cannot (an expression,
// another type, a matrix with a stride 0 or interleaved): the provider reads its packed copy.
template <class T>
struct gemm_direct {
  const T* base = nullptr;
  const std::int64_t* st = nullptr;
  blas_matrix view;
};

template <class T>
struct gemm_call {
  std::int64_t batch = 1, m = 0, n = 0, k = 0;
  gemm_pack<T> pack_a = nullptr, pack_b = nullptr;
  const void* a = nullptr;
  const void* b = nullptr;
  T* c = nullptr; // batch x m x n, contiguous
  gemm_blocking blocking;
  gemm_epilogue epilogue = nullptr;
  const void* epilogue_ctx = nullptr;
  // Operands read in place, by the BLAS provider (blas.hpp) and the small kernel
  // (gemm_small.hpp), at offsets over the batch dims (batch_rank of them, extents batch_shape).
  gemm_direct<T> direct_a, direct_b;
  const std::int64_t* batch_shape = nullptr;
  int batch_rank = 0;
};

// Where an operand read in place (`d`, one of g's) starts at batch element bi; null where it
// is not read in place.
template <class T>
const T* direct_at(const gemm_call<T>& g, const gemm_direct<T>& d, std::int64_t bi) {
  if (!d.base) return nullptr;
  const T* p = d.base;
  for (int i = g.batch_rank - 1; i >= 0; --i) {
    p += (bi % g.batch_shape[i]) * d.st[i];
    bi /= g.batch_shape[i];
  }
  return p;
}

// The threads a product may use: its tuned count, at most the pool's `pool`.
inline int gemm_threads(const gemm_blocking& b, int pool) {
  return b.threads > 0 && b.threads < pool ? b.threads : pool;
}

// Products run by the host kernel since the program started, and of them those that ran
// with an epilogue (a fused pass): what the tests count to prove fusion.
struct gemm_counts {
  std::atomic<std::uint64_t> products{0}, fused{0};
  std::atomic<std::uint64_t> provided{0};  // of the products, those the BLAS provider computed
  std::atomic<std::uint64_t> in_output{0}; // of the fused, those computed into their output
  std::atomic<std::uint64_t> small{0};     // of the products, those the small kernel computed
};
KILN_CORE_INLINE gemm_counts& host_gemm_counts();

// The blocking the kernel uses for T when none is given, from the caches' sizes.
KILN_CORE_INLINE gemm_blocking default_gemm_blocking(int elem_bytes, int nr);
// The bytes of one core's L2 cache (what a fused product's strip should fit in).
KILN_CORE_INLINE std::int64_t gemm_l2_bytes();
// Whether the small kernel outruns the packed one on this CPU well past its AMD bound: on an
// Intel core (gemm_small.hpp's small_by_rule).
KILN_CORE_INLINE bool gemm_small_wide();

} // namespace kiln::detail

#if KILN_CORE_DEFINITIONS
#include "kiln/contractions/gemm_impl.hpp"
#endif
