#pragma once
// The planner's definitions (declared in planner.hpp; see kiln/linkage.hpp for where they
// are compiled).
#include "kiln/eval/planner.hpp"

#include <cstdint>
#include <string>
#include <utility>

namespace kiln::detail {

// Whether a (through layout la) and b (through lb) share any byte.
inline bool share_bytes(const flat_leaf& a, const layout& la, const flat_leaf& b,
                        const layout& lb) {
  if (!a.storage || !b.storage || a.storage->device() != b.storage->device()) return false;
  // Two host allocations of kiln's own never share a byte (memory borrowed through view_of
  // may): the common case, decided without the layouts' extents.
  if (a.storage != b.storage && a.storage->owned() && b.storage->owned()) return false;
  if (!a.storage->device().is_host() && memory_of(*a.storage) != memory_of(*b.storage))
    return false;
  return intersect(byte_range(a, la), byte_range(b, lb));
}

// Would writing dst while reading these leaves read an element after it was overwritten?
// Reading the very elements being written, each at its own position, is safe.
inline bool overlaps_differently(const flat_leaf& dst, std::span<const flat_leaf> leaves) {
  for (const flat_leaf& t : leaves) {
    // Broadcasting adds stride-0 dims, which touch no new byte: a leaf apart from dst is
    // safe without the broadcast layout (the common case, and the cost of a small pass).
    if (t.layout->size() == 0 || !share_bytes(dst, *dst.layout, t, *t.layout)) continue;
    const layout tl = views::broadcast_to(*t.layout, dst.layout->shape, "assign");
    if (size_of(t.type) == size_of(dst.type) && memory_of(*t.storage) == memory_of(*dst.storage) &&
        tl == *dst.layout)
      continue;
    if (share_bytes(dst, *dst.layout, t, tl)) return true;
  }
  return false;
}

// Whether dst shares any byte with the leaves (through any layout).
inline bool reads_memory_of(const flat_leaf& dst, std::span<const flat_leaf> leaves) {
  for (const flat_leaf& t : leaves)
    if (t.layout->size() > 0 && share_bytes(dst, *dst.layout, t, *t.layout)) return true;
  return false;
}

KILN_CORE_INLINE bool plan_in_place(std::span<const plan_output> outs, const char* op) {
  for (const plan_output& o : outs)
    if (!o.target.storage) throw error(op, "the target tensor is empty", "it has no storage");
  const kiln::device where = outs[0].target.storage->device();
  bool one_shape = true;
  for (const plan_output& o : outs) {
    const kiln::device& d = o.target.storage->device();
    if (d != where)
      throw error(op, "outputs live on different devices", where.str() + " and " + d.str());
    for (const flat_leaf& l : o.leaves)
      if (l.storage->device() != where)
        throw error(op, "operands live on different devices",
                    "target on " + where.str() + ", an operand on " + l.storage->device().str() +
                        "; move it with .to(" + where.str() + ")");
    const kiln::shape& ts = o.target.layout->shape;
    kiln::shape b = ts;
    if (!broadcast_into(b, o.value) || b != ts)
      throw error(op, "shapes cannot be broadcast together",
                  "value of shape " + o.value.str() + " into a tensor of shape " + ts.str());
    for (int d = 0; d < ts.size() && numel(ts) > 0; ++d) // an empty tensor has no overlap
      if (o.target.layout->strides[d] == 0 && ts[d] > 1)
        throw error(op, "cannot write through a broadcast view",
                    "target shape " + ts.str() + " has stride 0 on dim " + std::to_string(d));
    one_shape = one_shape && ts == outs[0].target.layout->shape;
  }
  for (const plan_output& o : outs) {
    if (overlaps_differently(o.target, o.leaves)) return false;
    for (const plan_output& p : outs) {
      if (&p == &o) continue;
      if (share_bytes(o.target, *o.target.layout, p.target, *p.target.layout)) return false;
      if (one_shape ? overlaps_differently(o.target, p.leaves)
                    : reads_memory_of(o.target, p.leaves))
        return false;
    }
  }
  return true;
}

} // namespace kiln::detail
