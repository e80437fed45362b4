#pragma once
// The identity of a kernel in the tuning database: a hash of its IR (what it computes,
// its dtypes, access pattern and index width), not of any dialect's source, so a tuned
// choice outlives a change to kiln's code generators and one kernel's records never touch
// another's (triton#9822). Ops are named by their definition's text: name, spellings,
// tunable values and raw body. Reductions add their name and parameter count.
#include "kiln/jit/cache/hash.hpp"
#include "kiln/jit/pipeline/ir.hpp"

namespace kiln::jit::tune {

namespace detail {
inline void add_text(hasher& h, const char* s) { h.add(std::string_view(s ? s : "")); }
inline void add_spelling(hasher& h, const spelling* s, dtype compute) {
  add_text(h, s ? s->pick(compute) : nullptr);
}
} // namespace detail

inline hasher& add_ir(hasher& h, const kernel_ir& ir) {
  auto dtypes = [&](const std::vector<dtype>& v) {
    h.add(v.size());
    for (dtype d : v)
      h.add(static_cast<std::uint8_t>(d));
  };
  h.add(std::string_view("kiln ir 1"));
  dtypes(ir.inputs);
  dtypes(ir.outputs);
  dtypes(ir.scalars);
  h.add(ir.code.size());
  for (const ir_instr& in : ir.code) {
    h.add(static_cast<std::uint8_t>(in.code)).add(static_cast<std::uint8_t>(in.type));
    h.add(static_cast<std::uint8_t>(in.compute)).add(in.nargs).add(in.slot);
    for (auto a : in.args)
      h.add(a);
    if (!in.op) continue;
    const ir_op& op = *in.op;
    detail::add_text(h, op.name);
    detail::add_spelling(h, op.glsl, in.compute);
    detail::add_spelling(h, op.cuda, in.compute);
    detail::add_spelling(h, op.msl, in.compute);
    detail::add_spelling(h, op.device, in.compute);
    for (std::size_t t = 0; t < op.tunable_count; ++t) {
      detail::add_text(h, op.tunables[t].name);
      h.add(op.tunables[t].value);
    }
    if (op.raw) {
      detail::add_text(h, op.raw->inputs);
      detail::add_text(h, op.raw->output);
      detail::add_text(h, op.raw->body);
    }
  }
  h.add(ir.results.size());
  for (auto r : ir.results)
    h.add(r);
  h.add(ir.strided).add(ir.rank).add(ir.wide_index);
  return h;
}

// An elementwise pass's kernel (all its stages: they are one IR split by buffer count).
inline std::string pass_id(const kernel_ir& ir) {
  hasher h;
  return add_ir(h, ir).digest().hex();
}

// A reduction of the lowered expression `ir` by reduction `name`.
inline std::string reduction_id(const kernel_ir& ir, const char* name, int params) {
  hasher h;
  add_ir(h, ir).add(std::string_view(name)).add(params);
  return h.digest().hex();
}

// A contraction whose operands' values the lowered `ir` computes.
inline std::string contraction_id(const kernel_ir& ir) {
  hasher h;
  add_ir(h, ir).add(std::string_view("matmul"));
  return h.digest().hex();
}

} // namespace kiln::jit::tune
