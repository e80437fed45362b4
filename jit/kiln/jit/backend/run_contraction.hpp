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
  std::map<std::tuple<int, int, int, int, int, int, int, int, int>, std::shared_ptr<kernel>>
      kernels;
  std::string id; // the tuning database's kernel id
  tune::choice_memo choices;
};

// A CPU implementation (lavapipe) runs one workgroup per thread of the machine; a GPU a few
// per compute unit (128: about an H100's streaming multiprocessors).
inline std::int64_t jit_backend::concurrent_groups() const {
  if (tuning_limits().cpu) return std::max(1u, std::thread::hardware_concurrency());
  return 128;
}

// A contraction's kernels and choices (its state on this backend), and the size its
// configuration is chosen at: the whole product's K and batch elements (a split's part has
// the whole K in whole_k, and its parts as the first batch dim), and their bucket.
struct contraction_site {
  compiled_contraction* cc;
  std::int64_t k, batch;
  tune::size_bucket bucket;
};
inline contraction_site site_of(jit_backend* be, const device_contraction& c) {
  const auto state = c.lowered.state_for(be->state_owner(), [&] {
    auto s = std::make_shared<compiled_contraction>();
    s->id = tune::contraction_id(c.lowered.ir);
    return s;
  });
  const int nb = c.batch_rank;
  std::int64_t batch = 1;
  for (int d = c.parts_first ? 1 : 0; d < nb; ++d)
    batch *= c.extents[d];
  const std::int64_t k = c.whole_k > 0 ? c.whole_k : c.extents[nb + 2];
  const std::int64_t outputs = batch * c.extents[nb] * c.extents[nb + 1];
  return {&static_cast<compiled_contraction&>(*state),
          k,
          batch,
          {tune::log2_floor(std::max<std::int64_t>(k, 1)), tune::log2_floor(outputs)}};
}

// The configuration a contraction's kernel takes: tuned, forced by a tuner, or the defaults.
inline tune::config jit_backend::contract_choice(const device_contraction& c) {
  const contraction_site site = site_of(this, c);
  compiled_contraction& cc = *site.cc;
  const contract_spec base{c.acc, c.result, c.batch_rank, {}, c.product};
  // A split may help a long K over few output tiles (a few times fewer than the device runs
  // at once, around split_k_chunk's rule); other products search their tiles alone.
  const bool splits =
      site.k >= kiln::detail::split_k_least &&
      kiln::detail::split_k_tiles(site.batch, c.extents[c.batch_rank],
                                  c.extents[c.batch_rank + 1]) < 8 * concurrent_groups();
  return cc.choices.get(this, tuning_identity(), matmul_space(splits, c.provider_rule), cc.id,
                        site.bucket, [this, &cc, &lp = c.lowered, base](const tune::config& cf) {
                          (void)contraction_kernel(cc, lp, base, cf);
                        });
}

// The choice contract_provider or contract_parts made for the contraction it was asked
// about, which the other and contract then take for the same contraction: one choice (and
// one site a tuner sees) per product.
struct asked_contraction {
  const device_contraction* c = nullptr;
  tune::config cfg;
};
inline asked_contraction& last_asked() {
  thread_local asked_contraction a;
  return a;
}

inline const tune::config& jit_backend::asked_choice(const device_contraction& c) {
  asked_contraction& a = last_asked();
  if (a.c != &c) {
    a.cfg = contract_choice(c);
    a.c = &c;
  }
  return a.cfg;
}

inline std::int64_t jit_backend::contract_parts(const device_contraction& c) {
  const tune::config& cfg = asked_choice(c);
  // A product the kernel declines (fewer rows or columns than min_mn) is not split either:
  // it runs as the reduction.
  const int nb = c.batch_rank;
  if (std::min(c.extents[nb], c.extents[nb + 1]) < cfg[tune::mm::min_mn]) return -1;
  return cfg[tune::mm::split];
}

// The library or kiln's kernel, as chosen for the product's kernel; the choice is kept for
// contract_parts and contract where it is kiln's.
inline int jit_backend::contract_provider(const device_contraction& c) {
  if (c.provider_rule < 0) return -1;
  const int pick = static_cast<int>(asked_choice(c)[tune::mm::provider]);
  if (pick == 1) contract_declined(); // (the library's: no launch of c follows)
  return pick;
}

inline void jit_backend::contract_declined() { last_asked().c = nullptr; }

// The kernel of a configuration, compiled once per backend.
inline std::shared_ptr<kernel> jit_backend::contraction_kernel(compiled_contraction& cc,
                                                               const lowered_pass& lp,
                                                               const contract_spec& base,
                                                               const tune::config& cfg) {
  contract_spec spec = base;
  spec.tile = tune::tile_of(cfg);
  const auto key = std::make_tuple(spec.tile.tm, spec.tile.tn, spec.tile.tk, spec.tile.rm,
                                   spec.tile.rn, spec.tile.rows_adjacent, spec.tile.stages,
                                   spec.product, static_cast<int>(spec.result));
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
}

inline bool jit_backend::contract(const device_contraction& c) {
  asked_contraction& asked = last_asked();
  const bool was_asked = asked.c == &c;
  asked.c = nullptr; // (before any return: never a pointer past its contraction's life)
  const int nb = c.batch_rank;
  if (static_cast<int>(c.inputs.size() + c.targets.size()) > max_buffers()) return false;
  std::int64_t batch = 1;
  for (int d = 0; d < nb; ++d)
    batch *= c.extents[d];
  const std::int64_t m = c.extents[nb], n = c.extents[nb + 1], k = c.extents[nb + 2];
  if (batch * m * n == 0) return true; // nothing to store
  const contraction_site site = site_of(this, c);
  compiled_contraction& cc = *site.cc;
  const tune::size_bucket& bucket = site.bucket;
  const contract_spec base{c.acc, c.result, nb, {}, c.product};
  const tune::config cfg = was_asked ? asked.cfg : contract_choice(c);
  if (tune::recording()) tune::record_contraction(tuning_identity(), cc.id, bucket, c);
  if (std::min(m, n) < cfg[tune::mm::min_mn]) return false;
  const kernels::contraction_tile tile = tune::tile_of(cfg);
  const contract_plan plan = plan_contraction(batch, m, n, k, tile);
  if (!plan.fits) return false;
  const std::shared_ptr<kernel> kn = contraction_kernel(cc, c.lowered, base, cfg);
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
  queue(*kn, args, params, plan.work, static_cast<std::uint32_t>(c.scalars.size()));
  return true;
}

} // namespace kiln::jit
