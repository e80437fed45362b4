#pragma once
// The fuzzer's views (test_fuzz.cpp): a view of a given shape over a 1-D buffer, drawn as
// a chain of kiln view calls (narrow of the buffer, reshape, permute, per-dim slice with a
// positive or negative step or narrow, broadcast_to for stride-0 dims and leading dims),
// with its strides and offset computed here independently, for the reference to read and
// write through. code() writes the chain as C++ for a failure report.
#include "fuzz_reference.hpp"

#include <kiln/kiln.hpp>

#include <numeric>
#include <optional>
#include <random>
#include <sstream>

namespace fuzz {

struct view_spec {
  int buffer = 0;
  std::int64_t offset = 0; // where the contiguous base starts in the buffer
  dims shape;              // the view's shape
  int lead = 0;            // leading dims added by broadcast_to (stride 0)
  dims base;               // per core dim (after lead): extent in the contiguous base
  std::vector<int> pos;    // per core dim: its position in the base's storage order
  dims lo, step;           // per core dim: lowest index taken and the step
  std::vector<char> bcast; // per core dim: extent 1 in the base, broadcast (stride 0)
  std::vector<char> narrow;

  int core() const { return int(shape.size()) - lead; }
  dims stored() const { // the base's extents in storage order
    dims s(base.size());
    for (int d = 0; d < core(); ++d)
      s[pos[d]] = base[d];
    return s;
  }
  std::int64_t base_count() const { return count(base); }
  // Strides and offset of the view in the buffer, worked out from the spec alone.
  void layout(dims& strides, std::int64_t& off) const {
    const dims st = stored();
    dims cs(st.size(), 1);
    for (int k = int(st.size()) - 2; k >= 0; --k)
      cs[k] = cs[k + 1] * st[k + 1];
    strides.assign(shape.size(), 0);
    off = offset;
    for (int d = 0; d < core(); ++d) {
      if (bcast[d]) continue;
      const std::int64_t s = cs[pos[d]];
      const std::int64_t n = shape[lead + d];
      if (n > 0) off += (step[d] > 0 ? lo[d] : lo[d] + (n - 1) * -step[d]) * s;
      strides[lead + d] = s * step[d];
    }
  }
  // The slice arguments of core dim d: numpy's a[start:stop:step] taking n elements from lo.
  void slice_args(int d, std::int64_t& start, std::int64_t& stop) const {
    const std::int64_t n = shape[lead + d], a = step[d] > 0 ? step[d] : -step[d];
    if (n == 0) {
      start = stop = lo[d];
    } else if (step[d] > 0) {
      start = lo[d];
      stop = lo[d] + (n - 1) * a + 1;
    } else {
      start = lo[d] + (n - 1) * a;
      stop = lo[d] == 0 ? -base[d] - 1 : lo[d] - 1; // -n-1: before the first (numpy)
    }
  }
  std::string code(const std::string& buf) const {
    std::ostringstream o;
    auto list = [&](const dims& v) {
      o << "{";
      for (std::size_t i = 0; i < v.size(); ++i)
        o << (i ? ", " : "") << v[i];
      o << "}";
    };
    o << buf << ".narrow(0, " << offset << ", " << base_count() << ").reshape(";
    list(stored());
    o << ")";
    if (core() > 1) {
      o << ".permute(";
      list(dims(pos.begin(), pos.end()));
      o << ")";
    }
    for (int d = 0; d < core(); ++d) {
      if (bcast[d]) continue;
      std::int64_t start, stop;
      slice_args(d, start, stop);
      if (narrow[d])
        o << ".narrow(" << d << ", " << lo[d] << ", " << shape[lead + d] << ")";
      else if (step[d] != 1 || base[d] != shape[lead + d])
        o << ".slice(" << d << ", " << start << ", " << stop << ", " << step[d] << ")";
    }
    if (needs_broadcast()) {
      o << ".broadcast_to(";
      list(shape);
      o << ")";
    }
    return o.str();
  }
  bool needs_broadcast() const {
    return lead > 0 || std::any_of(bcast.begin(), bcast.end(), [](char b) { return b; });
  }

  // The same chain on a kiln tensor. (Each step makes a new handle: assigning to a tensor
  // would write values.)
  template <class T>
  kiln::tensor<T> make(const kiln::tensor<T>& buf) const {
    const dims st = stored();
    std::optional<kiln::tensor<T>> t;
    auto next = [&](kiln::tensor<T> n) { t.emplace(std::move(n)); };
    next(buf.narrow(0, offset, base_count()).reshape(kiln::shape(st.begin(), st.end())));
    if (core() == 2) next(t->permute({pos[0], pos[1]}));
    if (core() == 3) next(t->permute({pos[0], pos[1], pos[2]}));
    for (int d = 0; d < core(); ++d) {
      if (bcast[d]) continue;
      std::int64_t start, stop;
      slice_args(d, start, stop);
      if (narrow[d])
        next(t->narrow(d, lo[d], shape[lead + d]));
      else if (step[d] != 1 || base[d] != shape[lead + d])
        next(t->slice(d, start, stop, step[d]));
    }
    if (needs_broadcast()) next(t->broadcast_to(kiln::shape(shape.begin(), shape.end())));
    return *t;
  }
};

// A view of shape s; broadcast: whether stride-0 dims may be drawn (not for targets);
// large: steps of 1 and -1 (a buffer must fit the device's largest storage buffer).
inline view_spec draw_view(std::mt19937_64& g, const dims& s, bool broadcast, bool large) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(g); };
  view_spec v;
  v.shape = s;
  v.lead = broadcast && !s.empty() && pick(0, 5) == 0 ? pick(1, int(s.size())) : 0;
  const int r = v.core();
  v.pos.resize(r);
  std::iota(v.pos.begin(), v.pos.end(), 0);
  if (pick(0, 1)) std::shuffle(v.pos.begin(), v.pos.end(), g);
  for (int d = 0; d < r; ++d) {
    const std::int64_t n = s[v.lead + d];
    const bool bc = broadcast && pick(0, 6) == 0;
    v.bcast.push_back(bc);
    if (bc) {
      v.base.push_back(1), v.lo.push_back(0), v.step.push_back(1), v.narrow.push_back(0);
      continue;
    }
    static const int steps[] = {1, 1, 1, -1, -1, 2, -2, 3, -3};
    const std::int64_t st = n <= 1 && pick(0, 1) ? 1 : steps[pick(0, large ? 4 : 8)];
    const std::int64_t a = st > 0 ? st : -st;
    const std::int64_t span = n == 0 ? 0 : (n - 1) * a + 1;
    const std::int64_t extra = pick(0, 3) == 0 ? pick(1, 3) : 0;
    const std::int64_t b = span + extra;
    v.base.push_back(b);
    v.step.push_back(st);
    v.lo.push_back(std::uniform_int_distribution<std::int64_t>(0, b - span)(g));
    v.narrow.push_back(st == 1 && pick(0, 1));
  }
  return v;
}

// Reads a view of a buffer into a dense array (the reference's leaf).
inline dense read_view(const std::vector<val>& buf, const view_spec& v) {
  dims strides;
  std::int64_t off;
  v.layout(strides, off);
  dense r{v.shape, std::vector<val>(static_cast<std::size_t>(count(v.shape)))};
  dims idx(v.shape.size(), 0);
  for (auto& x : r.x) {
    std::int64_t a = off;
    for (std::size_t d = 0; d < idx.size(); ++d)
      a += idx[d] * strides[d];
    x = buf[static_cast<std::size_t>(a)];
    step_index(idx, v.shape);
  }
  return r;
}

// Writes values (broadcast to the view's shape) through a view into a buffer.
inline void write_view(std::vector<val>& buf, const view_spec& v, const dense& values) {
  dims strides;
  std::int64_t off;
  v.layout(strides, off);
  dims idx(v.shape.size(), 0);
  for (std::int64_t i = 0, n = count(v.shape); i < n; ++i) {
    std::int64_t a = off;
    for (std::size_t d = 0; d < idx.size(); ++d)
      a += idx[d] * strides[d];
    buf[static_cast<std::size_t>(a)] = values.x[bcast_offset(values.shape, v.shape, idx)];
    step_index(idx, v.shape);
  }
}

} // namespace fuzz
