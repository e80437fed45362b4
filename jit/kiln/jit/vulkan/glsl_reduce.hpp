#pragma once
// GLSL of a reduction kernel: the fused prologue kiln_value(i) from the reduced
// expression's IR, then the template in kernels/kiln/kernels/reduce_glsl.hpp with the
// reduction's parts (codegen::reduction_parts_of, shared with the CUDA dialect).
#include "kiln/jit/pipeline/reduce_spec.hpp"
#include "kiln/jit/vulkan/glsl.hpp"
#include "kiln/kernels/reduce_glsl.hpp"

namespace kiln::jit::glsl {

// ir: the reduced expression (results[0], of dtype spec.value) over inputs, and the
// buffers the spec's stage writes (codegen::reduction_body).
inline std::string generate_reduction(const kernel_ir& ir, const param_layout& layout,
                                      const reduce_spec& spec) {
  const std::string body =
      codegen::reduction_body(glsl_dialect, kernels::glsl::spelling(), ir, spec);
  std::string pre = preamble(ir, layout, {spec.acc}, body);
  // Extensions go right after #version, before any declaration.
  if (spec.subgroup && spec.stage != reduce_stage::thread)
    pre.insert(pre.find('\n') + 1, kernels::glsl::subgroup_extensions);
  return pre + body;
}

} // namespace kiln::jit::glsl
