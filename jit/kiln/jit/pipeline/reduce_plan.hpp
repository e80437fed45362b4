#pragma once
// How a reduction of `count` inputs into each of `nout` outputs is split over kernels so that
// no invocation loops more than launch_grid.hpp's budget: short reductions take an
// invocation per output; long ones a workgroup per chunk of an output, in one pass when an
// output is one chunk, else two (partials, then a merge over each output's chunks). Chunks
// are sized for about the device's preferred number of workgroups in all. The workgroup
// size G (a power of two), the count below which an invocation takes a whole output, and
// the preferred group count are the reduction family's tunable parameters
// (jit/tune/families.hpp); their defaults are 64, 64 and the device's preference.
#include "kiln/error.hpp"
#include "kiln/jit/pipeline/launch_grid.hpp"
#include "kiln/jit/pipeline/reduce_spec.hpp"
#include "kiln/kernels/reduce_template.hpp"

#include <algorithm>
#include <bit>
#include <string>

namespace kiln::jit {

struct reduce_plan {
  reduce_stage stage = reduce_stage::thread;
  std::int64_t chunk = 0;  // inputs per chunk (a multiple of the group size when chunks > 1)
  std::int64_t chunks = 1; // chunks per output
  launch_work first;       // the kernel of `stage`
  launch_work merge;       // the second pass (stage partial only)
};

inline reduce_plan plan_reduction(std::int64_t count, std::int64_t nout,
                                  std::int64_t preferred_groups, const char* op,
                                  std::int64_t g = kernels::reduce_group_size,
                                  std::int64_t thread_below = kernels::reduce_group_size) {
  // Loop iterations of the tree (log2 g) and of the outer loop (1).
  const std::int64_t tree = 1 + std::bit_width(std::uint64_t(g)) - 1;
  reduce_plan p;
  p.chunk = count;
  if (count < thread_below && 1 + count <= loop_budget) {
    p.first = {nout, false, 1 + count};
    return p;
  }
  const std::int64_t max_trips = loop_budget / 2; // per chunk, and per lane of the merge
  const std::int64_t needed = (count + g * g * max_trips - 1) / (g * g * max_trips);
  if (needed > max_trips)
    throw error(op, "reduction too long for the device's kernels",
                std::to_string(count) + " inputs per output");
  const std::int64_t total = count * nout;
  const std::int64_t per_group = std::max<std::int64_t>(preferred_groups, 1) * g;
  const std::int64_t preferred = (total + per_group - 1) / per_group;
  const std::int64_t trips =
      std::min({std::max({preferred, needed, std::int64_t{1}}), max_trips, (count + g - 1) / g});
  p.chunks = (count + g * trips - 1) / (g * trips);
  if (p.chunks == 1) {
    p.stage = reduce_stage::group;
    p.first = {nout, true, tree + (count + g - 1) / g};
    return p;
  }
  p.stage = reduce_stage::partial;
  p.chunk = g * trips;
  p.first = {nout * p.chunks, true, tree + trips};
  p.merge = {nout, true, tree + (p.chunks + g - 1) / g};
  return p;
}

} // namespace kiln::jit
