#pragma once
// The merged iteration space of a pass or a reduction: its extents and, per operand, its
// strides over them, with neighbouring dims that every operand walks contiguously joined,
// so a contiguous expression is one linear loop (or one linear kernel on a device).
#include "kiln/layout.hpp"

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
  void add(const layout& l, const kiln::shape& target) {
    const layout b = views::broadcast_to(l, target, "assign");
    std::array<std::int64_t, max_rank> s{};
    std::copy(b.strides.begin(), b.strides.end(), s.begin());
    strides.push_back(s);
  }
  // Drop extent-1 dims and join neighbours that every operand walks contiguously.
  void merge(const kiln::shape& full) {
    const std::size_t n = strides.size();
    kiln::shape ext;
    for (int d = 0; d < full.size(); ++d) {
      if (full[d] == 1) continue;
      const int k = ext.size();
      ext.push_back(full[d]);
      for (std::size_t o = 0; o < n; ++o)
        strides[o][k] = strides[o][d]; // k <= d: in place
      bool join = k > 0;
      for (std::size_t o = 0; o < n && join; ++o)
        join = strides[o][k - 1] == strides[o][k] * full[d];
      if (join) { // dim k continues dim k-1 in every operand: fold it in
        ext[k - 1] *= full[d];
        for (std::size_t o = 0; o < n; ++o)
          strides[o][k - 1] = strides[o][k];
        ext.resize(k);
      }
    }
    if (ext.empty()) {
      ext.push_back(1);
      for (auto& st : strides)
        st[0] = 0;
    }
    for (auto& st : strides) // dims past the merged rank: 0, so equal strides compare equal
      for (int d = ext.size(); d < max_rank; ++d)
        st[d] = 0;
    extents = ext;
  }
};

} // namespace kiln::detail
