#pragma once
// The strip pass's definitions (declared in strip_pass.hpp; kiln/linkage.hpp says where
// they are compiled).
#include "kiln/contractions/strip_pass.hpp"

#include <vector>

namespace kiln::detail {

KILN_CORE_INLINE void run_strip(const void* ctx, std::int64_t batch, std::int64_t i0,
                                std::int64_t rows, std::int64_t j0, std::int64_t cols) {
  const strip_pass& p = *static_cast<const strip_pass*>(ctx);
  const int nb = p.batch_rank;
  std::int64_t idx[max_rank] = {};
  for (int d = nb - 1; d >= 0; --d) {
    idx[d] = batch % p.shape[d];
    batch /= p.shape[d];
  }
  kiln::shape box;
  if (p.has_rows) box.push_back(rows);
  if (p.has_cols) box.push_back(cols);
  // l broadcast to the outputs' shape, then narrowed to the strip.
  auto narrow = [&](const layout& l) {
    const layout b = views::broadcast_to(l, p.shape, "matmul");
    layout r;
    r.offset = b.offset;
    for (int d = 0; d < nb; ++d)
      r.offset += idx[d] * b.strides[d];
    int d = nb;
    if (p.has_rows) {
      r.offset += i0 * b.strides[d];
      r.shape.push_back(rows);
      r.strides.push_back(b.strides[d++]);
    }
    if (p.has_cols) {
      r.offset += j0 * b.strides[d];
      r.shape.push_back(cols);
      r.strides.push_back(b.strides[d]);
    }
    return r;
  };
  std::vector<layout> layouts;
  layouts.reserve(p.outs.size() + p.leaves.size());
  std::vector<host_output> outs(p.outs.begin(), p.outs.end());
  for (host_output& o : outs) {
    layouts.push_back(narrow(*o.layout));
    const std::int64_t moved = layouts.back().offset - o.layout->offset;
    o.data = static_cast<unsigned char*>(o.data) + moved * std::int64_t(size_of(o.type));
    o.layout = &layouts.back();
  }
  std::vector<flat_leaf> leaves(p.leaves.begin(), p.leaves.end());
  for (flat_leaf& f : leaves) {
    layouts.push_back(narrow(*f.layout));
    f.layout = &layouts.back();
  }
  run_host_pass(p.kernel, outs, leaves, p.scalars, box);
}

} // namespace kiln::detail
