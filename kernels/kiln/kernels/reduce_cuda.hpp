#pragma once
// The reduction kernel template in the CUDA dialect, with the hooks of reduce_glsl.hpp: the
// JIT splices in `kiln_value(P, i)` (element i of the reduced expression, iterating over
// (kept dims..., reduced dims...) so element o * count + r is output o's r-th input) and
// the reduction's parts (reduction_parts.hpp).
//   group:  a block of 64 threads per output, a strided partial per thread, then a tree
//           over shared memory; for long reductions.
//   thread: a thread per output, a sequential loop; for short ones.
// Parameters: P.x0 = count (inputs per output), P.x1 = number of outputs.
#include "kiln/kernels/reduction_parts.hpp"

namespace kiln::kernels::cuda {

inline constexpr int reduce_block_size = 64;

inline std::string reduce_group(const std::string& I, const reduction_parts& p) {
  std::string s =
      "extern \"C\" __global__ void __launch_bounds__(64) kiln_kernel(const kiln_params P) {\n";
  s += "  __shared__ " + p.acc + " kiln_sa[64];\n  __shared__ " + I + " kiln_si[64];\n";
  s += "  const unsigned lid = threadIdx.x;\n";
  s += "  for (" + I + " o = blockIdx.x; o < P.x1; o += gridDim.x) {\n";
  s += "    " + p.acc + " a = " + p.init + ";\n    " + I + " ai = -1;\n";
  s += "    for (" + I + " r = lid; r < P.x0; r += 64) {\n";
  s += "      const " + p.value + " v = kiln_value(P, o * P.x0 + r);\n" + p.combine + "    }\n";
  s += "    kiln_sa[lid] = a;\n    kiln_si[lid] = ai;\n    __syncthreads();\n";
  // The tree: each step halves the live partials; a barrier per step, none on a warp.
  s += "    for (unsigned h = 32; h > 0; h >>= 1) {\n      if (lid < h) {\n";
  s += "        a = kiln_sa[lid];\n        ai = kiln_si[lid];\n";
  s += "        const " + p.acc + " b = kiln_sa[lid + h];\n        const " + I +
       " bi = kiln_si[lid + h];\n" + p.merge;
  s += "        kiln_sa[lid] = a;\n        kiln_si[lid] = ai;\n      }\n      __syncthreads();\n"
       "    }\n";
  s += "    if (lid == 0) {\n      a = kiln_sa[0];\n      ai = kiln_si[0];\n";
  s += "      const " + p.result + " res = " + p.finish + ";\n" + p.store + "    }\n";
  // The next output reuses the shared arrays: nobody writes them before thread 0 has read.
  s += "    __syncthreads();\n  }\n}\n";
  return s;
}

inline std::string reduce_thread(const std::string& I, const reduction_parts& p) {
  std::string s = "extern \"C\" __global__ void kiln_kernel(const kiln_params P) {\n";
  s += "  const " + I + " step = " + I + "(gridDim.x) * blockDim.x;\n";
  s += "  for (" + I + " o = " + I +
       "(blockIdx.x) * blockDim.x + threadIdx.x; o < P.x1; o += step) {\n";
  s += "    " + p.acc + " a = " + p.init + ";\n    " + I + " ai = -1;\n";
  s += "    for (" + I + " r = 0; r < P.x0; ++r) {\n";
  s += "      const " + p.value + " v = kiln_value(P, o * P.x0 + r);\n" + p.combine + "    }\n";
  s += "    const " + p.result + " res = " + p.finish + ";\n" + p.store + "  }\n}\n";
  return s;
}

} // namespace kiln::kernels::cuda
