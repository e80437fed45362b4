#pragma once
// The reduction kernel template in GLSL. The JIT splices in the fused prologue — a function
// `kiln_value(i)` computing element i of the reduced expression, where the iteration runs
// over (kept dims..., reduced dims...) so element o * count + r is output o's r-th input —
// and the reduction's accumulator type, identity, combine, merge and finish.
//   group:  one workgroup (64 invocations) per output, a strided partial per invocation,
//           then a tree over shared memory (no subgroup size assumed); for long reductions.
//   thread: one invocation per output, a sequential loop; for short ones.
// Parameters: P.x0 = count (inputs per output), P.x1 = number of outputs.
#include "kiln/kernels/reduction_parts.hpp"

namespace kiln::kernels::glsl {

using kernels::reduction_parts;

inline constexpr int reduce_group_size = 64;

inline std::string reduce_group(const std::string& index, const reduction_parts& p) {
  const std::string& I = index;
  return "shared " + p.acc + " kiln_sa[64];\nshared " + I + " kiln_si[64];\n" +
         "void main() {\n"
         "  const uint lid = gl_LocalInvocationID.x;\n"
         "  for (" +
         I + " o = " + I + "(gl_WorkGroupID.x); o < P.x1; o += " + I +
         "(gl_NumWorkGroups.x)) {\n"
         "    " +
         p.acc + " a = " + p.init +
         ";\n"
         "    " +
         I + " ai = " + I +
         "(-1);\n"
         "    for (" +
         I + " r = " + I + "(lid); r < P.x0; r += " + I +
         "(64)) {\n"
         "      const " +
         p.value + " v = kiln_value(o * P.x0 + r);\n" + p.combine +
         "    }\n"
         "    kiln_sa[lid] = a;\n"
         "    kiln_si[lid] = ai;\n"
         "    barrier();\n"
         "    for (uint h = 32u; h > 0u; h >>= 1) {\n"
         "      if (lid < h) {\n"
         "        a = kiln_sa[lid];\n"
         "        ai = kiln_si[lid];\n"
         "        const " +
         p.acc +
         " b = kiln_sa[lid + h];\n"
         "        const " +
         I + " bi = kiln_si[lid + h];\n" + p.merge +
         "        kiln_sa[lid] = a;\n"
         "        kiln_si[lid] = ai;\n"
         "      }\n"
         "      barrier();\n"
         "    }\n"
         "    if (lid == 0u) {\n"
         "      a = kiln_sa[0];\n"
         "      ai = kiln_si[0];\n"
         "      const " +
         p.result + " res = " + p.finish + ";\n" + p.store +
         "    }\n"
         "    barrier();\n"
         "  }\n"
         "}\n";
}

inline std::string reduce_thread(const std::string& index, const reduction_parts& p) {
  const std::string& I = index;
  return "void main() {\n"
         "  // The product in uint first: converting the spec constant itself needs Kernel "
         "capability.\n"
         "  const " +
         I + " step = " + I +
         "(gl_NumWorkGroups.x * gl_WorkGroupSize.x);\n"
         "  for (" +
         I + " o = " + I +
         "(gl_GlobalInvocationID.x); o < P.x1; o += step) {\n"
         "    " +
         p.acc + " a = " + p.init +
         ";\n"
         "    " +
         I + " ai = " + I +
         "(-1);\n"
         "    for (" +
         I + " r = " + I +
         "(0); r < P.x0; ++r) {\n"
         "      const " +
         p.value + " v = kiln_value(o * P.x0 + r);\n" + p.combine +
         "    }\n"
         "    const " +
         p.result + " res = " + p.finish + ";\n" + p.store +
         "  }\n"
         "}\n";
}

} // namespace kiln::kernels::glsl
