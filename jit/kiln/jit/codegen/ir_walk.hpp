#pragma once
// The walk of the kernel IR shared by the code generators. GLSL and the CUDA dialect name
// their registers alike (CUDA's source typedefs uint, uint8_t, int64_t... to GLSL's names),
// so what differs between them is small and listed in `dialect`: how a buffer element is
// reached, how 16-bit floats are loaded and stored, float literals in conversions, and which
// of an op's spellings is used. Everything else (index arithmetic, SSA values, the parts of
// a reduction) is written once here.
#include "kiln/error.hpp"
#include "kiln/jit/codegen/c_family.hpp"
#include "kiln/jit/codegen/expand.hpp"
#include "kiln/jit/codegen/raw.hpp"
#include "kiln/jit/pipeline/contract_spec.hpp"
#include "kiln/jit/pipeline/ir.hpp"
#include "kiln/jit/pipeline/pass_shape.hpp"
#include "kiln/jit/pipeline/reduce_spec.hpp"
#include "kiln/kernels/reduce_template.hpp"

#include <set>
#include <string>

namespace kiln::jit {

struct dialect {
  const char* name;                    // for messages: "GLSL", "CUDA", "MSL"
  const spelling* ir_op::*spelling_of; // the op's spelling in this dialect
  const char* index_types[2];          // 32-bit, 64-bit index type
  // Element `index` (a variable of the index type) of buffer b.
  std::string (*element)(const kernel_ir&, int b, const std::string& index);
  std::string (*load)(dtype, const std::string& x);  // stored element -> register
  std::string (*store)(dtype, const std::string& v); // register -> stored element
  cfamily::literal_style literals;                   // float literals in conversions
  const char* function_prefix = "";                  // before a helper function: "inline "
  // Out-parameters (frexp's exponent) are references, as in GLSL and MSL; else pointers.
  bool out_by_reference = false;
  std::string convert(dtype from, dtype to, const std::string& x) const {
    return cfamily::convert_expr(from, to, x, literals);
  }
  const char* index_type(const kernel_ir& ir) const { return index_types[ir.wide_index ? 1 : 0]; }
  // The op's spelling for this compute type: the dialect's own, else the op's shared
  // C-family body; none is a kiln::error naming the op and the dialect (the backend adds
  // the device).
  const char* pick(const ir_op& op, dtype compute) const {
    if (op.raw) return codegen::raw_call(op, compute); // a call of the body's function
    const char* s = (op.*spelling_of)->pick(compute);
    if (!s && op.device) s = op.device->pick(compute);
    if (!s)
      throw error(op.name,
                  std::string("the op has no ") + name + " spelling for " +
                      std::string(kiln::name(compute)) +
                      " (a shared `device` body, or one of this dialect's own)",
                  "");
    return s;
  }
};

namespace codegen {

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

// The SSA values v<k> of the IR, after the buffers' element indices a<b>; only those marked
// in `need` where it is given.
// `replace`: loads of input `replace.slot` are `replace.value` (a register of dtype
// `replace.type`) converted to the load's type instead (a contraction's epilogue reads the
// product so).
struct load_replacement {
  int slot = -1;
  dtype type = dtype::f32;
  std::string value;
};
inline std::string value_code(const dialect& d, const kernel_ir& ir, const std::string& pad,
                              const std::vector<bool>* need = nullptr,
                              const load_replacement& replace = {}) {
  std::string s;
  for (std::size_t v = 0; v < ir.code.size(); ++v) {
    if (need && !(*need)[v]) continue;
    const ir_instr& in = ir.code[v];
    std::string rhs;
    switch (in.code) {
    case ir_code::load:
      rhs = in.slot == replace.slot
                ? d.convert(replace.type, in.type, replace.value)
                : d.load(in.type, d.element(ir, in.slot, "a" + std::to_string(in.slot)));
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
      rhs = expand(d.pick(*in.op, in.compute), args, cfamily::register_type(in.compute), in.op);
      break;
    }
    }
    s += pad + "const " + cfamily::register_type(in.type) + " " +
         var(static_cast<std::int32_t>(v)) + " = " + rhs + ";\n";
  }
  return s;
}

// The body computing element i: each of the first `buffers` buffers' element index a<b>,
// then the SSA values v<k>. Parameters are members of `P`. `lane`: the index of every
// buffer is that variable instead (a flat kernel's vector lanes, elementwise_loop).
inline std::string element_code(const dialect& d, const kernel_ir& ir, int buffers,
                                const std::string& pad, const char* lane = nullptr) {
  const std::string I = d.index_type(ir);
  std::string s;
  if (lane) {
    for (int b = 0; b < buffers; ++b)
      s += pad + "const " + I + " a" + std::to_string(b) + " = " + I + "(" + lane + ");\n";
  } else if (ir.strided) {
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
  return s + value_code(d, ir, pad);
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

// The loop of an elementwise kernel over its elements, after the dialect's entry has
// declared `first` (this invocation's first unit) and `step` (invocations in the grid), in
// the index type. A plain shape takes element `first` and every step-th after; otherwise
// each trip takes per_invocation units a step apart, a unit `vector` adjacent elements.
// With `vector_loads` (CUDA) a flat kernel loads and stores a whole unit of each buffer as
// one vector (kiln_vcopy of its preamble) when every buffer's first element is
// aligned to the vector's size (up to 16 bytes): the kernel checks, and takes the elements
// one by one otherwise, and for the last, partial unit.
inline std::string elementwise_loop(const dialect& d, const kernel_ir& ir, int buffers,
                                    const pass_shape& sh, bool vector_loads) {
  const std::string I = d.index_type(ir);
  auto body = [&](const std::string& pad) {
    return element_code(d, ir, buffers, pad) + store_outputs(d, ir, pad);
  };
  if (sh.plain())
    return "  for (" + I + " i = first; i < P.n; i += step) {\n" + body("    ") + "  }\n";
  const std::string V = I + "(" + std::to_string(sh.vector) + ")";
  std::string s = "  const " + I + " units = (P.n + " + I + "(" + std::to_string(sh.vector - 1) +
                  ")) / " + V + ";\n";
  const bool lanes = vector_loads && sh.vector > 1 && !ir.strided;
  const int nin = static_cast<int>(ir.inputs.size());
  auto bytes = [&](int b) {
    return sh.vector * static_cast<int>(size_of(b < nin ? ir.inputs[b] : ir.outputs[b - nin]));
  };
  if (lanes) {
    s += "  const bool kiln_aligned = true";
    for (int b = 0; b < buffers; ++b)
      s += " &&\n      ((unsigned long long)(P.b" + std::to_string(b) + " + P.o" +
           std::to_string(b) + ") & " + std::to_string(std::min(bytes(b), 16) - 1) + "ull) == 0ull";
    s += ";\n";
  }
  s += "  for (" + I + " u0 = first; u0 < units; u0 += step * " + I + "(" +
       std::to_string(sh.per_invocation) + ")) {\n";
  s += "    for (uint k = 0u; k < " + std::to_string(sh.per_invocation) + "u; ++k) {\n";
  s += "      const " + I + " u = u0 + " + I + "(k) * step;\n";
  s += "      if (u >= units) break;\n";
  s += "      const " + I + " i0 = u * " + V + ";\n";
  s += "      const " + I + " i1 = P.n - i0 < " + V + " ? P.n : i0 + " + V + ";\n";
  const std::string one_by_one =
      "      for (" + I + " i = i0; i < i1; ++i) {\n" + body("        ") + "      }\n";
  if (!lanes) return s + one_by_one + "    }\n  }\n";
  // The lanes: each buffer's unit in a local array (registers, once unrolled).
  dialect ld = d;
  ld.element = [](const kernel_ir&, int b, const std::string& index) {
    return "kiln_l" + std::to_string(b) + "[" + index + "]";
  };
  s += "      if (kiln_aligned && i1 - i0 == " + V + ") {\n";
  for (int b = 0; b < buffers; ++b) {
    const dtype t = b < nin ? ir.inputs[b] : ir.outputs[b - nin];
    const std::string B = std::to_string(b);
    s += "        alignas(16) " + std::string(cfamily::storage_type(t)) + " kiln_l" + B + "[" +
         std::to_string(sh.vector) + "];\n";
    if (b < nin)
      s += "        kiln_vcopy<" + std::to_string(bytes(b)) + ">(kiln_l" + B + ", P.b" + B +
           " + (P.o" + B + " + i0));\n";
  }
  s += "#pragma unroll\n        for (int kv = 0; kv < " + std::to_string(sh.vector) + "; ++kv) {\n";
  s += element_code(ld, ir, buffers, "          ", "kv") + store_outputs(ld, ir, "          ");
  s += "        }\n";
  for (int b = nin; b < buffers; ++b) {
    const std::string B = std::to_string(b);
    s += "        kiln_vcopy<" + std::to_string(bytes(b)) + ">(P.b" + B + " + (P.o" + B +
         " + i0), kiln_l" + B + ");\n";
  }
  s += "      } else {\n" + one_by_one + "      }\n";
  return s + "    }\n  }\n";
}

// The kiln_ math names a kernel calls, for a dialect whose math library `is_math` knows:
// those of its ops' spellings and raw bodies (each must be one of the library's: else a
// kiln::error naming it and the op), and those of `body` (a reduction's parts; a kiln_ name
// there that is not math is the user's own).
template <class IsMath>
std::set<std::string> kernel_math_calls(const dialect& d, const kernel_ir& ir,
                                        const std::string& body, IsMath&& is_math) {
  std::set<std::string> calls;
  auto add = [&](const char* spelling, const char* op) {
    std::set<std::string> own;
    math_calls(spelling, own);
    for (const auto& n : own)
      if (!is_math(n))
        throw error(op, "a device spelling calls " + n + ", which is not in kiln's device math",
                    "kiln_ names are kiln's math functions: kiln_exp, kiln_pow, ...");
    calls.insert(own.begin(), own.end());
  };
  for (const auto& in : ir.code)
    if (in.code == ir_code::apply) {
      add(d.pick(*in.op, in.compute), in.op->name);
      if (in.op->raw) add(raw_body_of(*in.op, in.compute).body.c_str(), in.op->name);
    }
  std::set<std::string> named;
  math_calls(body.c_str(), named);
  for (const auto& n : named)
    if (is_math(n)) calls.insert(n);
  return calls;
}

// The C-family spelling a reduction's device parts are written against (executor.hpp).
class reduction_spelling final : public device_spelling {
public:
  reduction_spelling(const dialect& d, const std::string& I) : d_(d) {
    index = I;
    count = "P.x0";
  }
  std::string type(dtype t) const override { return cfamily::register_type(t); }
  std::string convert(dtype from, dtype to, const std::string& x) const override {
    return "(" + d_.convert(from, to, x) + ")";
  }
  std::string frexp(const std::string& x, const std::string& k) const override {
    // GLSL and MSL pass the exponent as an out parameter (a reference), C++ by pointer.
    const bool ref = d_.literals == cfamily::literal_style::glsl || d_.out_by_reference;
    return "frexp(" + x + ", " + (ref ? k : "&" + k) + ")";
  }
  std::string limit(dtype t, bool lowest) const override {
    if (is_floating(t)) return lowest ? "(-1.0 / 0.0)" : "(1.0 / 0.0)";
    switch (t) {
    case dtype::u8:
      return lowest ? "uint8_t(0)" : "uint8_t(255)";
    case dtype::i32:
      return lowest ? "(-2147483647 - 1)" : "2147483647";
    case dtype::u32:
      return lowest ? "0u" : "4294967295u";
    case dtype::i64:
      return lowest ? "(-9223372036854775807l - 1l)" : "9223372036854775807l";
    default:
      throw error("jit", "no limits for this accumulator dtype", std::string(kiln::name(t)));
    }
  }

  std::string apply(const ir_op& op, dtype compute, const std::string& x) const override {
    const std::string args[1] = {x};
    return expand(d_.pick(op, compute), args, cfamily::register_type(compute), &op);
  }

private:
  const dialect& d_;
};

// Each line of statements s, indented by pad, with a final newline.
inline std::string indented(const std::string& s, const std::string& pad) {
  std::string out = pad;
  for (char c : s) {
    out += c;
    if (c == '\n') out += pad;
  }
  return out + "\n";
}

// The reduction's parts for the kernel templates (kernels/), from its definition's device
// code (reductions/*.hpp). I: the kernel's index type (of `ai`).
inline kernels::reduction_parts reduction_parts_of(const dialect& d, const reduce_spec& r,
                                                   const std::string& I, int param_base = 0) {
  reduction_spelling sp(d, I);
  sp.param_base = param_base;
  sp.tunables = r.tunables;
  const reduction_code c = r.info->device(sp, {r.value, r.acc, r.result});
  kernels::reduction_parts p;
  p.value = cfamily::register_type(r.value);
  p.result = cfamily::register_type(r.result);
  p.acc = cfamily::register_type(r.acc);
  p.init = c.init;
  p.index_init = c.index_init;
  p.init2 = r.info->second ? c.init2 : "";
  if (r.info->second && c.init2.empty())
    throw error(r.info->name, "the reduction's device code has no init2", "it declares `second`");
  p.combine = indented(c.combine, "      ");
  p.merge = indented(c.merge, "        ");
  p.finish = c.finish;
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
  // The run-time parameters are the stage's last scalars (stage_ir).
  auto p = reduction_parts_of(d, spec, I, static_cast<int>(ir.scalars.size()) - spec.params());
  p.store = "      " + d.element(ir, nin, "o") + " = " + d.store(spec.result, "res") + ";\n";
  if (spec.stage == reduce_stage::merge) {
    p.load = "      const " + p.acc + " b = " + d.load(spec.acc, d.element(ir, 0, "k")) + ";\n";
    p.load += "      const " + I + " bi = " +
              (spec.carries_index() ? d.load(index, d.element(ir, 1, "k")) : I + "(-1)") + ";\n";
    if (spec.info->second)
      p.load += "      const " + p.acc +
                " b2 = " + d.load(spec.acc, d.element(ir, spec.carries_index() ? 2 : 1, "k")) +
                ";\n";
    return kernels::reduce_merge(g, I, p, spec.group, spec.subgroup);
  }
  std::string s = value_function(d, ir, spec.value, value_params);
  switch (spec.stage) {
  case reduce_stage::thread:
    return s + kernels::reduce_thread(g, I, p, spec.group);
  case reduce_stage::partial:
    p.partial = "      " + d.element(ir, nin, "w") + " = " + d.store(spec.acc, "a") + ";\n";
    if (spec.carries_index())
      p.partial += "      " + d.element(ir, nin + 1, "w") + " = " + d.store(index, "ai") + ";\n";
    if (spec.info->second)
      p.partial += "      " + d.element(ir, nin + (spec.carries_index() ? 2 : 1), "w") + " = " +
                   d.store(spec.acc, "a2") + ";\n";
    return s + kernels::reduce_group(g, I, p, true, spec.group, spec.subgroup);
  default:
    return s + kernels::reduce_group(g, I, p, false, spec.group, spec.subgroup);
  }
}

// The prologue of one operand of a contraction (contract_spec.hpp): `kiln_a(bt, i, k)`
// (which = 0) or `kiln_b(bt, k, j)` (which = 1), the IR's result `which` at batch element
// bt and that matrix position. The IR walks (batch..., m, n, k); the operand's other matrix
// dim is not its own (its strides there are 0), so it is left out. Only the values the
// result needs are computed, from the buffers they load.
inline std::string contraction_operand(const dialect& d, const kernel_ir& ir, dtype acc, int which,
                                       int batch_rank, const std::string& params = "") {
  const std::string I = d.index_type(ir);
  std::vector<bool> need(ir.code.size(), false);
  need[ir.results[which]] = true;
  std::vector<bool> reads(ir.inputs.size(), false);
  for (std::size_t v = ir.code.size(); v-- > 0;) {
    if (!need[v]) continue;
    const ir_instr& in = ir.code[v];
    if (in.code == ir_code::load) reads[in.slot] = true;
    for (int a = 0; a < in.nargs; ++a)
      need[in.args[a]] = true;
  }
  std::vector<std::string> coord(ir.rank);
  for (int k = 0; k < batch_rank; ++k)
    coord[k] = "c" + std::to_string(k);
  coord[batch_rank + (which == 0 ? 0 : 1)] = which == 0 ? "x" : "y";
  coord[batch_rank + 2] = which == 0 ? "y" : "x";
  std::string s = std::string(cfamily::register_type(acc)) +
                  (which == 0 ? " kiln_a(" : " kiln_b(") + params + "const " + I + " bt, const " +
                  I + " x, const " + I + " y) {\n";
  if (batch_rank > 0) s += "  " + I + " r = bt;\n";
  for (int k = batch_rank - 1; k >= 0; --k) {
    const std::string e = "P.e" + std::to_string(k);
    s += "  const " + I + " c" + std::to_string(k) +
         (k > 0 ? " = r % " + e + "; r /= " + e + ";\n" : " = r;\n");
  }
  for (std::size_t b = 0; b < ir.inputs.size(); ++b) {
    if (!reads[b]) continue;
    const std::string B = std::to_string(b);
    s += "  const " + I + " a" + B + " = P.o" + B;
    for (int k = 0; k < ir.rank; ++k)
      if (!coord[k].empty()) s += " + " + coord[k] + " * P.s" + B + "_" + std::to_string(k);
    s += ";\n";
  }
  s += value_code(d, ir, "  ", &need);
  return s + "  return " + var(ir.results[which]) + ";\n}\n";
}

// A contraction's epilogue at output (bt, gi, gj) (variables of the template's store),
// product value v (the accumulator, in dtype spec.acc): the IR's results 2... over the
// dims (batch..., m, n), reading input spec.product as v converted to the product's dtype,
// each stored in its output through that output's strides.
inline std::string contraction_epilogue(const dialect& d, const kernel_ir& ir,
                                        const contract_spec& spec, const std::string& v) {
  const std::string I = d.index_type(ir);
  const int nb = spec.batch_rank, nin = static_cast<int>(ir.inputs.size());
  std::vector<bool> need(ir.code.size(), false);
  for (std::size_t r = 2; r < ir.results.size(); ++r)
    need[ir.results[r]] = true;
  std::vector<bool> reads(ir.inputs.size(), false);
  for (std::size_t k = ir.code.size(); k-- > 0;) {
    if (!need[k]) continue;
    const ir_instr& in = ir.code[k];
    if (in.code == ir_code::load && in.slot != spec.product) reads[in.slot] = true;
    for (int a = 0; a < in.nargs; ++a)
      need[in.args[a]] = true;
  }
  // Element index of buffer b at (bt, gi, gj): the batch coords c<k>, then rows and cols.
  auto index = [&](int b) {
    const std::string B = std::to_string(b);
    std::string e = "P.o" + B;
    for (int k = 0; k < nb; ++k)
      e += " + c" + std::to_string(k) + " * P.s" + B + "_" + std::to_string(k);
    return e + " + gi * P.s" + B + "_" + std::to_string(nb) + " + gj * P.s" + B + "_" +
           std::to_string(nb + 1);
  };
  const std::string pad = "        ";
  std::string s = "{\n";
  if (nb > 0) s += pad + I + " r = bt;\n";
  for (int k = nb - 1; k >= 0; --k) {
    const std::string e = "P.e" + std::to_string(k);
    s += pad + "const " + I + " c" + std::to_string(k) +
         (k > 0 ? " = r % " + e + "; r /= " + e + ";\n" : " = r;\n");
  }
  for (int b = 0; b < nin; ++b)
    if (reads[b]) s += pad + "const " + I + " a" + std::to_string(b) + " = " + index(b) + ";\n";
  s += value_code(d, ir, pad, &need, {spec.product, spec.acc, v});
  for (std::size_t o = 0; o < ir.outputs.size(); ++o) {
    const int b = nin + static_cast<int>(o);
    s += pad + d.element(ir, b, index(b)) + " = " + d.store(ir.outputs[o], var(ir.results[2 + o])) +
         ";\n";
  }
  return s + "      }";
}

// A contraction kernel after its preamble: both operands' prologues and the tile template
// (kernels/kiln/kernels/contract_template.hpp). Buffers: the IR's inputs, then the product.
// `value_params` declares P and the buffers where they are not global (as for reductions).
inline std::string contraction_body(const dialect& d, const kernels::grid_spelling& g,
                                    const kernel_ir& ir, const contract_spec& spec,
                                    const std::string& value_params = "") {
  const std::string I = d.index_type(ir);
  const int nin = static_cast<int>(ir.inputs.size());
  kernels::contraction_parts p;
  p.acc = cfamily::register_type(spec.acc);
  // The template calls the prologues as the reduction templates call kiln_value.
  const std::string args = g.value_call.substr(g.value_call.find('(') + 1);
  p.value_a = "kiln_a(" + args;
  p.value_b = "kiln_b(" + args;
  p.out = "P.o" + std::to_string(nin);
  p.store = [&d, &ir, &spec, nin](const std::string& at, const std::string& v) {
    return d.element(ir, nin, at) + " = " +
           d.store(spec.result, d.convert(spec.acc, spec.result, v)) + ";";
  };
  if (spec.epilogue(ir))
    p.store = [&](const std::string&, const std::string& v) {
      return contraction_epilogue(d, ir, spec, v);
    };
  if (const std::string why = spec.tile.why_not(); !why.empty())
    throw error("matmul", "a contraction tile the template cannot spell", why);
  return contraction_operand(d, ir, spec.acc, 0, spec.batch_rank, value_params) +
         contraction_operand(d, ir, spec.acc, 1, spec.batch_rank, value_params) +
         kernels::contract_tile_kernel(g, I, p, spec.tile);
}

} // namespace codegen
} // namespace kiln::jit
