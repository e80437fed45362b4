#pragma once
// GLSL code generation: kernel IR -> a compute shader (GLSL 4.50 for Vulkan).
// - Buffers: inputs at bindings 0.., outputs after them; 16-bit floats are stored as
//   uint16_t bits and bool as uint8_t, so no float16 arithmetic is needed.
// - Parameters (n, merged extents, per buffer its element offset and strides, scalars) are
//   one block: push constants when they fit, else a storage buffer at the next binding.
// - The workgroup size is specialization constant 0; a grid-stride loop covers any n, and
//   nothing depends on the subgroup size.
// - Registers hold compute types: 16-bit floats as float, already rounded to their type.
#include "kiln/jit/glsl_convert.hpp"
#include "kiln/jit/glsl_math.hpp"
#include "kiln/jit/ir.hpp"
#include "kiln/jit/params.hpp"

#include <cctype>
#include <cstring>
#include <set>
#include <string>

namespace kiln::jit::glsl {

// Replaces $0 $1 $2 with the operands and $T with the compute type.
inline std::string expand(const char* pattern, const std::string* args, const char* type) {
  std::string out;
  for (const char* p = pattern; *p; ++p) {
    if (*p == '$' && p[1] >= '0' && p[1] <= '2') {
      out += args[p[1] - '0'];
      ++p;
    } else if (*p == '$' && p[1] == 'T') {
      out += type;
      ++p;
    } else {
      out += *p;
    }
  }
  return out;
}

// The names of kiln_ library functions a spelling calls.
inline void math_calls(const char* s, std::set<std::string>& names) {
  for (const char* p = std::strstr(s, "kiln_"); p; p = std::strstr(p + 1, "kiln_")) {
    const char* e = p;
    while (std::isalnum(static_cast<unsigned char>(*e)) || *e == '_')
      ++e;
    names.insert(std::string(p, e));
    p = e - 1;
  }
}

inline std::string var(std::int32_t v) { return "v" + std::to_string(v); }

// The source with line numbers, for error messages.
inline std::string numbered(const std::string& src) {
  std::string out;
  int line = 1;
  std::size_t start = 0;
  while (start < src.size()) {
    const std::size_t end = src.find('\n', start);
    out += std::to_string(line++) + ": " +
           src.substr(start, end == std::string::npos ? std::string::npos : end - start + 1);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

// Everything before the kernel's body: version, extensions, buffers (IR inputs, then its
// outputs), the parameter block, conversion and math helpers.
inline std::string preamble(const kernel_ir& ir, const param_layout& layout,
                            std::initializer_list<dtype> also_used = {}) {
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
      const char* sp = in.op->glsl->pick(in.compute);
      if (!sp)
        throw error("jit", "op has no GLSL spelling",
                    std::string(in.op->name) + " on " + std::string(name(in.compute)));
      math_calls(sp, calls);
    }
  s += conversion_library(used);
  const std::vector<std::string_view> names(calls.begin(), calls.end());
  if (!names.empty()) {
    if (uses(dtype::f16) || uses(dtype::bf16) || uses(dtype::f32)) s += math_source(names, "float");
    if (uses(dtype::f64)) s += math_source(names, "double");
  }
  return s;
}

inline const char* index_type(const kernel_ir& ir) { return ir.wide_index ? "int64_t" : "int"; }
// Buffer b's element for this i. GLSL indexes arrays with 32-bit integers; 64-bit indexing
// is for counts and offsets past 2^31, and a buffer's range (at most 4 GiB) keeps each
// element index below 2^32, so it indexes as uint.
inline std::string at(const kernel_ir& ir, int b) {
  const std::string a = "a" + std::to_string(b);
  return ir.wide_index ? "uint(" + a + ")" : a;
}

// The body computing element i: each of the first `buffers` buffers' element index a<b>,
// then the SSA values v<k>.
inline std::string element_code(const kernel_ir& ir, int buffers, const std::string& pad) {
  const std::string I = index_type(ir);
  std::string s;
  if (ir.strided) {
    s += pad + I + " r = i;\n";
    for (int d = ir.rank - 1; d >= 0; --d) {
      const std::string c = "c" + std::to_string(d), e = "P.e" + std::to_string(d);
      if (d > 0)
        s += pad + "const " + I + " " + c + " = r % " + e + "; r /= " + e + ";\n";
      else
        s += pad + "const " + I + " " + c + " = r;\n";
    }
    for (int b = 0; b < buffers; ++b) {
      s += pad + "const " + I + " a" + std::to_string(b) + " = P.o" + std::to_string(b);
      for (int d = 0; d < ir.rank; ++d)
        s += " + c" + std::to_string(d) + " * P.s" + std::to_string(b) + "_" + std::to_string(d);
      s += ";\n";
    }
  } else {
    for (int b = 0; b < buffers; ++b)
      s += pad + "const " + I + " a" + std::to_string(b) + " = P.o" + std::to_string(b) + " + i;\n";
  }
  for (std::size_t v = 0; v < ir.code.size(); ++v) {
    const ir_instr& in = ir.code[v];
    std::string rhs;
    switch (in.code) {
    case ir_code::load:
      rhs = load_expr(in.type, "b" + std::to_string(in.slot) + ".d[" + at(ir, in.slot) + "]");
      break;
    case ir_code::param:
      rhs = param_expr(in.type, "P.p" + std::to_string(in.slot));
      break;
    case ir_code::convert:
      rhs = convert_expr(ir.code[in.args[0]].type, in.type, var(in.args[0]));
      break;
    case ir_code::apply: {
      std::string args[3];
      for (int a = 0; a < in.nargs; ++a)
        args[a] = var(in.args[a]);
      // The op computes in `compute`; its result has the host() result type `type`.
      rhs = expand(in.op->glsl->pick(in.compute), args, register_type(in.compute));
      break;
    }
    }
    s += pad + "const " + register_type(in.type) + " " + var(static_cast<std::int32_t>(v)) + " = " +
         rhs + ";\n";
  }
  return s;
}

// An elementwise kernel: a grid-stride loop storing every output.
inline std::string generate(const kernel_ir& ir, const param_layout& layout) {
  const std::string I = index_type(ir);
  const std::size_t nin = ir.inputs.size();
  std::string s = preamble(ir, layout);
  s += "void main() {\n";
  s += "  // The product in uint first: converting the spec constant itself needs Kernel "
       "capability.\n"
       "  const " +
       I + " step = " + I + "(gl_NumWorkGroups.x * gl_WorkGroupSize.x);\n";
  s += "  for (" + I + " i = " + I + "(gl_GlobalInvocationID.x); i < P.n; i += step) {\n";
  s += element_code(ir, static_cast<int>(nin + ir.outputs.size()), "    ");
  for (std::size_t o = 0; o < ir.outputs.size(); ++o) {
    const std::string b = std::to_string(nin + o);
    s += "    b" + b + ".d[" + at(ir, static_cast<int>(nin + o)) +
         "] = " + store_expr(ir.outputs[o], var(ir.results[o])) + ";\n";
  }
  s += "  }\n}\n";
  return s;
}

} // namespace kiln::jit::glsl
