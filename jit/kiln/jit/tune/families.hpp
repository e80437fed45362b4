#pragma once
// The kernel families kiln generates and their tunable parameters, with today's values as
// defaults and the device's limits as constraints (`kiln-tune list` prints these).
#include "kiln/jit/tune/space.hpp"
#include "kiln/kernels/contract_template.hpp"
#include "kiln/kernels/reduce_template.hpp"

namespace kiln::jit::tune {

// elementwise: one generated kernel per fused pass (a grid-stride loop; pipeline/pass_shape.hpp).
namespace ew {
enum : std::size_t { workgroup, groups, per_invocation, vector };
} // namespace ew

inline space elementwise_space(const device_limits& l, std::int64_t default_workgroup,
                               std::int64_t default_groups, std::int64_t default_vector = 1) {
  const std::int64_t wg_max = std::min<std::int64_t>(l.max_workgroup, 1024);
  std::vector<std::int64_t> groups;
  for (std::int64_t g : {16, 64, 256, 1024, 4096, 16384, 65535})
    if (g <= l.max_groups) groups.push_back(g);
  if (std::find(groups.begin(), groups.end(), default_groups) == groups.end())
    groups.push_back(default_groups);
  std::sort(groups.begin(), groups.end());
  return space("elementwise",
               {{"workgroup", "invocations per workgroup",
                 powers_of_two(32, wg_max, std::min(default_workgroup, wg_max)),
                 std::min(default_workgroup, wg_max)},
                {"groups", "workgroups wanted; past them invocations loop over elements", groups,
                 std::min(default_groups, l.max_groups)},
                {"per_invocation",
                 "units each invocation takes per trip of its loop, a grid apart",
                 {1, 2, 4, 8},
                 1},
                {"vector",
                 "adjacent elements per unit (CUDA: one vector load/store where aligned)",
                 {1, 2, 4, 8},
                 default_vector}});
}

// reduction: the kernel templates of kernels/reduce_template.hpp with a fused prologue.
namespace red {
enum : std::size_t { group, thread_below, groups, subgroup };
} // namespace red

// Shared memory a reduction's tree needs per invocation at most: two 8-byte accumulators
// and an 8-byte index.
inline constexpr std::int64_t reduce_shared_per_lane = 24;

inline space reduction_space(const device_limits& l, std::int64_t default_groups) {
  const std::int64_t wg_max = std::min<std::int64_t>(l.max_workgroup, 1024);
  std::vector<std::int64_t> groups;
  for (std::int64_t g : {16, 64, 256, 1024, 4096, 65535})
    if (g <= l.max_groups) groups.push_back(g);
  if (std::find(groups.begin(), groups.end(), default_groups) == groups.end())
    groups.push_back(default_groups);
  std::sort(groups.begin(), groups.end());
  const std::int64_t shared = l.shared_bytes, lanes = l.subgroup;
  return space("reduction",
               {{"group", "invocations per workgroup (a power of two)", powers_of_two(32, wg_max),
                 kernels::reduce_group_size},
                {"thread_below",
                 "inputs per output below which one invocation reduces an output",
                 {8, 16, 32, 64, 128, 256, 512},
                 kernels::reduce_group_size},
                {"groups", "workgroups wanted, which sets the chunks of long reductions", groups,
                 std::min(default_groups, l.max_groups)},
                {"subgroup",
                 lanes > 0 ? "1: each subgroup (" + std::to_string(lanes) +
                                 " lanes) folds by shuffles before the shared-memory tree"
                           : std::string("0 only: the device has no subgroup shuffles in "
                                         "compute shaders"),
                 lanes > 0 ? std::vector<std::int64_t>{0, 1} : std::vector<std::int64_t>{0}, 0}},
               [shared, lanes](const config& c) -> std::string {
                 if (c[red::group] * reduce_shared_per_lane > shared)
                   return "group = " + std::to_string(c[red::group]) + " needs " +
                          std::to_string(c[red::group] * reduce_shared_per_lane) +
                          " bytes of workgroup memory, the device has " + std::to_string(shared);
                 // Whole subgroups only: the shuffles read lanes up to the subgroup's size.
                 // (Vulkan promises whole subgroups under REQUIRE_FULL_SUBGROUPS, which kiln
                 // asks for where the device has computeFullSubgroups; elsewhere a group that
                 // is a multiple of the subgroup size runs as whole subgroups on the drivers
                 // kiln meets, and a tuner's output check rejects a config that does not.)
                 if (c[red::subgroup] != 0 && c[red::group] < lanes)
                   return "subgroup = 1 needs group >= the device's " + std::to_string(lanes) +
                          " lanes per subgroup";
                 return {};
               });
}

// matmul: the contraction template of kernels/contract_template.hpp (a workgroup per output
// tile, a register tile per invocation), and the size below which a product runs as the
// reduction template instead (a dot product per output: matrix-vector shapes).
namespace mm {
enum : std::size_t { tm, tn, tk, rm, rn, min_mn, split, rows_adjacent, stages, provider };
} // namespace mm

// The products min_mn sends to the reduction by default: fewer rows or columns than this.
inline constexpr std::int64_t matmul_min_mn = 8;

// Shared memory per element of the tiles at most: an 8-byte accumulator.
inline constexpr std::int64_t matmul_shared_per_element = 8;

inline kernels::contraction_tile tile_of(const config& c) {
  kernels::contraction_tile t;
  t.tm = static_cast<int>(c[mm::tm]);
  t.tn = static_cast<int>(c[mm::tn]);
  t.tk = static_cast<int>(c[mm::tk]);
  t.rm = static_cast<int>(c[mm::rm]);
  t.rn = static_cast<int>(c[mm::rn]);
  t.rows_adjacent = static_cast<int>(c[mm::rows_adjacent]);
  t.stages = static_cast<int>(c[mm::stages]);
  return t;
}

// `splits`: whether `split` takes values other than 0 (the rule). Only products a split can
// help (a long K over few output tiles) search it; elsewhere a sample over it would spend a
// tuner's budget on parts that only slow a product down. `provider_rule`: whether the
// device's vendor library could compute the product (-1: no; `provider` is then 0 alone)
// and what the rule picks (0 kiln's kernel, 1 the library: `provider`'s default). The
// library's product is measured once, with the default tile (it uses none).
inline space matmul_space(const device_limits& l, bool splits = true, int provider_rule = -1) {
  const kernels::contraction_tile d;
  const std::int64_t wg_max = std::min<std::int64_t>(l.max_workgroup, 1024);
  const std::int64_t shared = l.shared_bytes;
  return space(
      "matmul",
      {{"tm", "output rows per workgroup tile", {16, 32, 64, 128}, d.tm},
       {"tn", "output columns per workgroup tile", {16, 32, 64, 128}, d.tn},
       {"tk", "K step: the depth of the shared-memory tiles", {8, 16, 32}, d.tk},
       {"rm", "output rows per invocation (its register tile)", {1, 2, 4, 8}, d.rm},
       {"rn", "output columns per invocation (its register tile)", {1, 2, 4, 8}, d.rn},
       {"min_mn",
        "products with fewer rows or columns than this run as a reduction, a dot product per "
        "output (matrix-vector shapes)",
        {1, 2, 4, 8, 16, 32},
        matmul_min_mn},
       {"split",
        "parts K is cut into, each part's product then summed (split-K); 0: the rule (a long K "
        "over fewer output tiles than the device runs at once), 1: none (a K past 32,768 is "
        "cut all the same)",
        splits ? std::vector<std::int64_t>{0, 1, 2, 4, 8, 16, 32, 64}
               : std::vector<std::int64_t>{0},
        0},
       {"rows_adjacent",
        "1: each invocation's register rows adjacent in the A tile (its reads of A may become "
        "vector loads), 0: rows strided across the workgroup",
        {0, 1},
        d.rows_adjacent},
       {"stages",
        "shared-memory buffers: 1, load then multiply, two barriers per K step; 2, the next "
        "step's tiles loaded while this one's are multiplied, one barrier",
        {1, 2},
        d.stages},
       {"provider",
        "1: the device's vendor library computes the product (cuBLAS on CUDA), a fused "
        "consumer then runs as a pass; 0: kiln's kernel. The default is the rule's choice "
        "(plain products and fused ones of at least 2^24 multiply-adds to the library); "
        "only products the library can take search it",
        provider_rule < 0 ? std::vector<std::int64_t>{0} : std::vector<std::int64_t>{0, 1},
        std::max(provider_rule, 0)}},
      [wg_max, shared, d](const config& c) -> std::string {
        const kernels::contraction_tile t = tile_of(c);
        if (c[mm::provider] == 1)
          return t.tm == d.tm && t.tn == d.tn && t.tk == d.tk && t.rm == d.rm && t.rn == d.rn &&
                         t.rows_adjacent == d.rows_adjacent && t.stages == d.stages &&
                         c[mm::split] == 0 && c[mm::min_mn] == matmul_min_mn
                     ? std::string()
                     : "the library's product takes no tile: measured once, with the defaults";
        if (std::string why = t.why_not(); !why.empty()) return why;
        if (t.threads() > wg_max)
          return std::to_string(t.threads()) + " invocations per workgroup, the device has " +
                 std::to_string(wg_max);
        const std::int64_t bytes = std::int64_t(t.shared_words()) * matmul_shared_per_element;
        if (bytes > shared)
          return "tiles of " + std::to_string(bytes) +
                 " bytes of workgroup memory, the device has " + std::to_string(shared);
        return {};
      });
}

} // namespace kiln::jit::tune
