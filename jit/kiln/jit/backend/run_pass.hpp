#pragma once
// A pass on a JIT device (the device side of executor.hpp): the planner hands over the
// pass lowered to IR; here it is compiled once per backend and queued without waiting.
//   1. the lowering's compiled kernels are kept beside it (lowered_pass::state_for): a
//      later pass of the same specialization builds no string and hashes nothing; a miss
//      splits the IR into stages when it needs more buffers than one kernel may bind
//      (stages.hpp), and the backend compiles each (or loads it from its caches);
//   2. the launch's configuration (workgroup size, groups, units per invocation, vector
//      width) is the elementwise family's tuned choice for this kernel and size, else the
//      defaults (tune/launch_choice.hpp), and the values of its custom ops' tunables where
//      they offer some (tune/op_tunables.hpp); each configuration's kernels are compiled once;
//   3. parameters (sizes, strides, offsets, scalars) are packed and the stages queued.
#include "kiln/executor.hpp"
#include "kiln/jit/backend/jit_backend.hpp"
#include "kiln/jit/backend/launch_list.hpp"
#include "kiln/jit/pipeline/stages.hpp"
#include "kiln/jit/tune/kernel_id.hpp"
#include "kiln/jit/tune/launch_choice.hpp"
#include "kiln/jit/tune/op_tunables.hpp"
#include "kiln/jit/tune/record.hpp"

namespace kiln::jit {

// How a configuration of the elementwise family walks the elements.
inline pass_shape shape_of(const tune::config& c) {
  return {c[tune::ew::workgroup], static_cast<int>(c[tune::ew::per_invocation]),
          static_cast<int>(c[tune::ew::vector])};
}

// A pass lowered and compiled for one backend: its stages' kernels per configuration.
struct compiled_pass : executor_state {
  std::shared_ptr<const stage_plan> plan;
  std::vector<std::shared_ptr<kernel>> kernels; // one per stage, default configuration
  pass_shape base;                              // the default configuration's walk
  std::string id;                               // the tuning database's kernel id
  tune::choice_memo choices;
  std::unique_ptr<tune::op_tunables> ops; // where the pass's custom ops offer tunables
  std::mutex mutex;
  std::map<std::pair<pass_shape, std::vector<long long>>, std::vector<std::shared_ptr<kernel>>>
      by_config;

  // The stages' kernels for configuration c (compiled on first use).
  const std::vector<std::shared_ptr<kernel>>& kernels_at(jit_backend& be, const tune::config& c) {
    const pass_shape s = shape_of(c);
    const std::vector<long long> values = ops ? ops->values_of(c) : std::vector<long long>();
    if (s.per_invocation == base.per_invocation && s.vector == base.vector &&
        s.workgroup == kernels.front()->workgroup && (!ops || ops->defaults(values)))
      return kernels;
    const auto key = std::make_pair(s, values);
    {
      std::lock_guard lock(mutex);
      if (auto it = by_config.find(key); it != by_config.end()) return it->second;
    }
    std::vector<std::shared_ptr<kernel>> ks;
    for (const auto& st : plan->stages)
      ks.push_back(be.compile(ops ? ops->apply(st.ir, values) : st.ir, s));
    std::lock_guard lock(mutex);
    return by_config.emplace(key, std::move(ks)).first->second; // a racing copy is the same
  }
};

namespace detail {

// The compiled kernels of a lowering on backend `be`, compiled on first use; the
// backend's compile is single-flight, so threads racing here share one compile of each.
inline compiled_pass& kernels_for(jit_backend& be, const lowered_pass& lp) {
  const auto state = lp.state_for(be.state_owner(), [&] {
    auto plan = std::make_shared<const stage_plan>(split_stages(lp.ir, be.max_buffers()));
    if (const std::string why = be.cannot_run(plan->dtypes_used()); !why.empty())
      throw error("eval", "the device cannot run this expression", be.device().str() + ": " + why);
    auto c = std::make_shared<compiled_pass>();
    c->plan = plan;
    c->id = tune::pass_id(lp.ir);
    c->ops = tune::op_tunables_of(lp.ir, be.elementwise_space());
    c->base = shape_of(be.elementwise_space().defaults());
    c->base.workgroup = 0; // (the backend's default)
    for (const auto& st : plan->stages)
      c->kernels.push_back(be.compile(st.ir, c->base));
    return c;
  });
  // Kept alive by the lowering, which lives as long as the program.
  return static_cast<compiled_pass&>(*state);
}

// Queues the stages of a compiled pass. Buffer strides come from the merged iteration
// space (outputs first, then the unique inputs); temporaries are row-major over it.
inline void launch_stages(jit_backend& be, compiled_pass& cp, const device_pass& p) {
  const kiln::shape& extents = p.extents;
  const std::int64_t n = p.n;
  const tune::space& sp = tune::space_of(cp.ops, be.elementwise_space());
  const tune::config cfg =
      cp.choices.get(&be, be.tuning_identity(), sp, cp.id, {tune::log2_floor(n)},
                     [&be, &cp](const tune::config& c) { cp.kernels_at(be, c); });
  const pass_shape shape = shape_of(cfg);
  const auto& kernels = cp.kernels_at(be, cfg);
  if (tune::recording()) tune::record_pass(be.tuning_identity(), cp.id, {tune::log2_floor(n)}, p);
  const auto& dsts = p.targets;
  const auto& dst_layouts = p.target_layouts;
  const int rank = extents.size();
  const auto nout = dsts.size();
  std::array<std::int64_t, max_rank> dense{};
  for (std::int64_t d = rank - 1, m = 1; d >= 0; --d) {
    dense[d] = m;
    m *= extents[d];
  }
  thread_local std::vector<void*> temps;
  temps.clear();
  for (dtype t : cp.plan->temps)
    temps.push_back(be.temp(static_cast<std::size_t>(n) * size_of(t)));
  thread_local std::vector<buffer_arg> args;
  thread_local std::vector<std::int64_t> offsets;
  thread_local std::vector<std::array<std::int64_t, max_rank>> strides;
  thread_local std::vector<std::byte> params;
  try {
    for (std::size_t k = 0; k < kernels.size(); ++k) {
      const stage& st = cp.plan->stages[k];
      args.clear();
      offsets.clear();
      strides.clear();
      for (const auto& b : st.buffers) {
        switch (b.kind) {
        case buffer_source::input:
          args.push_back({p.inputs[b.index].storage->handle()});
          offsets.push_back(p.inputs[b.index].layout->offset);
          strides.push_back(p.strides[nout + b.index]);
          break;
        case buffer_source::temp:
          args.push_back({temps[b.index]});
          offsets.push_back(0);
          strides.push_back(dense);
          break;
        case buffer_source::output:
          args.push_back({dsts[b.index]->handle()});
          offsets.push_back(dst_layouts[b.index]->offset);
          strides.push_back(p.strides[b.index]);
          break;
        }
      }
      const kernel& kn = *kernels[k];
      params.assign(kn.layout.bytes, std::byte{0});
      kn.layout.pack(params.data(), n, extents.data(), offsets.data(), strides, p.scalars);
      be.queue(kn, args, params,
               launch_work{shape.units(n), false, shape.cost(), cfg[tune::ew::groups]},
               static_cast<std::uint32_t>(p.scalars.size()));
    }
  } catch (...) {
    for (void* t : temps)
      be.drop_temp(t);
    throw;
  }
  // Released now, reused safely: later work on the in-order queue runs after these stages.
  for (void* t : temps)
    be.drop_temp(t);
}

} // namespace detail

inline void jit_backend::run(const device_pass& p) {
  detail::launch_stages(*this, detail::kernels_for(*this, p.lowered), p);
}

} // namespace kiln::jit
