#pragma once
// The merged iteration space of a pass or a reduction: its extents and, per operand, its
// strides over them, with neighbouring dims that every operand walks contiguously joined,
// so a contiguous expression is one linear loop (or one linear kernel on a device).
#include "kiln/layout.hpp"
#include "kiln/linkage.hpp"

#include <array>
#include <cstdint>
#include <vector>

namespace kiln::detail {

struct iteration_space {
  kiln::shape extents;
  std::vector<std::array<std::int64_t, max_rank>> strides;

  // An operand of an output this run leaves alone: strides 0, which merge with anything.
  void add_idle() { strides.push_back({}); }
  // Strides of l broadcast to `target` (which l must broadcast to).
  KILN_CORE_INLINE void add(const layout& l, const kiln::shape& target);
  // Drop extent-1 dims and join neighbours that every operand walks contiguously.
  KILN_CORE_INLINE void merge(const kiln::shape& full);

  // Walking the merged space a row (the last dim) at a time: the row of element e as a
  // multi-index of the other dims, in idx, and e's place in its row (returned).
  std::int64_t locate(std::int64_t e, std::int64_t* idx) const noexcept {
    const int outer = extents.size() - 1;
    std::int64_t row = e / extents[outer];
    for (int d = outer - 1; d >= 0; --d) {
      idx[d] = row % extents[d];
      row /= extents[d];
    }
    return e % extents[outer];
  }
  // Steps idx to the next row.
  void next_row(std::int64_t* idx) const noexcept {
    for (int d = extents.size() - 2; d >= 0; --d) {
      if (++idx[d] < extents[d]) return;
      idx[d] = 0;
    }
  }
};

} // namespace kiln::detail

#if KILN_CORE_DEFINITIONS
#include "kiln/eval/iteration_space_impl.hpp"
#endif
