#pragma once
// GLSL of a reduction kernel: the fused prologue kiln_value(i) from the reduced
// expression's IR, then the template in kernels/kiln/kernels/reduce_glsl.hpp with the
// reduction's parts (codegen::reduction_parts_of, shared with the CUDA dialect).
#include "kiln/jit/glsl.hpp"
#include "kiln/jit/reduce_spec.hpp"
#include "kiln/kernels/reduce_glsl.hpp"

namespace kiln::jit::glsl {

// ir: the reduced expression (results[0], of dtype spec.value) over inputs; its one
// output (binding after the inputs) receives the results.
inline std::string generate_reduction(const kernel_ir& ir, const param_layout& layout,
                                      const reduce_spec& spec) {
  const std::string I = index_type(ir);
  const std::size_t nin = ir.inputs.size();
  std::string s = preamble(ir, layout, {spec.acc});
  s += codegen::value_function(glsl_dialect, ir, spec.value);
  auto parts = codegen::reduction_parts_of(glsl_dialect, spec);
  parts.store = "      " + element(ir, static_cast<int>(nin), "o") + " = " +
                store_expr(spec.result, "res") + ";\n";
  s += spec.group ? kernels::glsl::reduce_group(I, parts) : kernels::glsl::reduce_thread(I, parts);
  return s;
}

} // namespace kiln::jit::glsl
