#pragma once
// Shape arithmetic's definitions (declared in shape.hpp; see kiln/linkage.hpp for where
// they are compiled).
#include "kiln/shape.hpp"

#include <algorithm>
#include <string>

namespace kiln {

KILN_CORE_INLINE std::int64_t checked_numel(const shape& s, const char* op,
                                            std::int64_t elem_bytes) {
  std::int64_t n = 1;
  bool wrapped = false;
  for (auto e : s) {
    if (e < 0) throw error(op, "negative extent", "shape " + s.str());
    wrapped = wrapped || __builtin_mul_overflow(n, e, &n);
  }
  std::int64_t bytes = 0;
  if (!wrapped && !__builtin_mul_overflow(n, elem_bytes, &bytes)) return n;
  // A zero extent makes the count 0 however large the others are.
  if (std::find(s.begin(), s.end(), std::int64_t{0}) != s.end()) return 0;
  throw error(op, "shape too large",
              "shape " + s.str() + " has more than 2^63 " +
                  (elem_bytes > 1 ? "bytes" : "elements"));
}

KILN_CORE_INLINE bool detail::broadcast_general(shape& acc, const shape& s) {
  const int r = std::max(acc.size(), s.size());
  shape out(r, 1);
  for (int i = 0; i < r; ++i) {
    const int ia = i - (r - acc.size()), is = i - (r - s.size());
    const std::int64_t a = ia >= 0 ? acc[ia] : 1, b = is >= 0 ? s[is] : 1;
    if (a != b && a != 1 && b != 1) return false;
    out[i] = a == 1 ? b : a;
  }
  acc = out;
  return true;
}

KILN_CORE_INLINE shape broadcast_shapes(const shape& a, const shape& b, const char* op) {
  shape r = a;
  if (!broadcast_into(r, b))
    throw error(op, "shapes cannot be broadcast together", "shapes " + a.str() + " and " + b.str());
  checked_numel(r, op);
  return r;
}

KILN_CORE_INLINE int normalize_axis(std::int64_t axis, int rank, const char* op) {
  if (axis < -rank || axis >= rank)
    throw error(op, "axis " + std::to_string(axis) + " is out of range",
                "tensor of rank " + std::to_string(rank));
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

} // namespace kiln
