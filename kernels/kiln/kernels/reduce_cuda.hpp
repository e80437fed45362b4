#pragma once
// The reduction templates (reduce_template.hpp) spelled in CUDA: the prologue is
// `kiln_value(P, i)`, blocks of G threads (launch bounds $G), warps of 32 for subgroup kernels.
#include "kiln/kernels/reduce_template.hpp"

namespace kiln::kernels::cuda {

// One kiln_shfl for every register type: __shfl_down_sync has float, double, int, unsigned,
// long long... overloads; bool and uint8_t promote to int and convert back.
inline std::string shuffle(const std::string&) {
  return "template <class T> __device__ T kiln_shfl(T x, unsigned h) {\n"
         "  return T(__shfl_down_sync(0xffffffffu, x, h));\n}\n";
}

inline const grid_spelling& spelling() {
  static const grid_spelling g{
      "extern \"C\" __global__ void __launch_bounds__($G) kiln_kernel(const kiln_params P) {",
      "__shared__ ",
      "__syncthreads();",
      "threadIdx.x",
      {"blockIdx.x", "blockIdx.y"},
      {"gridDim.x", "gridDim.y"},
      "kiln_value(P, ",
      "(threadIdx.x & 31u)",
      "(threadIdx.x >> 5)",
      "32u",
      "(blockDim.x >> 5)",
      &shuffle};
  return g;
}

} // namespace kiln::kernels::cuda
