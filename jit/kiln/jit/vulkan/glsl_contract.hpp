#pragma once
// GLSL of a contraction kernel: the operands' prologues kiln_a / kiln_b from the lowered
// IR, then the tile template in kernels/kiln/kernels/contract_template.hpp (spelled by
// reduce_glsl.hpp's grid spelling, shared with the reductions).
#include "kiln/jit/pipeline/contract_spec.hpp"
#include "kiln/jit/vulkan/glsl.hpp"
#include "kiln/kernels/reduce_glsl.hpp"

namespace kiln::jit::glsl {

inline std::string generate_contraction(const kernel_ir& ir, const param_layout& layout,
                                        const contract_spec& spec) {
  const std::string body =
      codegen::contraction_body(glsl_dialect, kernels::glsl::spelling(), ir, spec);
  return preamble(ir, layout, {spec.acc}, body) + body;
}

} // namespace kiln::jit::glsl
