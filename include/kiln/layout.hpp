#pragma once
// A layout maps a multi-index to an element offset: shape + strides (in elements) +
// offset. Broadcasting is a stride of 0. Every view (reshape, transpose, narrow, ...) is
// a pure function from layout to layout; tensor<T> wraps these with its storage.
#include "kiln/shape.hpp"

#include <limits>
#include <numeric>
#include <optional>
#include <vector>

namespace kiln {

struct layout {
  kiln::shape shape;
  kiln::strides strides;
  std::int64_t offset = 0;

  static layout contiguous(const kiln::shape& s, std::int64_t offset = 0) {
    layout l{s, kiln::strides(s.size(), 1), offset};
    for (int i = s.size() - 2; i >= 0; --i)
      l.strides[i] = l.strides[i + 1] * s[i + 1];
    return l;
  }
  int rank() const noexcept { return shape.size(); }
  std::int64_t size() const noexcept { return numel(shape); }

  // Row-major contiguous (dims of extent 1 may carry any stride).
  bool is_contiguous() const noexcept {
    std::int64_t expect = 1;
    for (int i = rank() - 1; i >= 0; --i) {
      if (shape[i] != 1 && strides[i] != expect) return false;
      expect *= shape[i];
    }
    return true;
  }

  // Smallest and one-past-largest element offsets touched (for overlap checks).
  std::pair<std::int64_t, std::int64_t> extent() const noexcept {
    if (size() == 0) return {offset, offset};
    std::int64_t lo = offset, hi = offset;
    for (int i = 0; i < rank(); ++i) {
      const std::int64_t span = (shape[i] - 1) * strides[i];
      (span < 0 ? lo : hi) += span;
    }
    return {lo, hi + 1};
  }

  friend bool operator==(const layout&, const layout&) = default;
};

namespace views {

inline layout broadcast_to(const layout& l, const kiln::shape& target,
                           const char* op = "broadcast_to") {
  checked_numel(target, op);
  if (target.size() < l.rank())
    throw error(op, "cannot broadcast to a lower rank",
                "shape " + l.shape.str() + " to " + target.str());
  layout r{target, kiln::strides(target.size(), 0), l.offset};
  const int lead = target.size() - l.rank();
  for (int i = 0; i < l.rank(); ++i) {
    if (l.shape[i] == target[lead + i])
      r.strides[lead + i] = l.strides[i];
    else if (l.shape[i] != 1)
      throw error(op, "shapes cannot be broadcast together",
                  "shape " + l.shape.str() + " to " + target.str());
  }
  return r;
}

inline layout transpose(const layout& l) {
  layout r = l;
  std::reverse(r.shape.begin(), r.shape.end());
  std::reverse(r.strides.begin(), r.strides.end());
  return r;
}

inline layout permute(const layout& l, std::span<const std::int64_t> perm) {
  if (static_cast<int>(perm.size()) != l.rank())
    throw error("permute", "permutation length differs from rank",
                std::to_string(perm.size()) + " axes for shape " + l.shape.str());
  layout r = l;
  std::array<bool, max_rank> seen{};
  for (int i = 0; i < l.rank(); ++i) {
    const int a = normalize_axis(perm[i], l.rank(), "permute");
    if (seen[a])
      throw error("permute", "axis repeated in permutation", "axis " + std::to_string(a));
    seen[a] = true;
    r.shape[i] = l.shape[a];
    r.strides[i] = l.strides[a];
  }
  return r;
}

inline layout narrow(const layout& l, std::int64_t dim, std::int64_t start, std::int64_t len) {
  const int d = normalize_axis(dim, l.rank(), "narrow");
  if (start < 0) start += l.shape[d];
  // len > extent - start, not start + len > extent: len may be near INT64_MAX.
  if (start < 0 || len < 0 || start > l.shape[d] || len > l.shape[d] - start)
    throw error("narrow", "range out of bounds",
                "start " + std::to_string(start) + ", length " + std::to_string(len) + " on dim " +
                    std::to_string(d) + " of shape " + l.shape.str());
  layout r = l;
  r.offset += start * l.strides[d];
  r.shape[d] = len;
  return r;
}

// numpy-style slice [start:stop:step] on one dim, with numpy's slice.indices rules:
// negative start/stop count from the end, out-of-range bounds clamp, a step below
// -INT64_MAX is -INT64_MAX (as CPython's PY_SSIZE_T_MAX clamp), and a zero step is an error.
inline layout slice(const layout& l, std::int64_t dim, std::int64_t start, std::int64_t stop,
                    std::int64_t step) {
  const int d = normalize_axis(dim, l.rank(), "slice");
  if (step == 0) throw error("slice", "step must not be zero", "dim " + std::to_string(d));
  step = std::max(step, -std::numeric_limits<std::int64_t>::max()); // so that -step exists
  const std::int64_t n = l.shape[d];
  auto fix = [&](std::int64_t v) {
    if (v < 0) {
      v = v < -n ? (step < 0 ? -1 : 0) : v + n;
    } else if (v >= n) {
      v = step < 0 ? n - 1 : n;
    }
    return v;
  };
  start = fix(start);
  stop = fix(stop);
  // Differences of clamped bounds lie in [-1, n] and cannot overflow.
  std::int64_t len = 0;
  if (step > 0 && start < stop) len = (stop - start - 1) / step + 1;
  if (step < 0 && stop < start) len = (start - stop - 1) / (-step) + 1;
  layout r = l;
  if (len > 0) r.offset += start * l.strides[d];
  r.shape[d] = len;
  // With one element or none the stride is never used; otherwise |step| < n keeps it in range.
  if (len > 1 && __builtin_mul_overflow(l.strides[d], step, &r.strides[d]))
    throw error("slice", "stride overflows int64",
                "stride " + std::to_string(l.strides[d]) + " times step " + std::to_string(step));
  return r;
}

inline layout select(const layout& l, std::int64_t dim, std::int64_t index) {
  const int d = normalize_axis(dim, l.rank(), "select");
  const std::int64_t i = index < 0 ? index + l.shape[d] : index;
  if (i < 0 || i >= l.shape[d])
    throw error("index", "index out of range",
                "index " + std::to_string(index) + " on dim " + std::to_string(d) + " of shape " +
                    l.shape.str());
  layout r = l;
  r.offset += i * l.strides[d];
  r.shape.erase(d);
  r.strides.erase(d);
  return r;
}

inline layout squeeze(const layout& l) {
  layout r{{}, {}, l.offset};
  for (int i = 0; i < l.rank(); ++i)
    if (l.shape[i] != 1) {
      r.shape.push_back(l.shape[i]);
      r.strides.push_back(l.strides[i]);
    }
  return r;
}

inline layout squeeze(const layout& l, std::int64_t dim) {
  const int d = normalize_axis(dim, l.rank(), "squeeze");
  if (l.shape[d] != 1)
    throw error("squeeze", "dim does not have extent 1",
                "dim " + std::to_string(d) + " of shape " + l.shape.str());
  layout r = l;
  r.shape.erase(d);
  r.strides.erase(d);
  return r;
}

inline layout unsqueeze(const layout& l, std::int64_t dim) {
  const int d = normalize_axis(dim, l.rank() + 1, "unsqueeze");
  layout r = l;
  const std::int64_t st = d < l.rank() ? l.strides[d] * l.shape[d] : 1;
  r.shape.insert(d, 1);
  r.strides.insert(d, st);
  return r;
}

// A view with a new shape, when the existing strides allow it (numpy's rule: each new
// dim group must map onto a run of old dims that is contiguous in memory). One extent
// may be -1 and is inferred.
inline std::optional<layout> try_reshape(const layout& l, kiln::shape target) {
  const std::int64_t n = l.size();
  int infer = -1;
  std::int64_t known = 1;
  for (int i = 0; i < target.size(); ++i) {
    if (target[i] == -1) {
      if (infer >= 0) throw error("reshape", "only one extent may be -1", "shape " + target.str());
      infer = i;
    } else if (target[i] < 0) {
      throw error("reshape", "negative extent", "shape " + target.str());
    } else if (__builtin_mul_overflow(known, target[i], &known) &&
               std::find(target.begin(), target.end(), 0) == target.end()) {
      // A wrapped product could equal the element count and pass the size check below.
      throw error("reshape", "shape too large",
                  "shape " + target.str() + " has more than 2^63 elements");
    }
  }
  if (infer >= 0) {
    if (known == 0 || n % known != 0)
      throw error("reshape", "size mismatch",
                  "cannot infer -1 reshaping " + l.shape.str() + " to " + target.str());
    target[infer] = n / known;
  }
  if (numel(target) != n)
    throw error("reshape", "size mismatch",
                std::to_string(n) + " elements in " + l.shape.str() + " cannot become " +
                    target.str());
  layout r{target, kiln::strides(target.size(), 0), l.offset};
  if (n == 0) return layout::contiguous(target, l.offset);
  // Drop extent-1 dims of the source: they carry no stride information.
  kiln::shape os;
  kiln::strides ost;
  for (int i = 0; i < l.rank(); ++i)
    if (l.shape[i] != 1) {
      os.push_back(l.shape[i]);
      ost.push_back(l.strides[i]);
    }
  int oi = 0, ti = 0;
  const int tn = target.size();
  while (ti < tn) {
    if (target[ti] == 1) {
      r.strides[ti] = 1;
      ++ti;
      continue;
    }
    // Grow a group of old dims [oi, oj) and new dims [ti, tj) with equal products.
    int oj = oi, tj = ti;
    std::int64_t po = os[oj++], pt = target[tj++];
    while (po != pt) {
      if (po < pt)
        po *= os[oj++];
      else
        pt *= target[tj++];
    }
    for (int k = oi; k + 1 < oj; ++k)
      if (ost[k] != ost[k + 1] * os[k + 1]) return std::nullopt; // not contiguous in memory
    std::int64_t st = ost[oj - 1];
    for (int k = tj - 1; k >= ti; --k) {
      r.strides[k] = st;
      st *= target[k];
    }
    oi = oj;
    ti = tj;
  }
  return r;
}

} // namespace views
} // namespace kiln
