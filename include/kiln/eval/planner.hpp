#pragma once
// The planner, one for the host and every device: which outputs may be computed in place
// and which need temporaries. It reads the flat lists of targets and leaves (flat.hpp), so
// its code exists once per program. Overlap is decided on memory, not storage objects: on
// the host on addresses (two handles made by view_of() over one container have separate
// storage objects over the same memory), on a device on the backend's buffer and byte
// offsets within it.
#include "kiln/error.hpp"
#include "kiln/eval/flat.hpp"
#include "kiln/linkage.hpp"

#include <span>

namespace kiln::detail {

// One output as the planner sees it: the target, the value's shape, the value's leaves.
struct plan_output {
  flat_leaf target; // storage null: an empty tensor handle
  kiln::shape value;
  std::span<const flat_leaf> leaves;
};

// Checks the outputs of one kiln::eval (or one assignment): targets with storage, on one
// device with every leaf, each taking its value's shape. Says whether they may be computed
// in place: else every output goes through a temporary, so that every value is computed
// from the inputs as they were (numpy's semantics). With one shape, that is where a target
// overlaps an input or another target through a different layout; with several (computed
// in groups, one pass per shape), where a target shares memory with another output's
// inputs or target, as a later group would read what an earlier one wrote.
KILN_CORE_INLINE bool plan_in_place(std::span<const plan_output> outs, const char* op);

} // namespace kiln::detail

#if KILN_CORE_DEFINITIONS
#include "kiln/eval/planner_impl.hpp"
#endif
