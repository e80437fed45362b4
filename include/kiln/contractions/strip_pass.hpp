#pragma once
// The epilogue of a fused product on the host: the pass that consumes the product (its
// outputs, leaves and kernel, as the host pass receives them) run on one finished strip of
// the product at a time, while the strip is still in cache. Every layout is narrowed to the
// strip, so the pass is the host pass unchanged; compiled once (kiln/linkage.hpp).
#include "kiln/eval/host_pass.hpp"

namespace kiln::detail {

struct strip_pass {
  host_kernel_ref kernel;
  std::span<const host_output> outs;
  std::span<const flat_leaf> leaves;
  std::span<const flat_scalar> scalars;
  kiln::shape shape; // the outputs' shape: the product's
  int batch_rank = 0;
  // Whether the outputs' trailing dims hold the kernel's rows (then cols): a vector form
  // leaves one of them out.
  bool has_rows = true, has_cols = true;
};

// The pass `ctx` (a strip_pass) on rows [i0, i0 + rows) and cols [j0, j0 + cols) of batch
// element `batch`: a gemm_epilogue.
KILN_CORE_INLINE void run_strip(const void* ctx, std::int64_t batch, std::int64_t i0,
                                std::int64_t rows, std::int64_t j0, std::int64_t cols);

} // namespace kiln::detail

#if KILN_CORE_DEFINITIONS
#include "kiln/contractions/strip_pass_impl.hpp"
#endif
