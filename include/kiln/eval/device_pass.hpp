#pragma once
// The planner's side of a pass on a GPU device (executor.hpp). The typed part, compiled for
// each tuple of output expression types, is small: the expressions' leaves in a flat list
// (flat.hpp) and their descriptions (ir/describe.hpp). The rest is compiled once per
// program (kiln/linkage.hpp): it merges equal leaves (one buffer each) and the layouts into
// the fewest dims (rank 1 with unit strides is a linear kernel), finds or makes the lowering
// for this specialization, and hands the erased pass to the device's executor.
#include "kiln/eval/flat.hpp"
#include "kiln/eval/iteration_space.hpp"
#include "kiln/executor.hpp"
#include "kiln/ir/lower.hpp"
#include "kiln/linkage.hpp"
#include "kiln/plan/recording.hpp"

#include <span>

namespace kiln::detail {

// Whether a kernel over n elements, or over these buffers, needs 64-bit indices.
KILN_CORE_INLINE bool needs_wide_index(std::int64_t n, std::span<const device_leaf> leaves,
                                       std::span<const storage* const> targets);

// Whether a merged iteration space is walked with strides (anything but one unit-stride dim).
KILN_CORE_INLINE bool is_strided(const kiln::shape& extents,
                                 std::span<const operand_strides> strides);

// The bits of each scalar parameter of a leaf table, in `bits`.
KILN_CORE_INLINE std::span<const std::uint64_t> scalar_bits(const ir::leaf_table& lt,
                                                            std::vector<std::uint64_t>& bits);

// A pass on a device: `targets` computing the expressions described by `exprs`, whose
// leaves are `leaves` and `scalars` one expression after another; only the outputs marked in
// `active` (all where it is empty), which have one shape, `shape`. The lowerings of this
// tuple of expression types are kept in `table`.
KILN_CORE_INLINE void
run_device_pass(lowering_table& table, std::span<const flat_leaf> targets, const kiln::shape& shape,
                std::span<const ir::expr_description> exprs, std::span<const flat_leaf> leaves,
                std::span<const flat_scalar> scalars, std::span<const bool> active = {});

// The GPU executor's entry: outputs on one device, after the planner has made sure that no
// target overlaps what any output reads; those marked in `active` (of one shape) computed
// together, or all of them (then of one shape) where it is empty.
template <class... O>
void device_run_outputs(std::span<const bool> active, const O&... outs) {
  const flat_pass<typename O::expr_type...> flat(*outs.expr...);
  const std::array<flat_leaf, sizeof...(O)> targets{
      flat_leaf{outs.dst.storage().get(), &outs.dst.layout(), dtype_of<typename O::dst_type>()}...};
  static constexpr std::array<ir::expr_description, sizeof...(O)> exprs{
      ir::described<typename O::expr_type>...};
  using key = std::tuple<typename O::dst_type..., typename O::expr_type...>;
  const kiln::shape* shapes[] = {&outs.dst.shape()...};
  std::size_t first = 0;
  while (!active.empty() && !active[first])
    ++first;
  if (plan_recording* r = recording_now()) [[unlikely]]
    return record_device_pass(*r, lowerings_of<key>(), targets, *shapes[first], exprs,
                              flat.leaf_span(), flat.scalar_span(), active);
  run_device_pass(lowerings_of<key>(), targets, *shapes[first], exprs, flat.leaf_span(),
                  flat.scalar_span(), active);
}
template <class... O>
void device_run(const O&... outs) {
  device_run_outputs({}, outs...);
}

} // namespace kiln::detail

#if KILN_CORE_DEFINITIONS
#include "kiln/eval/device_pass_impl.hpp"
#endif
