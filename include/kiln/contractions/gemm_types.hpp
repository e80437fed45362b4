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
};

// Called on each part of C as soon as it holds its final values, from the thread that
// computed it (parts are disjoint; several run at once): rows [i0, i0 + rows) and cols
// [j0, j0 + cols) of batch element `batch`, a strip of a few hundred cols at most, while it
// is still in cache. The fused epilogue (epilogue.hpp) runs there.
using gemm_epilogue = void (*)(const void* ctx, std::int64_t batch, std::int64_t i0,
                               std::int64_t rows, std::int64_t j0, std::int64_t cols);

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
};

// Products run by the host kernel since the program started, and of them those that ran
// with an epilogue (a fused pass): what the tests count to prove fusion.
struct gemm_counts {
  std::atomic<std::uint64_t> products{0}, fused{0};
};
KILN_CORE_INLINE gemm_counts& host_gemm_counts();

// The blocking the kernel uses for T when none is given, from the caches' sizes.
KILN_CORE_INLINE gemm_blocking default_gemm_blocking(int elem_bytes, int nr);

} // namespace kiln::detail

#if KILN_CORE_DEFINITIONS
#include "kiln/contractions/gemm_impl.hpp"
#endif
