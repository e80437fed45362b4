// Launch geometry without a device: for every kernel kiln generates (elementwise, and each
// reduction stage), the grid it launches with keeps every invocation's loops within the
// budget (launch_grid.hpp), fits the device's grid, and covers all the work, at sizes from
// 0 to 2^40 — for CUDA's limits (as the CUDA backend computes them) and for a CPU Vulkan
// device's (lavapipe: 65535 groups per dimension, 256 preferred).
#include "kiln/jit/cuda/codegen.hpp"
#include "kiln/jit/pipeline/reduce_plan.hpp"

#include <catch2/catch.hpp>

#include <vector>

namespace {

using kiln::jit::grid_limits;
using kiln::jit::launch_work;

// The grid for w, checked: within the device's limits, every unit reached, the worst
// invocation within the budget.
void check_grid(const launch_work& w, std::int64_t workgroup, const grid_limits& lim) {
  INFO("units " << w.units << (w.per_group ? " per group" : " per invocation") << ", cost "
                << w.cost << ", workgroup " << workgroup);
  const auto g = kiln::jit::plan_grid(w, workgroup, lim);
  CHECK(g.x >= 1);
  CHECK(g.y >= 1);
  CHECK(g.x <= lim.max_x);
  CHECK(g.y <= lim.max_y);
  const std::int64_t per = kiln::jit::units_per_sweep(w, workgroup, g);
  const std::int64_t trips = kiln::jit::worst_trips(w, workgroup, g);
  CHECK(trips <= kiln::jit::loop_budget);
  // Enough sweeps to reach the last unit.
  CHECK(trips / w.cost * per >= w.units);
  // 32-bit kernels: an index below the work plus one sweep stays below 2^31.
  if (w.units < kiln::jit::narrow_index_limit) CHECK(w.units + per < (std::int64_t{1} << 31));
}

const std::vector<std::int64_t> sizes = {0,
                                         1,
                                         63,
                                         64,
                                         65,
                                         1'000'000,
                                         64 * 65535 + 1,
                                         4'300'000,
                                         std::int64_t{1} << 25,
                                         kiln::jit::narrow_index_limit - 1,
                                         kiln::jit::narrow_index_limit,
                                         (std::int64_t{1} << 31) - 1,
                                         std::int64_t{1} << 31,
                                         std::int64_t{1} << 36,
                                         std::int64_t{1} << 40};

const grid_limits lavapipe{65535, 65535, 256};

} // namespace

TEST_CASE("launch grid: elementwise kernels stay within the loop budget at every size",
          "[launch]") {
  for (const auto& lim :
       {kiln::jit::cuda::launch_limits_for(132), lavapipe, grid_limits{65535, 65535, 1}})
    for (std::int64_t wg : {1, 64, 256, 1024})
      for (std::int64_t n : sizes)
        check_grid({n, false, 1}, wg, lim);
}

TEST_CASE("launch grid: every reduction stage stays within the loop budget and covers its "
          "inputs",
          "[launch][reduce]") {
  const std::vector<std::int64_t> counts = {
      0, 1, 63, 64, 65, 4096, 65536, 1 << 20, 4'300'000, 1 << 25, 1LL << 31, 1LL << 36};
  const std::vector<std::int64_t> outs = {1, 2, 3, 1000, 1 << 20};
  for (const auto& lim : {kiln::jit::cuda::launch_limits_for(132), lavapipe})
    for (std::int64_t count : counts)
      for (std::int64_t nout : outs) {
        if (count * nout > (std::int64_t{1} << 40)) continue;
        INFO("count " << count << ", outputs " << nout << ", preferred " << lim.preferred);
        const auto p = kiln::jit::plan_reduction(count, nout, lim.preferred, "sum");
        check_grid(p.first, kiln::kernels::reduce_group_size, lim);
        if (p.stage == kiln::jit::reduce_stage::thread) {
          CHECK(count < 64);
          continue;
        }
        // The chunks tile each output's inputs: none left out, none empty.
        CHECK(p.chunks * p.chunk >= count);
        CHECK((p.chunks - 1) * p.chunk < count);
        if (p.stage == kiln::jit::reduce_stage::group) {
          CHECK(p.chunks == 1);
          continue;
        }
        CHECK(p.stage == kiln::jit::reduce_stage::partial);
        CHECK(p.chunk % 64 == 0);
        CHECK(p.first.units == nout * p.chunks);
        check_grid(p.merge, kiln::kernels::reduce_group_size, lim);
      }
}

TEST_CASE("launch grid: work past the device's grid or loop budget is a kiln::error", "[launch]") {
  CHECK_THROWS_WITH(kiln::jit::plan_grid({1, true, kiln::jit::loop_budget + 1}, 64, lavapipe),
                    Catch::Contains("more loop iterations than a kernel may run"));
  CHECK_THROWS_WITH(
      kiln::jit::plan_grid({std::int64_t{1} << 62, false, 1}, 1, grid_limits{65535, 65535, 256}),
      Catch::Contains("too much work for one launch"));
  // 2^50 inputs per output is more than two passes of bounded loops can reduce.
  CHECK_THROWS_WITH(kiln::jit::plan_reduction(std::int64_t{1} << 50, 1, 256, "sum"),
                    Catch::Contains("reduction too long") && Catch::Contains("sum"));
}
