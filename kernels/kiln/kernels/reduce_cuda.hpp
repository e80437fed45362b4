#pragma once
// The reduction templates (reduce_template.hpp) spelled in CUDA: the prologue is
// `kiln_value(P, i)`, blocks of G threads (launch bounds $G).
#include "kiln/kernels/reduce_template.hpp"

namespace kiln::kernels::cuda {

inline const grid_spelling& spelling() {
  static const grid_spelling g{
      "extern \"C\" __global__ void __launch_bounds__($G) kiln_kernel(const kiln_params P) {",
      "__shared__ ",
      "__syncthreads();",
      "threadIdx.x",
      {"blockIdx.x", "blockIdx.y"},
      {"gridDim.x", "gridDim.y"},
      "kiln_value(P, "};
  return g;
}

} // namespace kiln::kernels::cuda
