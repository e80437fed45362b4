#pragma once
// Products on a JIT device (the device side of executor.hpp's contract): one kernel from
// the tile template in kernels/, with both operand expressions fused into its tile loads.
// Shapes the template does not suit — fewer rows or columns than the matmul family's
// `min_mn` (matrix-vector products), a K walk longer than the loop budget (the planner
// splits a K that long: device_matmul.hpp), more buffers than a kernel binds — are declined,
// and the planner runs them as a reduction.
#include "kiln/jit/backend/jit_backend.hpp"
#include "kiln/jit/tune/kernel_id.hpp"
#include "kiln/jit/tune/launch_choice.hpp"
#include "kiln/jit/tune/record.hpp"

#include <algorithm>
#include <map>
#include <thread>
#include <tuple>

namespace kiln::jit {

// A contraction's kernels on one backend, per tile configuration, the dtype stored (a split
// product's parts store the accumulator's) and, with an epilogue, the input that is the
// product: one lowering serves statements of one type whose product sits at another leaf
// (`matmul(x, w) + b` and `b + matmul(x, w)`).
struct compiled_contraction : executor_state {
  std::mutex mutex;
  std::map<std::tuple<int, int, int, int, int, int, int>, std::shared_ptr<kernel>> kernels;
  std::string id; // the tuning database's kernel id
  tune::choice_memo choices;
};

// A CPU implementation (lavapipe) runs one workgroup per thread of the machine; a GPU a few
// per compute unit (128: about an H100's streaming multiprocessors).
inline std::int64_t jit_backend::concurrent_groups() const {
  if (tuning_limits().cpu) return std::max(1u, std::thread::hardware_concurrency());
  return 128;
}

inline bool jit_backend::contract(const device_contraction& c) {
  const lowered_pass& lp = c.lowered;
  const int nb = c.batch_rank;
  if (static_cast<int>(c.inputs.size() + c.targets.size()) > max_buffers()) return false;
  std::int64_t batch = 1;
  for (int d = 0; d < nb; ++d)
    batch *= c.extents[d];
  const std::int64_t m = c.extents[nb], n = c.extents[nb + 1], k = c.extents[nb + 2];
  if (batch * m * n == 0) return true; // nothing to store
  const auto state = lp.state_for(this, [&] {
    auto s = std::make_shared<compiled_contraction>();
    s->id = tune::contraction_id(lp.ir);
    return s;
  });
  auto& cc = static_cast<compiled_contraction&>(*state);
  const contract_spec base{c.acc, c.result, nb, {}, c.product};
  auto kernel_for = [this, &cc, &lp, base](const tune::config& cfg) {
    contract_spec spec = base;
    spec.tile = tune::tile_of(cfg);
    const auto key = std::make_tuple(spec.tile.tm, spec.tile.tn, spec.tile.tk, spec.tile.rm,
                                     spec.tile.rn, spec.product, static_cast<int>(spec.result));
    {
      std::lock_guard lock(cc.mutex);
      if (auto it = cc.kernels.find(key); it != cc.kernels.end()) return it->second;
    }
    const kernel_ir ir = contract_ir(lp.ir, spec);
    auto used = ir.dtypes_used();
    used[static_cast<int>(spec.acc)] = true;
    if (const std::string why = cannot_run(used); !why.empty())
      throw error("matmul", "the device cannot run this product", device().str() + ": " + why);
    auto kn = compile_contraction(ir, spec);
    std::lock_guard lock(cc.mutex);
    cc.kernels.emplace(key, kn);
    return kn;
  };
  const tune::size_bucket bucket{tune::log2_floor(std::max<std::int64_t>(k, 1)),
                                 tune::log2_floor(batch * m * n)};
  const tune::config cfg =
      cc.choices.get(this, tuning_identity(), matmul_space(), cc.id, bucket,
                     [kernel_for](const tune::config& cf) { (void)kernel_for(cf); });
  if (tune::recording()) tune::record_contraction(tuning_identity(), cc.id, bucket, c);
  if (std::min(m, n) < cfg[tune::mm::min_mn]) return false;
  const kernels::contraction_tile tile = tune::tile_of(cfg);
  const contract_plan plan = plan_contraction(batch, m, n, k, tile);
  if (!plan.fits) return false;
  const std::shared_ptr<kernel> kn = kernel_for(cfg);
  std::vector<buffer_arg> args;
  std::vector<std::int64_t> offsets;
  std::vector<std::array<std::int64_t, max_rank>> strides;
  for (std::size_t i = 0; i < c.inputs.size(); ++i) {
    args.push_back({c.inputs[i].storage->handle()});
    offsets.push_back(c.inputs[i].layout->offset);
    strides.push_back(c.strides[i]);
  }
  for (std::size_t t = 0; t < c.targets.size(); ++t) {
    args.push_back({c.targets[t]->handle()});
    offsets.push_back(c.target_offsets[t]);
    strides.push_back(c.target_strides[t]);
  }
  const std::int64_t extras[contract_extras] = {m, n, k, plan.tiles_n, plan.per_batch, plan.units};
  std::vector<std::byte> params(kn->layout.bytes);
  kn->layout.pack(params.data(), plan.units, c.extents.data(), offsets.data(), strides, c.scalars,
                  extras);
  launch(*kn, args, params, plan.work);
  return true;
}

} // namespace kiln::jit
