#pragma once
// MSL code generation: kernel IR -> one `kernel void kiln_kernel` (Metal Shading Language).
// - Arguments: each tensor one `device T* kiln_bN [[buffer(N)]]` (inputs `const device`, IR
//   inputs first, then outputs; not bN, which the reduction templates name values), then the
//   parameter block as ONE struct, `constant kiln_params& P
//   [[buffer(B)]]` with B the buffer count, then the thread indices (uint3 positions; the
//   SIMD-group indices in subgroup reductions). Metal binds 31 buffers: 30 tensors at most
//   (max_buffers; jit/pipeline/stages.hpp splits larger expressions).
// - kiln_params is param_layout's members in its byte order: 8-byte members (64-bit index
//   fields, i64 scalars) first, then 4-byte ones, so MSL's struct has no padding between
//   members and the host packs it with param_layout::pack, as for CUDA and Vulkan. Its size
//   is rounded up to its alignment (8 with any 8-byte member): bind struct_bytes(layout)
//   bytes (setBytes up to 4 KiB, a buffer beyond; the source is the same).
// - 32- or 64-bit index variants (ir.wide_index: int or int64_t, MSL's int and long); a
//   grid of x * y threadgroups flattened x-major and a grid-stride loop, as CUDA.
// - No double in Metal: an IR using f64 anywhere (buffers, scalars, values, compute types,
//   a reduction's accumulator or result) is a kiln::error. The accumulator is
//   chosen outside codegen (jit_backend::reduce, run_reduction.hpp: reduction_info::
//   accumulator(value, has_f64), and param_type, the type of a reduction's run-time
//   parameters): a Metal backend must report f64 as unsupported (unsupported(dtype::f64)
//   non-empty), so that f32 values accumulate in f32 and parameters are f32.
// - Registers use GLSL's type names, as CUDA's (the shared walk, ir_walk.hpp); 16-bit floats
//   are stored as their bits: f16 through as_type<half>, bf16 by bit shifts.
// - Math: math_names.hpp (metal:: functions where MSL has them; kiln's GLSL library for
//   expm1, log1p, cbrt, erf, erfc, fmod), with the ulp bounds listed there.
#include "kiln/jit/codegen/ir_walk.hpp"
#include "kiln/jit/metal/math_names.hpp"
#include "kiln/jit/pipeline/params.hpp"
#include "kiln/jit/pipeline/reduce_spec.hpp"
#include "kiln/kernels/reduce_msl.hpp"

#include <utility>

namespace kiln::jit::metal {

inline constexpr int max_buffers = 30;
// The parameter bytes setBytes takes; a larger block is bound as a buffer instead.
inline constexpr std::uint32_t max_inline_param_bytes = 4096;

inline std::string element(const kernel_ir&, int b, const std::string& index) {
  return "kiln_b" + std::to_string(b) + "[" + index + "]";
}
inline std::string load(dtype d, const std::string& x) {
  if (d == dtype::f16) return "float(as_type<half>(ushort(" + x + ")))";
  return cfamily::load_expr(d, x); // bf16: the bits shifted into a float
}
// v is already rounded to the 16-bit type, so the conversion to half is exact.
inline std::string store(dtype d, const std::string& v) {
  if (d == dtype::f16) return "as_type<ushort>(half(" + v + "))";
  return cfamily::store_expr(d, v);
}

inline const dialect msl_dialect{"MSL", &ir_op::msl, {"int", "int64_t"},          element,
                                 load,  store,       cfamily::literal_style::cpp, "inline ",
                                 true};

// The bytes to bind for the parameter block: param_layout's, rounded up to 8 (at least the
// struct's size in MSL, whatever its alignment).
inline std::uint32_t struct_bytes(const param_layout& l) { return (l.bytes + 7u) & ~7u; }

namespace detail {

// Metal has no 64-bit floats: where an f64 appears, as a clear error.
inline void reject_f64(const kernel_ir& ir,
                       std::initializer_list<std::pair<dtype, const char*>> also) {
  auto fail = [](const std::string& where) {
    throw error("jit", "Metal has no 64-bit floats", "f64 " + where);
  };
  const std::size_t nin = ir.inputs.size();
  for (std::size_t k = 0; k < nin; ++k)
    if (ir.inputs[k] == dtype::f64) fail("in buffer b" + std::to_string(k) + " (an input)");
  for (std::size_t k = 0; k < ir.outputs.size(); ++k)
    if (ir.outputs[k] == dtype::f64) fail("in buffer b" + std::to_string(nin + k) + " (an output)");
  for (std::size_t k = 0; k < ir.scalars.size(); ++k)
    if (ir.scalars[k] == dtype::f64) fail("in scalar parameter p" + std::to_string(k));
  for (std::size_t k = 0; k < ir.code.size(); ++k) {
    const ir_instr& in = ir.code[k];
    if (in.type == dtype::f64 || in.compute == dtype::f64)
      fail(std::string("computing value v") + std::to_string(k) +
           (in.op ? std::string(" (") + in.op->name + ")" : std::string()));
  }
  for (const auto& [d, what] : also)
    if (d == dtype::f64) fail(std::string("as the ") + what);
}

// The kernel's buffer and parameter arguments.
inline std::string arguments(const kernel_ir& ir) {
  const std::size_t nin = ir.inputs.size();
  std::string s;
  for (std::size_t b = 0; b < nin + ir.outputs.size(); ++b) {
    const bool in = b < nin;
    const dtype d = in ? ir.inputs[b] : ir.outputs[b - nin];
    const std::string B = std::to_string(b);
    s += std::string(in ? "const device " : "device ") + cfamily::storage_type(d) + "* kiln_b" + B +
         " [[buffer(" + B + ")]],\n    ";
  }
  return s + "constant kiln_params& P [[buffer(" + std::to_string(nin + ir.outputs.size()) + ")]]";
}

// What a kernel's prologue functions (kiln_value, kiln_a, kiln_b) are called with and
// declare: the input buffers ("kiln_b0, ..."), and those with P as parameters.
inline std::pair<std::string, std::string> prologue_arguments(const kernel_ir& ir) {
  std::string inputs, params;
  for (std::size_t b = 0; b < ir.inputs.size(); ++b) {
    const std::string B = std::to_string(b);
    inputs += "kiln_b" + B + ", ";
    params +=
        std::string("const device ") + cfamily::storage_type(ir.inputs[b]) + "* kiln_b" + B + ", ";
  }
  return {inputs, params + "constant kiln_params& P, "};
}

} // namespace detail

// The include, the type names the shared walk uses, GLSL's bit-cast names for the shared
// conversion helpers, the parameter struct, conversion and math helpers, raw op bodies.
// body: code after the preamble that calls kiln_ math of its own (a reduction's parts).
inline std::string preamble(const kernel_ir& ir, const param_layout& layout,
                            std::initializer_list<dtype> also_used = {},
                            const std::string& body = "") {
  if (static_cast<int>(ir.inputs.size() + ir.outputs.size()) > max_buffers)
    throw error("jit", "more buffers than a Metal kernel binds",
                std::to_string(ir.inputs.size() + ir.outputs.size()) + " buffers; the limit is " +
                    std::to_string(max_buffers) + " (stages.hpp splits larger expressions)");
  auto used = ir.dtypes_used();
  for (dtype d : also_used)
    used[static_cast<int>(d)] = true;
  std::string s = "// kiln: generated MSL\n#include <metal_stdlib>\nusing namespace metal;\n";
  // MSL's names for these; declared again (to the same types) so as not to depend on which
  // header exports them.
  s += "typedef uchar uint8_t;\ntypedef ushort uint16_t;\ntypedef long int64_t;\n"
       "typedef ulong uint64_t;\n";
  s += "inline uint floatBitsToUint(float x) { return as_type<uint>(x); }\n"
       "inline float uintBitsToFloat(uint x) { return as_type<float>(x); }\n"
       "inline float roundEven(float x) { return metal::rint(x); }\n";
  s += "struct kiln_params {\n";
  for (const auto& m : layout.members())
    s += "  " + m + "\n";
  s += "};\n";
  const auto calls = codegen::kernel_math_calls(
      msl_dialect, ir, body, [](const std::string& n) { return find_math_name(n) != nullptr; });
  return s + cfamily::conversion_library(used) + math_source(calls) +
         codegen::raw_functions(ir, msl_dialect.function_prefix);
}

// An elementwise kernel: a grid-stride loop storing every output, walked as the pass's
// shape says (codegen::elementwise_loop; vector units are taken element by element, as in
// GLSL). A shape's workgroup size bounds the threadgroup, as CUDA's launch bounds.
inline std::string generate(const kernel_ir& ir, const param_layout& layout,
                            const pass_shape& shape = {}) {
  detail::reject_f64(ir, {});
  const std::string I = msl_dialect.index_type(ir);
  std::string s = preamble(ir, layout);
  if (shape.workgroup > 0)
    s += "[[max_total_threads_per_threadgroup(" + std::to_string(shape.workgroup) + ")]] ";
  s += "kernel void kiln_kernel(\n    " + detail::arguments(ir) +
       kernels::metal::position_arguments(false) + ") {\n";
  // A grid of x * y threadgroups (launch_grid.hpp), flattened x-major.
  s += "  const " + I + " row = " + I + "(kiln_ngroups.x) * " + I + "(kiln_gsize.x);\n";
  s += "  const " + I + " step = row * " + I + "(kiln_ngroups.y);\n";
  s += "  const " + I + " first = " + I + "(kiln_gid.y) * row + " + I + "(kiln_gid.x) * " + I +
       "(kiln_gsize.x) + " + I + "(kiln_lid.x);\n";
  s += codegen::elementwise_loop(msl_dialect, ir, static_cast<int>(layout.buffers), shape, false);
  return s + "}\n";
}

// A reduction kernel: kiln_value(kiln_b0, ..., P, i) from the IR, then the template of the spec's
// stage. f64 anywhere, the accumulator included, is an error: on Metal, f32 values
// accumulate in f32 (see the header comment for where that is chosen).
inline std::string generate_reduction(const kernel_ir& ir, const param_layout& layout,
                                      const reduce_spec& spec) {
  detail::reject_f64(
      ir, {{spec.acc, "accumulator"}, {spec.result, "result"}, {spec.value, "reduced value"}});
  const auto [inputs, params] = detail::prologue_arguments(ir);
  const bool subgroup = spec.subgroup && spec.stage != reduce_stage::thread;
  const kernels::grid_spelling g =
      kernels::metal::spelling(detail::arguments(ir), inputs, subgroup);
  const std::string body = codegen::reduction_body(msl_dialect, g, ir, spec, params);
  return preamble(ir, layout, {spec.acc, spec.result}, body) + body;
}

// A contraction kernel: kiln_a / kiln_b (taking the input buffers and P, as kiln_value
// does) from the IR, then the tile template. f64 is an error, as for reductions.
inline std::string generate_contraction(const kernel_ir& ir, const param_layout& layout,
                                        const contract_spec& spec) {
  detail::reject_f64(ir, {{spec.acc, "accumulator"}, {spec.result, "result"}});
  const auto [inputs, params] = detail::prologue_arguments(ir);
  const kernels::grid_spelling g = kernels::metal::spelling(detail::arguments(ir), inputs, false);
  const std::string body = codegen::contraction_body(msl_dialect, g, ir, spec, params);
  return preamble(ir, layout, {spec.acc, spec.result}, body) + body;
}

} // namespace kiln::jit::metal
