#pragma once
// The walk of the kernel IR shared by the code generators. GLSL and the CUDA dialect name
// their registers alike (CUDA's source typedefs uint, uint8_t, int64_t... to GLSL's names),
// so what differs between them is small and listed in `dialect`: how a buffer element is
// reached, how 16-bit floats are loaded and stored, float literals in conversions, and which
// of an op's spellings is used. Everything else (index arithmetic, SSA values, the parts of
// a reduction) is written once here.
#include "kiln/error.hpp"
#include "kiln/jit/codegen/c_family.hpp"
#include "kiln/jit/pipeline/ir.hpp"
#include "kiln/jit/pipeline/reduce_spec.hpp"
#include "kiln/kernels/reduce_template.hpp"

#include <string>

namespace kiln::jit {

struct dialect {
  const char* name;                    // for messages: "GLSL", "CUDA"
  const spelling* ir_op::*spelling_of; // the op's spelling in this dialect
  const char* index_types[2];          // 32-bit, 64-bit index type
  // Element `index` (a variable of the index type) of buffer b.
  std::string (*element)(const kernel_ir&, int b, const std::string& index);
  std::string (*load)(dtype, const std::string& x);  // stored element -> register
  std::string (*store)(dtype, const std::string& v); // register -> stored element
  cfamily::literal_style literals;                   // float literals in conversions
  std::string convert(dtype from, dtype to, const std::string& x) const {
    return cfamily::convert_expr(from, to, x, literals);
  }
  const char* index_type(const kernel_ir& ir) const { return index_types[ir.wide_index ? 1 : 0]; }
  // The op's spelling for this compute type; none is a kiln::error naming op and dialect.
  const char* pick(const ir_op& op, dtype compute) const {
    const char* s = (op.*spelling_of)->pick(compute);
    if (!s)
      throw error("jit", std::string("op has no ") + name + " spelling",
                  std::string(op.name) + " on " + std::string(kiln::name(compute)));
    return s;
  }
};

namespace codegen {

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

// The body computing element i: each of the first `buffers` buffers' element index a<b>,
// then the SSA values v<k>. Parameters are members of `P`.
inline std::string element_code(const dialect& d, const kernel_ir& ir, int buffers,
                                const std::string& pad) {
  const std::string I = d.index_type(ir);
  std::string s;
  if (ir.strided) {
    s += pad + I + " r = i;\n";
    for (int k = ir.rank - 1; k >= 0; --k) {
      const std::string c = "c" + std::to_string(k), e = "P.e" + std::to_string(k);
      if (k > 0)
        s += pad + "const " + I + " " + c + " = r % " + e + "; r /= " + e + ";\n";
      else
        s += pad + "const " + I + " " + c + " = r;\n";
    }
    for (int b = 0; b < buffers; ++b) {
      s += pad + "const " + I + " a" + std::to_string(b) + " = P.o" + std::to_string(b);
      for (int k = 0; k < ir.rank; ++k)
        s += " + c" + std::to_string(k) + " * P.s" + std::to_string(b) + "_" + std::to_string(k);
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
      rhs = d.load(in.type, d.element(ir, in.slot, "a" + std::to_string(in.slot)));
      break;
    case ir_code::param:
      rhs = cfamily::param_expr(in.type, "P.p" + std::to_string(in.slot));
      break;
    case ir_code::convert:
      rhs = d.convert(ir.code[in.args[0]].type, in.type, var(in.args[0]));
      break;
    case ir_code::apply: {
      std::string args[3];
      for (int a = 0; a < in.nargs; ++a)
        args[a] = var(in.args[a]);
      // The op computes in `compute`; its result has the host() result type `type`.
      rhs = expand(d.pick(*in.op, in.compute), args, cfamily::register_type(in.compute));
      break;
    }
    }
    s += pad + "const " + cfamily::register_type(in.type) + " " +
         var(static_cast<std::int32_t>(v)) + " = " + rhs + ";\n";
  }
  return s;
}

// Statements storing each output of an elementwise kernel at its index a<b>.
inline std::string store_outputs(const dialect& d, const kernel_ir& ir, const std::string& pad) {
  const int nin = static_cast<int>(ir.inputs.size());
  std::string s;
  for (std::size_t o = 0; o < ir.outputs.size(); ++o) {
    const int b = nin + static_cast<int>(o);
    s += pad + d.element(ir, b, "a" + std::to_string(b)) + " = " +
         d.store(ir.outputs[o], var(ir.results[o])) + ";\n";
  }
  return s;
}

// The reduction's parts for the kernel templates (kernels/): accumulation follows the host
// (reduce.hpp): float sums and products in double where the device has f64, integers in
// i64, NaN propagating through max/min, the first index of the extreme value for
// argmax/argmin (a NaN counts as extreme). Spelled in the names both dialects share.
// I: the kernel's index type (of `ai`).
inline kernels::reduction_parts reduction_parts_of(const dialect& d, const reduce_spec& r,
                                                   const std::string& I) {
  using cfamily::register_type;
  kernels::reduction_parts p;
  p.value = register_type(r.value);
  p.result = register_type(r.result);
  p.acc = register_type(r.acc);
  const std::string A = p.acc;
  const std::string v = "(" + d.convert(r.value, r.acc, "v") + ")";
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
    if (!fl) {
      p.combine = "      a *= " + v + ";\n";
      p.merge = "        a *= b;\n";
      break;
    }
    {
      // As the host (reduce.hpp, scaled_product): ai counts the binary exponent, a is kept
      // within [2^-E, 2^E] and multiplied by each factor's mantissa, so no partial product
      // overflows or underflows. GLSL's frexp takes its exponent as an out parameter.
      p.index_init = "0";
      const std::string k = d.literals == cfamily::literal_style::glsl ? "k" : "&k";
      const std::string E = r.acc == dtype::f64 ? "500" : "60";
      const std::string hi = "ldexp(" + A + "(1), " + E + ")",
                        lo = "ldexp(" + A + "(1), -" + E + ")";
      const std::string rescale = "if (a != " + A + "(0) && !isinf(a) && !isnan(a) && (a > " + hi +
                                  " || a < -" + hi + " || (a < " + lo + " && a > -" + lo +
                                  "))) { int k; a = frexp(a, " + k + "); ai += " + I + "(k); }\n";
      p.combine = "      { const " + A + " x = " + v + ";\n        if (x == " + A +
                  "(0) || isinf(x) || isnan(x)) a *= x;\n        else { int k; a *= frexp(x, " + k +
                  "); ai += " + I + "(k); }\n        " + rescale + "      }\n";
      p.merge = "        a *= b; ai += bi;\n        " + rescale;
    }
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
  if (r.kind == reduce_kind::argmax || r.kind == reduce_kind::argmin)
    p.finish = "int64_t(ai)";
  else if (r.kind == reduce_kind::prod && fl) // ldexp saturates to inf or 0 as it should
    p.finish = d.convert(r.acc, r.result,
                         "ldexp(a, ai > " + I + "(4096) ? 4096 : ai < " + I +
                             "(-4096) ? -4096 : int(ai))");
  else if (r.kind == reduce_kind::mean)
    p.finish = d.convert(r.acc, r.result, "(a / " + A + "(P.x0))");
  else
    p.finish = d.convert(r.acc, r.result, "a");
  return p;
}

// The function `kiln_value(i)` of a reduction: element i of the reduced expression.
// `params` declares P where it is not global (CUDA: "const kiln_params& P, ").
inline std::string value_function(const dialect& d, const kernel_ir& ir, dtype value,
                                  const std::string& params = "") {
  const std::string I = d.index_type(ir);
  std::string s = std::string(cfamily::register_type(value)) + " kiln_value(" + params + "const " +
                  I + " i) {\n";
  s += element_code(d, ir, static_cast<int>(ir.inputs.size()), "  ");
  return s + "  return " + var(ir.results[0]) + ";\n}\n";
}

// A reduction kernel after its preamble: the prologue (none in a merge pass, which reads
// partials) and the template of the spec's stage, with this dialect's loads and stores.
// Buffers: the IR's inputs, then its outputs (the result; or a partial pass's partials,
// reduce_spec.hpp's partial_dtypes; a merge pass reads those as its inputs).
inline std::string reduction_body(const dialect& d, const kernels::grid_spelling& g,
                                  const kernel_ir& ir, const reduce_spec& spec,
                                  const std::string& value_params = "") {
  const std::string I = d.index_type(ir);
  const int nin = static_cast<int>(ir.inputs.size());
  const dtype index = ir.wide_index ? dtype::i64 : dtype::i32;
  auto p = reduction_parts_of(d, spec, I);
  p.store = "      " + d.element(ir, nin, "o") + " = " + d.store(spec.result, "res") + ";\n";
  if (spec.stage == reduce_stage::merge) {
    p.load = "      const " + p.acc + " b = " + d.load(spec.acc, d.element(ir, 0, "k")) + ";\n";
    p.load += "      const " + I + " bi = " +
              (spec.carries_index() ? d.load(index, d.element(ir, 1, "k")) : I + "(-1)") + ";\n";
    return kernels::reduce_merge(g, I, p);
  }
  std::string s = value_function(d, ir, spec.value, value_params);
  switch (spec.stage) {
  case reduce_stage::thread:
    return s + kernels::reduce_thread(g, I, p);
  case reduce_stage::partial:
    p.partial = "      " + d.element(ir, nin, "w") + " = " + d.store(spec.acc, "a") + ";\n";
    if (spec.carries_index())
      p.partial += "      " + d.element(ir, nin + 1, "w") + " = " + d.store(index, "ai") + ";\n";
    return s + kernels::reduce_group(g, I, p, true);
  default:
    return s + kernels::reduce_group(g, I, p, false);
  }
}

} // namespace codegen
} // namespace kiln::jit
