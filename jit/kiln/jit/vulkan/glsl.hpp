#pragma once
// GLSL code generation: kernel IR -> a compute shader (GLSL 4.50 for Vulkan).
// - Buffers: inputs at bindings 0.., outputs after them; 16-bit floats are stored as
//   uint16_t bits and bool as uint8_t, so no float16 arithmetic is needed.
// - Parameters (n, merged extents, per buffer its element offset and strides, scalars) are
//   one block: push constants when they fit, else a storage buffer at the next binding.
// - The workgroup size is specialization constant 0; a grid-stride loop covers any n in at
//   most launch_grid.hpp's loop budget per invocation, and nothing depends on the subgroup
//   size.
// - Registers hold compute types: 16-bit floats as float, already rounded to their type.
#include "kiln/jit/codegen/c_family.hpp"
#include "kiln/jit/codegen/ir_walk.hpp"
#include "kiln/jit/pipeline/ir.hpp"
#include "kiln/jit/pipeline/params.hpp"
#include "kiln/kernels/glsl_math/math.hpp"

#include <cctype>
#include <cstring>
#include <set>
#include <string>

namespace kiln::jit::glsl {

// GLSL speaks the shared C-family vocabulary as it is (its type names are GLSL's).
using namespace cfamily;

using codegen::expand;
using codegen::math_calls;
using codegen::numbered;
using codegen::var;

// Buffer b's element at `index`. GLSL indexes arrays with 32-bit integers; 64-bit indexing
// is for counts and offsets past 2^31, and a buffer's range (at most 4 GiB) keeps each
// element index below 2^32, so it indexes as uint.
inline std::string element(const kernel_ir& ir, int b, const std::string& index) {
  return "b" + std::to_string(b) + ".d[" + (ir.wide_index ? "uint(" + index + ")" : index) + "]";
}

inline const dialect glsl_dialect{"GLSL",    &ir_op::glsl, {"int", "int64_t"}, element,
                                  load_expr, store_expr,   literal_style::glsl};

// Everything before the kernel's body: version, extensions, buffers (IR inputs, then its
// outputs), the parameter block, conversion and math helpers.
// body: code after the preamble that calls math functions of its own (a reduction's parts).
inline std::string preamble(const kernel_ir& ir, const param_layout& layout,
                            std::initializer_list<dtype> also_used = {},
                            const std::string& body = "") {
  auto used = ir.dtypes_used();
  for (dtype d : also_used)
    used[static_cast<int>(d)] = true;
  auto uses = [&](dtype d) { return used[static_cast<int>(d)]; };
  std::string s = "#version 450\n";
  s += "#extension GL_EXT_shader_explicit_arithmetic_types : require\n";
  if (uses(dtype::b8) || uses(dtype::u8)) s += "#extension GL_EXT_shader_8bit_storage : require\n";
  if (uses(dtype::f16) || uses(dtype::bf16))
    s += "#extension GL_EXT_shader_16bit_storage : require\n";
  s += "layout(local_size_x_id = 0) in;\n";
  const std::size_t nin = ir.inputs.size();
  for (std::size_t b = 0; b < nin + ir.outputs.size(); ++b) {
    const bool in = b < nin;
    const dtype d = in ? ir.inputs[b] : ir.outputs[b - nin];
    s += "layout(std430, binding = " + std::to_string(b) + ") " + (in ? "readonly" : "writeonly") +
         " buffer B" + std::to_string(b) + " { " + storage_type(d) + " d[]; } b" +
         std::to_string(b) + ";\n";
  }
  s += layout.declaration(static_cast<int>(nin + ir.outputs.size()));
  std::set<std::string> calls;
  for (const auto& in : ir.code)
    if (in.code == ir_code::apply) {
      math_calls(glsl_dialect.pick(*in.op, in.compute), calls);
    }
  {
    // kiln_ names in the reduction's parts and in raw op bodies that are math functions (any
    // other is the user's, which glslang then reports in the body).
    std::set<std::string> named;
    math_calls(body.c_str(), named);
    codegen::raw_math_calls(ir, named);
    for (const auto& n : named)
      if (has_math(n)) calls.insert(n);
  }
  s += conversion_library(used);
  const std::vector<std::string_view> names(calls.begin(), calls.end());
  if (!names.empty()) {
    if (uses(dtype::f16) || uses(dtype::bf16) || uses(dtype::f32)) s += math_source(names, "float");
    if (uses(dtype::f64)) s += math_source(names, "double");
  }
  return s + codegen::raw_functions(ir, glsl_dialect.function_prefix);
}

inline const char* index_type(const kernel_ir& ir) { return glsl_dialect.index_type(ir); }

// The body computing element i (see codegen::element_code).
inline std::string element_code(const kernel_ir& ir, int buffers, const std::string& pad) {
  return codegen::element_code(glsl_dialect, ir, buffers, pad);
}

// An elementwise kernel: a grid-stride loop storing every output, walked as the pass's
// shape says (codegen::elementwise_loop; the workgroup size is a specialization constant).
inline std::string generate(const kernel_ir& ir, const param_layout& layout,
                            const pass_shape& shape = {}) {
  const std::string I = index_type(ir);
  const std::size_t nin = ir.inputs.size();
  std::string s = preamble(ir, layout);
  s += "void main() {\n";
  // A grid of x * y workgroups (launch_grid.hpp), flattened x-major. Products of the
  // workgroup size (a specialization constant) with runtime values are taken in uint first:
  // converting the constant itself needs the Kernel capability.
  s += "  const " + I + " row = " + I + "(gl_NumWorkGroups.x * gl_WorkGroupSize.x);\n";
  s += "  const " + I + " step = row * " + I + "(gl_NumWorkGroups.y);\n";
  s += "  const " + I + " first = " + I + "(gl_WorkGroupID.y) * row + " + I +
       "(gl_GlobalInvocationID.x);\n";
  s += codegen::elementwise_loop(glsl_dialect, ir, static_cast<int>(nin + ir.outputs.size()), shape,
                                 false);
  return s + "}\n";
}

} // namespace kiln::jit::glsl
