#pragma once
// How many workgroups a launch gets, so that no invocation loops more than a fixed budget.
// Every generated kernel walks its work units (elements, outputs, reduction chunks) with a
// grid-stride loop; a unit costs a known number of loop iterations (a reduction's inner
// loop and tree). Mesa's llvmpipe ends an invocation's loops after 65,535 iterations in all
// without an error (measured: nested loops share the count), and GPU drivers have
// watchdogs, so the grid is sized from the work: enough groups that one invocation never
// runs more than `loop_budget` iterations, in two grid dimensions where one is too small.
#include "kiln/error.hpp"
#include "kiln/executor.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

namespace kiln::jit {

// Loop iterations one invocation may run, all its loops together (well under llvmpipe's
// 65,535, so that a kernel's fixed loops, the reduction tree, never tip it over).
inline constexpr std::int64_t loop_budget = 16384;

// What a kernel's outer loop walks: `units` work units, each taken by one invocation
// (per_group = false: elements, short reductions' outputs) or by a whole workgroup
// (per_group = true: long reductions' chunks and outputs); `cost` loop iterations per unit,
// the outer loop's own included.
// Work of kiln::narrow_index_limit units or more takes 64-bit indices (executor.hpp); it
// holds for workgroups of at most this size.
inline constexpr std::int64_t max_workgroup = 1024;
using kiln::narrow_index_limit;

struct launch_work {
  std::int64_t units = 0;
  bool per_group = false;
  std::int64_t cost = 1;
  std::int64_t preferred = 0; // groups wanted (a tuned configuration's); 0: the device's
};

// A device's grid limits and its preferred number of groups (more only when the budget
// needs them: a CPU device runs a few hundred groups that loop faster than many).
struct grid_limits {
  std::int64_t max_x = 65535, max_y = 65535;
  std::int64_t preferred = 65535;
};

struct launch_grid {
  std::int64_t x = 1, y = 1; // workgroups in each dimension; kernels flatten them x-major
  std::int64_t groups() const { return x * y; }
};

// Units one sweep of the grid covers.
inline std::int64_t units_per_sweep(const launch_work& w, std::int64_t workgroup,
                                    const launch_grid& g) {
  return g.groups() * (w.per_group ? 1 : workgroup);
}

// The most loop iterations any invocation runs under grid g: sweeps times cost per unit.
inline std::int64_t worst_trips(const launch_work& w, std::int64_t workgroup,
                                const launch_grid& g) {
  const std::int64_t per = units_per_sweep(w, workgroup, g);
  return (w.units + per - 1) / per * w.cost;
}

// The grid for work w with this workgroup size: the preferred group count, raised where
// the budget needs more. Work too large for the device's grid is a kiln::error.
inline launch_grid plan_grid(const launch_work& w, std::int64_t workgroup, const grid_limits& lim,
                             const char* op = "launch") {
  if (w.cost > loop_budget)
    throw error(op, "one work unit needs more loop iterations than a kernel may run",
                std::to_string(w.cost) + " > " + std::to_string(loop_budget));
  const std::int64_t per_group = w.per_group ? 1 : workgroup;
  const std::int64_t units = std::max<std::int64_t>(w.units, 1);
  const std::int64_t natural = (units + per_group - 1) / per_group; // one unit per slot
  const std::int64_t sweeps = loop_budget / w.cost;                 // sweeps one slot may make
  const std::int64_t needed = (natural + sweeps - 1) / sweeps;
  const std::int64_t want = w.preferred > 0 ? std::min(w.preferred, lim.max_x) : lim.preferred;
  const std::int64_t groups = std::max({std::min(natural, want), needed, std::int64_t{1}});
  launch_grid g;
  if (groups <= lim.max_x) {
    g.x = groups;
    return g;
  }
  g.y = (groups + lim.max_x - 1) / lim.max_x;
  if (g.y > lim.max_y)
    throw error(op, "too much work for one launch on this device",
                std::to_string(w.units) + " units of " + std::to_string(w.cost) +
                    " iterations; grid limit " + std::to_string(lim.max_x) + " x " +
                    std::to_string(lim.max_y) + " groups");
  g.x = (groups + g.y - 1) / g.y;
  return g;
}

} // namespace kiln::jit
