#pragma once
// The reduction templates (reduce_template.hpp) spelled in GLSL: the prologue is
// `kiln_value(i)`, the workgroup size specialization constant 0 (the template's G for reductions).
#include "kiln/kernels/reduce_template.hpp"

namespace kiln::kernels::glsl {

inline const grid_spelling& spelling() {
  static const grid_spelling g{"void main() {",
                               "shared ",
                               "barrier();",
                               "gl_LocalInvocationID.x",
                               {"gl_WorkGroupID.x", "gl_WorkGroupID.y"},
                               {"gl_NumWorkGroups.x", "gl_NumWorkGroups.y"},
                               "kiln_value("};
  return g;
}

} // namespace kiln::kernels::glsl
