#pragma once
// An optimized BLAS (OpenBLAS, MKL, BLIS) as a provider of the host's f32 and f64 products,
// opened with dlopen at the first product that may use it, never linked: a program runs
// the same without one. Which products it takes is chosen per kernel and size: by the
// tuning database where the `host_matmul` family was tuned (jit/kiln/jit/tune/host_gemm.hpp
// measures kiln's fused kernel against "provider GEMM, then the epilogue as one pass"),
// else by the default rule (blas_by_default, blas_impl.hpp). kiln::set_blas_use overrides both.
#include "kiln/contractions/gemm_types.hpp"
#include "kiln/linkage.hpp"
#include "kiln/shape.hpp"

#include <string>

namespace kiln {

enum class blas_use {
  automatic, // host: by the tuning database, else the default rule (small plain products);
             // CUDA: cuBLAS for every plain product it takes, and for fused ones of at least
             // provider_fused_least multiply-adds (device_matmul.hpp)
  never,     // kiln's own kernel for every product
  always,    // the provider for every product it can take (f32/f64, extents below 2^31; on
             // CUDA also f16/bf16, a fused epilogue then run as a pass)
};

// Sets how products use the providers (the host's BLAS, cuBLAS on CUDA) for the whole
// process; returns the previous setting. Thread-safe; products already running keep the setting
// they started with.
KILN_CORE_INLINE blas_use set_blas_use(blas_use u);
KILN_CORE_INLINE blas_use current_blas_use();

// The provider's library as it was opened (KILN_BLAS_LIBRARY's, or the first default that
// loads), or empty when none loaded; reading it opens the library if it was not yet.
KILN_CORE_INLINE std::string blas_library();

namespace detail {

// cblas_sgemm / cblas_dgemm with 32-bit integers (LP64, the default of every Debian BLAS).
template <class T>
using cblas_gemm = void (*)(int order, int trans_a, int trans_b, int m, int n, int k, T alpha,
                            const T* a, int lda, const T* b, int ldb, T beta, T* c, int ldc);

struct blas_functions {
  std::string path; // empty: no provider
  cblas_gemm<float> sgemm = nullptr;
  cblas_gemm<double> dgemm = nullptr;
  void (*set_threads)(int) = nullptr; // openblas_set_num_threads, MKL_Set_Num_Threads...
};

// Opens `library` (a path or a soname) and finds its cblas_sgemm and cblas_dgemm: a
// kiln::error saying why when it cannot (KILN_BLAS_LIBRARY names such a library).
KILN_CORE_INLINE blas_functions open_blas(const std::string& library);

// The process's provider, opened once: KILN_BLAS_LIBRARY's (`none`: no provider; one that
// does not load is an error at the first product), else the first of the defaults that
// loads, else none.
KILN_CORE_INLINE const blas_functions& host_blas();

// Asks the provider for `threads` threads when it is not already at that count.
KILN_CORE_INLINE void blas_threads(const blas_functions& b, int threads);

// The matrix rows x cols with strides (rs, cs) as a row-major CBLAS call reads it; ld 0
// where it cannot (a stride 0, negative or interleaved, a lead past a 32-bit int).
KILN_CORE_INLINE blas_matrix blas_view(std::int64_t rows, std::int64_t cols, std::int64_t rs,
                                       std::int64_t cs);

// The default rule where nothing was tuned.
KILN_CORE_INLINE bool blas_by_default(const gemm_site& s);

// The blocking, threads and provider choice for a product: the tuning database's (through
// the chooser the runtime installs), else the defaults; kiln::set_blas_use overrides the
// provider choice, and there is none where no provider can take the product.
KILN_CORE_INLINE gemm_blocking choose_gemm(const gemm_site& s);

// The product g by the provider, batch element by batch element (operands read in place
// where direct_a / direct_b say so, else packed whole first), each element's epilogue then
// run on it as one pass.
KILN_CORE_INLINE void run_blas_gemm(const blas_functions& lib, const gemm_call<float>& g);
KILN_CORE_INLINE void run_blas_gemm(const blas_functions& lib, const gemm_call<double>& g);

} // namespace detail
} // namespace kiln

#if KILN_CORE_DEFINITIONS
#include "kiln/contractions/blas_impl.hpp"
#endif
