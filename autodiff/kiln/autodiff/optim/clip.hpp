#pragma once
// Gradient clipping: by value (an expression, fused into the update that uses it) and by
// global norm (the norm of all gradients together needs their sums first: a reduction
// per gradient, then a scale that the update multiplies in).
#include "kiln/ops/arithmetic.hpp"
#include "kiln/reduce.hpp"

#include <cmath>

namespace kiln::optim {

template <class G>
auto clip_by_value(const G& g, double limit) {
  return kiln::clamp(g, -limit, limit);
}

// The factor min(1, max_norm / ||(g1, g2, ...)||) by which each gradient is multiplied.
template <class... G>
double clip_scale(double max_norm, const G&... grads) {
  const double sq = (0.0 + ... + static_cast<double>(kiln::sum(grads * grads).item()));
  const double norm = std::sqrt(sq);
  return norm > max_norm ? max_norm / norm : 1.0;
}

} // namespace kiln::optim
