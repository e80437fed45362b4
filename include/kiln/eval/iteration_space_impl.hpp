#pragma once
// iteration_space's definitions (see kiln/linkage.hpp for where they are compiled).
#include "kiln/eval/iteration_space.hpp"

namespace kiln::detail {

KILN_CORE_INLINE void iteration_space::add(const layout& l, const kiln::shape& target) {
  const layout b = views::broadcast_to(l, target, "assign");
  std::array<std::int64_t, max_rank> s{};
  std::copy(b.strides.begin(), b.strides.end(), s.begin());
  strides.push_back(s);
}
KILN_CORE_INLINE void iteration_space::merge(const kiln::shape& full) {
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
  if (ext.empty()) {  // one element: a row of one, which every operand walks contiguously
    ext.push_back(1); // (stride 0 made it a strided pass, with buffers allocated to pack)
    for (auto& st : strides)
      st[0] = 1;
  }
  for (auto& st : strides) // dims past the merged rank: 0, so equal strides compare equal
    for (int d = ext.size(); d < max_rank; ++d)
      st[d] = 0;
  extents = ext;
}
} // namespace kiln::detail
