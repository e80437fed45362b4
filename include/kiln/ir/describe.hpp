#pragma once
// An expression type as data: its nodes in post-order (children left to right, then the
// node), each with the dtypes lowering needs. The description is a constant made at
// compile time for each expression type; lowering it to the IR (lower.hpp) is ordinary
// code, compiled once per program rather than once per expression type.
#include "kiln/expr.hpp"
#include "kiln/ir/ir.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

namespace kiln::ir {

template <class Op>
inline constexpr raw_source raw_source_of{Op::inputs, Op::output, Op::body};

template <class Op>
constexpr ir_op make_op_info() {
  ir_op o{Op::name, &Op::glsl, &Op::cuda, &Op::msl, &Op::device};
  const std::span<const tunable> ts = detail::tunables_of<Op>();
  o.tunables = ts.data();
  o.tunable_count = ts.size();
  if constexpr (detail::is_raw_op<Op>) o.raw = &raw_source_of<Op>;
  return o;
}

// The type an op's host() gives for these operand compute types; for a device-only op,
// which has none, its rule's result in its compute type.
template <class Op, class... T>
struct op_result {
  using type = compute_t<typename Op::rule::template result<T...>>;
};
template <class Op, class... T>
requires requires { Op::host(std::declval<compute_t<T>>()...); }
struct op_result<Op, T...> {
  using type = decltype(Op::host(std::declval<compute_t<T>>()...));
};
template <class Op>
inline constexpr ir_op op_info = make_op_info<Op>();

// One node. Each computes as the host evaluator does: operands converted to the op's
// operand compute dtypes, the op's host() result, converted to the node's value dtype.
struct node_desc {
  ir_code code = ir_code::load; // load (a tensor leaf), param (a scalar leaf) or apply
  dtype type = dtype::f32;      // the node's value dtype
  dtype result = dtype::f32;    // apply: the dtype of the op's host() result
  dtype compute = dtype::f32;   // the instruction's compute dtype (picks the spelling)
  std::uint8_t nargs = 0;
  std::array<dtype, 3> operand{}; // apply: each operand's compute dtype
  const ir_op* op = nullptr;
};

template <class E>
inline constexpr std::size_t node_count = 1;
template <class Op, class... C>
inline constexpr std::size_t node_count<expr_node<Op, C...>> = (1 + ... + node_count<C>);

template <class E>
struct describer; // put(p): writes E's nodes at p, in post-order, and advances p

template <class T>
struct describer<tensor<T>> {
  static constexpr void put(node_desc*& p) {
    *p++ = {ir_code::load, dtype_of<T>(), dtype_of<T>(), compute_dtype(dtype_of<T>())};
  }
};
template <class T>
struct describer<scalar_expr<T>> {
  static constexpr void put(node_desc*& p) {
    *p++ = {ir_code::param, dtype_of<T>(), dtype_of<T>(), compute_dtype(dtype_of<T>())};
  }
};
template <class Op, class... C>
struct describer<expr_node<Op, C...>> {
  static_assert(sizeof...(C) >= 1 && sizeof...(C) <= 3, "kiln: an op takes 1 to 3 operands");
  template <std::size_t I>
  using operand = typename Op::rule::template operand<I, value_t<C>...>;

  template <std::size_t... I>
  static constexpr node_desc node(std::index_sequence<I...>) {
    using result = typename op_result<Op, operand<I>...>::type;
    node_desc d{ir_code::apply, dtype_of<value_t<expr_node<Op, C...>>>(), dtype_of<result>(),
                compute_dtype(dtype_of<operand<sizeof...(C) - 1>>()),
                static_cast<std::uint8_t>(sizeof...(C))};
    ((d.operand[I] = compute_dtype(dtype_of<operand<I>>())), ...);
    d.op = &op_info<Op>;
    return d;
  }
  static constexpr void put(node_desc*& p) {
    (describer<C>::put(p), ...);
    *p++ = node(std::index_sequence_for<C...>{});
  }
};

template <class E>
inline constexpr std::array<node_desc, node_count<E>> description = [] {
  std::array<node_desc, node_count<E>> a{};
  node_desc* p = a.data();
  describer<E>::put(p);
  return a;
}();

// A leaf in tree order: a tensor (load) or a scalar (param), and its dtype.
struct leaf_desc {
  ir_code code;
  dtype type;
};

template <class E>
inline constexpr std::size_t leaf_total = [] {
  std::size_t n = 0;
  for (const node_desc& d : description<E>)
    n += d.code != ir_code::apply;
  return n;
}();

template <class E>
inline constexpr std::array<leaf_desc, leaf_total<E>> leaf_description = [] {
  std::array<leaf_desc, leaf_total<E>> a{};
  std::size_t k = 0;
  for (const node_desc& d : description<E>)
    if (d.code != ir_code::apply) a[k++] = {d.code, d.type};
  return a;
}();

// What lowering reads of an expression type (its nodes), and what a pass reads to take its
// leaves (only those: a cached pass does not walk the tree).
struct expr_description {
  std::span<const node_desc> nodes;
  std::span<const leaf_desc> leaves;
};

template <class E>
inline constexpr expr_description described{description<E>, leaf_description<E>};

} // namespace kiln::ir
