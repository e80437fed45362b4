#pragma once
// Lowering's definitions (declared in lower.hpp; see kiln/linkage.hpp for where they are
// compiled).
#include "kiln/error.hpp"
#include "kiln/half.hpp"
#include "kiln/ir/lower.hpp"

#include <cstring>
#include <string>

namespace kiln::ir {

KILN_CORE_INLINE void leaf_table::add(const device_leaf& l) {
  for (std::size_t s = 0; s < inputs.size(); ++s)
    if (inputs[s].same_as(l)) {
      pattern.push_back(static_cast<std::int16_t>(s));
      return;
    }
  pattern.push_back(static_cast<std::int16_t>(inputs.size()));
  inputs.push_back(l);
}

KILN_CORE_INLINE void leaf_table::add(const scalar_value& v) {
  for (std::size_t s = 0; s < scalars.size(); ++s)
    if (scalars[s].type == v.type && scalars[s].bits == v.bits) {
      pattern.push_back(static_cast<std::int16_t>(-static_cast<int>(s) - 1));
      return;
    }
  if (scalars.size() >= 32767)
    throw error("eval", "too many distinct scalars in one expression",
                std::to_string(scalars.size() + 1) + " (at most 32767)");
  pattern.push_back(static_cast<std::int16_t>(-static_cast<int>(scalars.size()) - 1));
  scalars.push_back(v);
}

// A flat scalar (its value's bytes) as the kernel reads it: 16-bit floats widened to
// float; bool and u8 already zero-extended (flat.hpp copies into a zeroed word).
inline scalar_value kernel_scalar(dtype type, std::uint64_t bits) {
  if (type != dtype::f16 && type != dtype::bf16) return {type, bits};
  const auto b = static_cast<std::uint16_t>(bits);
  const float f =
      type == dtype::f16 ? detail::half_bits_to_float(b) : detail::bfloat16_bits_to_float(b);
  scalar_value s{type};
  std::memcpy(&s.bits, &f, sizeof f);
  return s;
}

KILN_CORE_INLINE void leaf_table::add(const expr_description& e,
                                      std::span<const detail::flat_leaf>& leaves,
                                      std::span<const detail::flat_scalar>& values) {
  std::size_t l = 0, s = 0;
  for (const leaf_desc& d : e.leaves)
    if (d.code == ir_code::load) {
      const detail::flat_leaf& f = leaves[l++];
      add(device_leaf{f.storage, f.layout, f.type});
    } else {
      add(kernel_scalar(d.type, values[s++].bits));
    }
  leaves = leaves.subspan(l);
  values = values.subspan(s);
}

KILN_CORE_INLINE void leaf_table::skip(const expr_description& e,
                                       std::span<const detail::flat_leaf>& leaves,
                                       std::span<const detail::flat_scalar>& values) {
  std::size_t l = 0, s = 0;
  for (const leaf_desc& d : e.leaves)
    ++(d.code == ir_code::load ? l : s);
  leaves = leaves.subspan(l);
  values = values.subspan(s);
}

KILN_CORE_INLINE kernel_ir lower(std::span<const dtype> outs,
                                 const std::vector<std::int16_t>& pattern, bool strided, int rank,
                                 bool wide_index, std::span<const expr_description> exprs) {
  kernel_ir ir;
  ir.outputs.assign(outs.begin(), outs.end());
  ir.strided = strided;
  ir.rank = rank;
  ir.wide_index = wide_index;
  if (outs.size() != exprs.size())
    throw error("eval", "internal: one output dtype per expression is needed",
                std::to_string(outs.size()) + " dtypes for " + std::to_string(exprs.size()));
  std::size_t leaf = 0;
  std::vector<std::int32_t> values; // the value of each node not yet consumed, a stack
  for (std::size_t k = 0; k < exprs.size(); ++k) {
    for (const node_desc& d : exprs[k].nodes) {
      ir_instr in{d.code, d.result, d.compute};
      if (d.code == ir_code::apply) {
        in.nargs = d.nargs;
        const std::size_t first = values.size() - d.nargs;
        for (int a = 0; a < d.nargs; ++a)
          in.args[a] = ir.convert(values[first + a], d.operand[a]);
        values.resize(first);
        in.op = d.op;
        values.push_back(ir.convert(ir.add(in), d.type));
        continue;
      }
      const int p = pattern[leaf++];
      std::vector<dtype>& slots = d.code == ir_code::load ? ir.inputs : ir.scalars;
      in.slot = d.code == ir_code::load ? p : -p - 1;
      if (slots.size() <= static_cast<std::size_t>(in.slot)) slots.resize(in.slot + 1);
      slots[in.slot] = d.type;
      values.push_back(ir.add(in));
    }
    ir.results.push_back(ir.convert(values.back(), outs[k]));
    values.pop_back();
  }
  return ir;
}

} // namespace kiln::ir
