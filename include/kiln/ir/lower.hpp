#pragma once
// Lowering: an expression (its description, describe.hpp, and its leaves) to the kernel IR.
// The IR depends on the expression's type and on which leaves are the same tensor
// (`pattern`); both are part of the specialization key, so lowering runs once per key
// (lowering_table in executor.hpp). Lowering reads the description, so its code is
// compiled once per program (kiln/linkage.hpp).
#include "kiln/eval/flat.hpp"
#include "kiln/executor.hpp"
#include "kiln/ir/describe.hpp"
#include "kiln/linkage.hpp"

#include <span>

namespace kiln::ir {

// A scalar parameter's value: its dtype and bytes as the kernel reads them (16-bit floats
// are passed as float, bool and u8 as u32; leaf_table::add makes them so).
struct scalar_value {
  dtype type;
  std::uint64_t bits = 0;
};

// The leaves of an expression in for_each_leaf order, with equal ones merged: `pattern`
// gives each occurrence's input slot; `inputs` holds one leaf per slot.
struct leaf_table {
  std::vector<device_leaf> inputs;
  std::vector<std::int16_t> pattern; // per leaf in tree order: buffer s, or scalar s as -(s + 1)
  std::vector<scalar_value> scalars;

  KILN_CORE_INLINE void add(const device_leaf& l);
  // Scalars of one dtype and bit pattern share a parameter: a gradient tree repeats the
  // constants of its function in every copy of a subtree, and with one parameter each the
  // copies could not merge as common subexpressions (examples/greeks.cpp: 770 parameters,
  // 19 erfc per element). Which scalars are equal is part of the pattern, so the kernel of
  // one pattern never runs on values of another.
  KILN_CORE_INLINE void add(const scalar_value& v);
  void clear() {
    inputs.clear();
    pattern.clear();
    scalars.clear();
  }
  // Adds the leaves of an expression of this description, flattened (eval/flat.hpp).
  KILN_CORE_INLINE void add(std::span<const node_desc> nodes,
                            std::span<const detail::flat_leaf> leaves,
                            std::span<const detail::flat_scalar> scalars);
};

// The IR of a pass: outputs of dtypes `outs`, output k computing the expression described
// by exprs[k] (their leaves all added, in order, to the one leaf table whose pattern is given).
KILN_CORE_INLINE kernel_ir lower(std::span<const dtype> outs,
                                 const std::vector<std::int16_t>& pattern, bool strided, int rank,
                                 bool wide_index,
                                 std::span<const std::span<const node_desc>> exprs);

// The same from expressions, for tests and tools that lower without running: their leaves
// added to lt, and their IR.
template <class... E>
void collect(leaf_table& lt, const E&... exprs) {
  const detail::flat_pass<E...> flat(exprs...);
  auto l = flat.leaf_span();
  auto s = flat.scalar_span();
  auto add = [&]<class X>(const X&) {
    lt.add(description<X>, l.first(detail::leaf_count<X>), s.first(detail::scalar_count<X>));
    l = l.subspan(detail::leaf_count<X>);
    s = s.subspan(detail::scalar_count<X>);
  };
  (add(exprs), ...);
}
template <class... E>
kernel_ir lower(const std::vector<std::int16_t>& pattern, bool strided, int rank, bool wide,
                const E&...) {
  const std::array<dtype, sizeof...(E)> outs{dtype_of<value_t<E>>()...};
  const std::array<std::span<const node_desc>, sizeof...(E)> exprs{description<E>...};
  return lower(outs, pattern, strided, rank, wide, exprs);
}

} // namespace kiln::ir

#if KILN_CORE_DEFINITIONS
#include "kiln/ir/lower_impl.hpp"
#endif
