#pragma once
// Lowering: an expression (type and leaves) to the kernel IR. The IR depends on the
// expression's type and on which leaves are the same tensor (`pattern`); both are part of
// the specialization key, so lowering runs once per key (lowering_table in executor.hpp).
// Each node computes as the host evaluator does: children converted to the op's operand
// compute type, the op's host() result type, converted to the node's value type.
#include "kiln/executor.hpp"
#include "kiln/ir/ir.hpp"
#include "kiln/tensor.hpp"

#include <boost/hana/for_each.hpp>
#include <cstring>

namespace kiln::ir {

template <class Op>
inline constexpr ir_op op_info = {Op::name, &Op::glsl, &Op::cuda, &Op::msl};

// A scalar parameter's value: its dtype and bytes as the kernel reads them (16-bit floats
// are passed as float, bool and u8 as u32).
struct scalar_value {
  dtype type;
  std::uint64_t bits = 0;
};

template <element T>
scalar_value make_scalar(T v) {
  scalar_value s{dtype_of<T>()};
  if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
    const float f = static_cast<float>(v);
    std::memcpy(&s.bits, &f, sizeof f);
  } else if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, std::uint8_t>) {
    s.bits = static_cast<std::uint32_t>(v);
  } else {
    std::memcpy(&s.bits, &v, sizeof v);
  }
  return s;
}

// The leaves of an expression in for_each_leaf order, with equal ones merged: `pattern`
// gives each occurrence's input slot; `inputs` holds one leaf per slot.
struct leaf_table {
  std::vector<device_leaf> inputs;
  std::vector<std::int16_t> pattern; // per leaf in tree order: buffer s, or scalar s as -(s + 1)
  std::vector<scalar_value> scalars;

  void add(const device_leaf& l) {
    for (std::size_t s = 0; s < inputs.size(); ++s)
      if (inputs[s].same_as(l)) {
        pattern.push_back(static_cast<std::int16_t>(s));
        return;
      }
    pattern.push_back(static_cast<std::int16_t>(inputs.size()));
    inputs.push_back(l);
  }
  // Scalars of one dtype and bit pattern share a parameter: a gradient tree repeats the
  // constants of its function in every copy of a subtree, and with one parameter each the
  // copies could not merge as common subexpressions (examples/greeks.cpp: 770 parameters,
  // 19 erfc per element). Which scalars are equal is part of the pattern, so the kernel of
  // one pattern never runs on values of another.
  void add(const scalar_value& v) {
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
};

template <element T>
void collect(const tensor<T>& t, leaf_table& lt) {
  lt.add({t.storage().get(), &t.layout(), dtype_of<T>()});
}
template <element T>
void collect(const scalar_expr<T>& s, leaf_table& lt) {
  lt.add(make_scalar(s.value));
}
template <class Op, class... C>
void collect(const expr_node<Op, C...>& n, leaf_table& lt) {
  hana::for_each(n.children, [&](const auto& c) { collect(c, lt); });
}

struct lower_state {
  kernel_ir& ir;
  const std::vector<std::int16_t>& pattern;
  std::size_t leaf = 0;
};

template <element T>
std::int32_t lower_expr(const tensor<T>&, lower_state& st) {
  const auto slot = st.pattern[st.leaf++];
  if (st.ir.inputs.size() <= static_cast<std::size_t>(slot)) st.ir.inputs.resize(slot + 1);
  st.ir.inputs[slot] = dtype_of<T>();
  ir_instr in{ir_code::load, dtype_of<T>(), compute_dtype(dtype_of<T>())};
  in.slot = slot;
  return st.ir.add(in);
}
template <element T>
std::int32_t lower_expr(const scalar_expr<T>&, lower_state& st) {
  const int slot = -st.pattern[st.leaf++] - 1;
  if (st.ir.scalars.size() <= static_cast<std::size_t>(slot)) st.ir.scalars.resize(slot + 1);
  st.ir.scalars[slot] = dtype_of<T>();
  ir_instr in{ir_code::param, dtype_of<T>(), compute_dtype(dtype_of<T>())};
  in.slot = slot;
  return st.ir.add(in);
}
template <class Op, class... C>
std::int32_t lower_expr(const expr_node<Op, C...>& n, lower_state& st) {
  using node = expr_node<Op, C...>;
  return hana::unpack(n.children, [&](const auto&... c) {
    // Children lower left to right (a braced list sequences them).
    const std::array<std::int32_t, sizeof...(C)> kids{lower_expr(c, st)...};
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      using result = decltype(Op::host(
          std::declval<compute_t<typename Op::rule::template operand<I, value_t<C>...>>>()...));
      ir_instr in{
          ir_code::apply, dtype_of<result>(),
          compute_dtype(
              dtype_of<typename Op::rule::template operand<sizeof...(C) - 1, value_t<C>...>>())};
      in.nargs = static_cast<std::uint8_t>(sizeof...(C));
      ((in.args[I] = st.ir.convert(
            kids[I],
            compute_dtype(dtype_of<typename Op::rule::template operand<I, value_t<C>...>>()))),
       ...);
      in.op = &op_info<Op>;
      return st.ir.convert(st.ir.add(in), dtype_of<typename node::value_type>());
    }
    (std::index_sequence_for<C...>{});
  });
}

// The IR of a pass: outputs of dtypes `outs` computing `exprs` (each already collected
// into the one leaf table whose pattern is given).
template <class... E>
kernel_ir lower(const std::vector<dtype>& outs, const std::vector<std::int16_t>& pattern,
                bool strided, int rank, bool wide_index, const E&... exprs) {
  kernel_ir ir;
  ir.outputs = outs;
  ir.strided = strided;
  ir.rank = rank;
  ir.wide_index = wide_index;
  lower_state st{ir, pattern};
  std::size_t k = 0;
  ((ir.results.push_back(ir.convert(lower_expr(exprs, st), outs[k])), ++k), ...);
  return ir;
}

} // namespace kiln::ir
