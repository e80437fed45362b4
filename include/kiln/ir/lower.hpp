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
// are passed as float, bool and u8 as u32).
struct scalar_value {
  dtype type;
  std::uint64_t bits = 0;
};

// The leaves of an expression in tree order (depth first, left to right, tensors and
// scalars alike, as flat.hpp lists them), with equal ones merged: `pattern`
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
  // Adds the leaves of an expression of description `e`, taken from the front of `leaves`
  // and `scalars` (its flat lists, eval/flat.hpp), which are advanced past them.
  KILN_CORE_INLINE void add(const expr_description& e, std::span<const detail::flat_leaf>& leaves,
                            std::span<const detail::flat_scalar>& scalars);
  // Advances `leaves` and `scalars` past those of an expression of description `e`, adding
  // nothing (an output another kernel computes).
  KILN_CORE_INLINE static void skip(const expr_description& e,
                                    std::span<const detail::flat_leaf>& leaves,
                                    std::span<const detail::flat_scalar>& scalars);
};

// The IR of a pass: outputs of dtypes `outs`, output k computing the expression of
// description exprs[k] (the leaves of all of them added, in order, to the one leaf table whose
// pattern is given).
KILN_CORE_INLINE kernel_ir lower(std::span<const dtype> outs,
                                 const std::vector<std::int16_t>& pattern, bool strided, int rank,
                                 bool wide_index, std::span<const expr_description> exprs);

// The same from expressions, for tests and tools that lower without running: their leaves
// added to lt, and their IR.
template <class... E>
void collect(leaf_table& lt, const E&... exprs) {
  const detail::flat_pass<E...> flat(exprs...);
  auto l = flat.leaf_span();
  auto s = flat.scalar_span();
  (lt.add(described<E>, l, s), ...);
}
template <class... E>
kernel_ir lower(const std::vector<std::int16_t>& pattern, bool strided, int rank, bool wide,
                const E&...) {
  const std::array<dtype, sizeof...(E)> outs{dtype_of<value_t<E>>()...};
  const std::array<expr_description, sizeof...(E)> exprs{described<E>...};
  return lower(outs, pattern, strided, rank, wide, exprs);
}

} // namespace kiln::ir

#if KILN_CORE_DEFINITIONS
#include "kiln/ir/lower_impl.hpp"
#endif
