#pragma once
// The reduction templates (reduce_template.hpp) spelled in GLSL: the prologue is
// `kiln_value(i)`, the workgroup size specialization constant 0 (the template's G for reductions).
// Subgroup kernels need GL_KHR_shader_subgroup_basic and _shuffle_relative (subgroup_extensions).
#include "kiln/kernels/reduce_template.hpp"

namespace kiln::kernels::glsl {

inline constexpr const char* subgroup_extensions =
    "#extension GL_KHR_shader_subgroup_basic : require\n"
    "#extension GL_KHR_shader_subgroup_shuffle_relative : require\n";

// kiln_shfl for register type t. 64-bit and 8-bit integers travel as 32-bit words, so no
// shader takes shaderSubgroupExtendedTypes (which 64-bit indices and sums would need).
inline std::string shuffle(const std::string& t) {
  const std::string head = t + " kiln_shfl(" + t + " x, uint h) { return ";
  if (t == "int64_t")
    return head + "int64_t(pack64(subgroupShuffleDown(unpack32(uint64_t(x)), h))); }\n";
  if (t == "uint8_t") return head + "uint8_t(subgroupShuffleDown(uint(x), h)); }\n";
  return head + "subgroupShuffleDown(x, h); }\n"; // float, double, int, uint, bool
}

inline const grid_spelling& spelling() {
  static const grid_spelling g{"void main() {",
                               "shared ",
                               "barrier();",
                               "gl_LocalInvocationID.x",
                               {"gl_WorkGroupID.x", "gl_WorkGroupID.y"},
                               {"gl_NumWorkGroups.x", "gl_NumWorkGroups.y"},
                               "kiln_value(",
                               "gl_SubgroupInvocationID",
                               "gl_SubgroupID",
                               "gl_SubgroupSize",
                               "gl_NumSubgroups",
                               &shuffle};
  return g;
}

} // namespace kiln::kernels::glsl
