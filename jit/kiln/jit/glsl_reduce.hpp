#pragma once
// GLSL of a reduction kernel: the fused prologue kiln_value(i) from the reduced
// expression's IR, then the template in kernels/kiln/kernels/reduce_glsl.hpp with the
// reduction's parts. Accumulation follows the host (reduce.hpp): float sums and products
// in double where the device has f64, integers in i64, NaN propagating through max/min,
// the first index of the extreme value for argmax/argmin (a NaN counts as extreme).
#include "kiln/jit/glsl.hpp"
#include "kiln/jit/reduce_spec.hpp"
#include "kiln/kernels/reduce_glsl.hpp"

namespace kiln::jit::glsl {

inline kernels::glsl::reduction_parts reduction_parts_of(const reduce_spec& r) {
  kernels::glsl::reduction_parts p;
  const dtype vc = compute_dtype(r.value);
  p.value = register_type(r.value);
  p.result = register_type(r.result);
  p.acc = register_type(r.acc);
  const std::string A = p.acc;
  const std::string v = "(" + convert_expr(r.value, r.acc, "v") + ")";
  const bool fl = is_floating(r.acc);
  const bool extreme_max = r.kind == reduce_kind::max || r.kind == reduce_kind::argmax;
  // Identity of max/min: -inf/+inf for floats, the type's limits for integers.
  auto limit = [&](bool low) -> std::string {
    if (fl) return low ? "(-1.0 / 0.0)" : "(1.0 / 0.0)";
    switch (r.acc) {
    case dtype::u8:
      return low ? "uint8_t(0)" : "uint8_t(255)";
    case dtype::i32:
      return low ? "(-2147483647 - 1)" : "2147483647";
    case dtype::u32:
      return low ? "0u" : "4294967295u";
    case dtype::i64:
      return low ? "(-9223372036854775807l - 1l)" : "9223372036854775807l";
    default:
      return "0";
    }
  };
  const std::string better = extreme_max ? "a < x" : "x < a"; // x replaces a
  const std::string nan_a = fl ? "isnan(a)" : "false", nan_x = fl ? "isnan(x)" : "false";
  switch (r.kind) {
  case reduce_kind::sum:
  case reduce_kind::mean:
    p.init = A + "(0)";
    p.combine = "      a += " + v + ";\n";
    p.merge = "        a += b;\n";
    break;
  case reduce_kind::prod:
    p.init = A + "(1)";
    p.combine = "      a *= " + v + ";\n";
    p.merge = "        a *= b;\n";
    break;
  case reduce_kind::max:
  case reduce_kind::min: {
    p.init = A + "(" + limit(extreme_max) + ")";
    const std::string step = "if (" + nan_x + " || " + nan_a + ") { if (!(" + nan_a +
                             ")) a = x; } else if (" + better + ") a = x;\n";
    p.combine = "      { const " + A + " x = " + v + "; " + step + "      }\n";
    p.merge = "        { const " + A + " x = b; " + step + "        }\n";
    break;
  }
  case reduce_kind::argmax:
  case reduce_kind::argmin:
    p.init = A + "(" + limit(extreme_max) + ")";
    p.combine = "      { const " + A + " x = " + v + ";\n        if (ai < 0 || (!(" + nan_a +
                ") && ((" + nan_x + ") || " + better + "))) { a = x; ai = r; } }\n";
    p.merge = "        { const " + A +
              " x = b; bool take;\n"
              "          if (bi < 0) take = false; else if (ai < 0) take = true;\n"
              "          else if ((" +
              nan_a + ") && (" + nan_x +
              ")) take = bi < ai;\n"
              "          else if (" +
              nan_a + ") take = false; else if (" + nan_x +
              ") take = true;\n"
              "          else if (a == x) take = bi < ai; else take = " +
              better +
              ";\n"
              "          if (take) { a = x; ai = bi; } }\n";
    break;
  case reduce_kind::all:
    p.init = "true";
    p.combine = "      a = a && " + v + ";\n";
    p.merge = "        a = a && b;\n";
    break;
  case reduce_kind::any:
    p.init = "false";
    p.combine = "      a = a || " + v + ";\n";
    p.merge = "        a = a || b;\n";
    break;
  }
  (void)vc;
  if (r.kind == reduce_kind::argmax || r.kind == reduce_kind::argmin)
    p.finish = "int64_t(ai)";
  else if (r.kind == reduce_kind::mean)
    p.finish = convert_expr(r.acc, r.result, "(a / " + A + "(P.x0))");
  else
    p.finish = convert_expr(r.acc, r.result, "a");
  return p;
}

// ir: the reduced expression (results[0], of dtype spec.value) over inputs; its one
// output (binding after the inputs) receives the results.
inline std::string generate_reduction(const kernel_ir& ir, const param_layout& layout,
                                      const reduce_spec& spec) {
  const std::string I = index_type(ir);
  const std::size_t nin = ir.inputs.size();
  std::string s = preamble(ir, layout, {spec.acc});
  s += std::string(register_type(spec.value)) + " kiln_value(const " + I + " i) {\n";
  s += element_code(ir, static_cast<int>(nin), "  ");
  s += "  return " + var(ir.results[0]) + ";\n}\n";
  auto parts = reduction_parts_of(spec);
  parts.store = "      b" + std::to_string(nin) + ".d[" + (ir.wide_index ? "uint(o)" : "o") +
                "] = " + store_expr(spec.result, "res") + ";\n";
  s += spec.group ? kernels::glsl::reduce_group(I, parts) : kernels::glsl::reduce_thread(I, parts);
  return s;
}

} // namespace kiln::jit::glsl
