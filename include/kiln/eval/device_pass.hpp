#pragma once
// The planner's side of a pass on a GPU device (executor.hpp): the typed part, compiled
// for each tuple of output expression types. It collects the leaves (equal ones share one
// buffer), merges the layouts into the fewest dims (rank 1 with unit strides is a linear
// kernel), finds or makes the lowering for this specialization, and hands the erased pass
// to the device's executor. Everything after lowering runs in the executor, compiled once.
#include "kiln/eval/iteration_space.hpp"
#include "kiln/executor.hpp"
#include "kiln/ir/lower.hpp"

#include <limits>

namespace kiln::detail {

// Whether a kernel over n elements, or over these buffers, needs 64-bit indices.
inline bool needs_wide_index(std::int64_t n, std::span<const device_leaf> leaves,
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

// Whether a merged iteration space is walked with strides (anything but one unit-stride dim).
inline bool is_strided(const kiln::shape& extents, std::span<const operand_strides> strides) {
  bool strided = extents.size() != 1;
  for (const auto& st : strides)
    strided = strided || st[0] != 1;
  return strided;
}

inline std::span<const std::uint64_t> scalar_bits(const ir::leaf_table& lt,
                                                  std::vector<std::uint64_t>& bits) {
  bits.clear();
  for (const auto& s : lt.scalars)
    bits.push_back(s.bits);
  return bits;
}

// The GPU executor's entry: outputs of one shape on one device, computed together, after
// the planner has made sure that no target overlaps what any output reads.
template <class... O>
void device_run(const O&... outs) {
  const auto& first = std::get<0>(std::forward_as_tuple(outs...));
  const kiln::shape& shp = first.dst.shape();
  const std::int64_t n = numel(shp);
  if (n == 0) return;
  device_executor& ex = executor_of(*first.dst.storage(), "eval");

  thread_local ir::leaf_table lt;
  lt.inputs.clear();
  lt.pattern.clear();
  lt.scalars.clear();
  (ir::collect(*outs.expr, lt), ...);

  thread_local iteration_space space;
  space.strides.clear();
  (space.add(outs.dst.layout(), shp), ...);
  for (const auto& l : lt.inputs)
    space.add(*l.layout, shp);
  space.merge(shp);
  const std::array<const storage*, sizeof...(O)> targets{outs.dst.storage().get()...};
  const std::array<const layout*, sizeof...(O)> layouts{&outs.dst.layout()...};
  const bool strided = is_strided(space.extents, space.strides);
  const int rank = space.extents.size();
  const bool wide = needs_wide_index(n, lt.inputs, targets);

  using key = std::tuple<typename O::dst_type..., typename O::expr_type...>;
  const lowered_pass& lowered = lowerings_of<key>().find(lt.pattern, strided, rank, wide, [&] {
    ++lowering_count();
    return ir::lower({dtype_of<typename O::dst_type>()...}, lt.pattern, strided, rank, wide,
                     *outs.expr...);
  });
  thread_local std::vector<std::uint64_t> bits;
  ex.run(device_pass{lowered, lt.inputs, scalar_bits(lt, bits), space.extents, space.strides, n,
                     targets, layouts});
}

} // namespace kiln::detail
