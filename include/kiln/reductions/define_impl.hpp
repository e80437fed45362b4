#pragma once
// The reduction node's shape arithmetic (declared in define.hpp; see kiln/linkage.hpp for
// where it is compiled).
#include "kiln/reductions/define.hpp"

#include <string>

namespace kiln::detail {

KILN_CORE_INLINE std::array<bool, max_rank> reduction_mask(const kiln::axes& over, int rank,
                                                           const char* op) {
  std::array<bool, max_rank> m{};
  if (over.everything) m.fill(true);
  for (auto a : over.list) {
    const int d = normalize_axis(a, rank, op);
    if (m[d] && !over.everything) throw error(op, "axis repeated", "axis " + std::to_string(a));
    m[d] = true;
  }
  return m;
}

KILN_CORE_INLINE kiln::shape reduced_shape(const kiln::shape& in, const kiln::axes& over,
                                           bool keepdims, const char* op) {
  const auto m = reduction_mask(over, in.size(), op);
  kiln::shape r;
  for (int d = 0; d < in.size(); ++d)
    if (!m[d])
      r.push_back(in[d]);
    else if (keepdims)
      r.push_back(1);
  return r;
}

} // namespace kiln::detail
