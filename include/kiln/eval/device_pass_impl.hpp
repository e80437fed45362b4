#pragma once
// The definitions of a device pass's untyped part (declared in device_pass.hpp; see
// kiln/linkage.hpp for where they are compiled).
#include "kiln/eval/device_pass.hpp"

#include <algorithm>
#include <limits>
#include <vector>

namespace kiln::detail {

KILN_CORE_INLINE bool needs_wide_index(std::int64_t n, std::span<const device_leaf> leaves,
                                       std::span<const storage* const> targets) {
  auto big = [](const kiln::storage* s) {
    return s->count() > std::numeric_limits<std::int32_t>::max();
  };
  bool wide = n >= narrow_index_limit;
  for (const auto* t : targets)
    wide = wide || big(t);
  for (const auto& l : leaves)
    wide = wide || big(l.storage);
  return wide;
}

KILN_CORE_INLINE bool is_strided(const kiln::shape& extents,
                                 std::span<const operand_strides> strides) {
  bool strided = extents.size() != 1;
  for (const auto& st : strides)
    strided = strided || st[0] != 1;
  return strided;
}

KILN_CORE_INLINE std::span<const std::uint64_t> scalar_bits(const ir::leaf_table& lt,
                                                            std::vector<std::uint64_t>& bits) {
  bits.clear();
  for (const auto& s : lt.scalars)
    bits.push_back(s.bits);
  return bits;
}

KILN_CORE_INLINE void
run_device_pass(lowering_table& table, std::span<const flat_leaf> targets, const kiln::shape& shape,
                std::span<const ir::expr_description> exprs, std::span<const flat_leaf> leaves,
                std::span<const flat_scalar> scalars, std::span<const bool> active) {
  const std::int64_t n = numel(shape);
  if (n == 0) return;

  // Reused by every pass of a thread: a pass allocates nothing once they have grown. One
  // thread_local object: in the runtime library (position-independent code) each one costs
  // a call to find it.
  struct state {
    ir::leaf_table lt;
    iteration_space space;
    std::vector<const storage*> stores;
    std::vector<const layout*> layouts;
    std::vector<std::uint64_t> bits;
    std::vector<flat_leaf> targets;          // the active outputs'
    std::vector<ir::expr_description> exprs; // the active outputs'
    std::vector<bool> outputs;               // which are active: empty, all of them
  };
  thread_local state st;
  // (References, not a structured binding: clang 14 cannot capture those in a lambda.)
  ir::leaf_table& lt = st.lt;
  iteration_space& space = st.space;
  std::vector<const storage*>& stores = st.stores;
  std::vector<const layout*>& layouts = st.layouts;
  lt.clear();
  std::vector<bool>& outputs = st.outputs;
  outputs.clear();
  if (std::find(active.begin(), active.end(), false) != active.end()) {
    // One shape of a kiln::eval's several: the other outputs' leaves are skipped, and the
    // lowering is keyed by which outputs it computes.
    outputs.assign(active.begin(), active.end());
    st.targets.clear();
    st.exprs.clear();
    for (std::size_t k = 0; k < exprs.size(); ++k)
      if (active[k]) {
        lt.add(exprs[k], leaves, scalars);
        st.targets.push_back(targets[k]);
        st.exprs.push_back(exprs[k]);
      } else {
        ir::leaf_table::skip(exprs[k], leaves, scalars);
      }
    targets = st.targets;
    exprs = st.exprs;
  } else {
    for (const auto& e : exprs)
      lt.add(e, leaves, scalars);
  }
  device_executor& ex = executor_of(*targets[0].storage, "eval");

  space.strides.clear();
  stores.clear();
  layouts.clear();
  for (const auto& t : targets) {
    space.add(*t.layout, shape);
    stores.push_back(t.storage);
    layouts.push_back(t.layout);
  }
  for (const auto& l : lt.inputs)
    space.add(*l.layout, shape);
  space.merge(shape);
  const bool strided = is_strided(space.extents, space.strides);
  const int rank = space.extents.size();
  const bool wide = needs_wide_index(n, lt.inputs, stores);

  const lowered_pass& lowered = table.find(
      lt.pattern, strided, rank, wide,
      [&] {
        ++lowering_count();
        std::vector<dtype> types; // the outputs' dtypes: needed only to lower
        for (const auto& t : targets)
          types.push_back(t.type);
        return ir::lower(types, lt.pattern, strided, rank, wide, exprs);
      },
      outputs);
  ex.run(device_pass{lowered, lt.inputs, scalar_bits(lt, st.bits), space.extents, space.strides, n,
                     stores, layouts});
}

} // namespace kiln::detail
