#pragma once
// Reductions on a JIT device (the device side of executor.hpp): one kernel from the
// template in kernels/, with the reduced expression's IR fused into its load. Short
// reductions take an invocation per output, long ones a workgroup per chunk of an output,
// in two passes where an output has several chunks (reduce_plan.hpp): no kernel loops
// longer than launch_grid.hpp's budget at any size. A hand-written kernel registered for
// the op on this kind of device (providers.hpp) goes first.
#include "kiln/jit/backend/jit_backend.hpp"
#include "kiln/jit/backend/providers.hpp"
#include "kiln/jit/pipeline/reduce_plan.hpp"
#include "kiln/jit/tune/kernel_id.hpp"
#include "kiln/jit/tune/launch_choice.hpp"
#include "kiln/jit/tune/op_tunables.hpp"
#include "kiln/jit/tune/record.hpp"

#include <cstring>
#include <map>
#include <tuple>

namespace kiln::jit {

// A reduction's kernels on one backend, per stage: the stage depends on the sizes and the
// device, not on the expression, so one lowering may be compiled for several.
// Kept per stage, workgroup size, subgroup folding (the reduction family's tuned `group`
// and `subgroup`) and the values of the prologue's custom-op tunables.
struct compiled_reduction : executor_state {
  std::mutex mutex;
  std::map<std::tuple<reduce_stage, int, bool, std::vector<long long>>,
           std::vector<std::shared_ptr<kernel>>>
      kernels;
  std::string id; // the tuning database's kernel id
  tune::choice_memo choices;
  // Where the reduced expression's custom ops, or the reduction, offer tunables
  // (tune/op_tunables.hpp).
  std::unique_ptr<tune::op_tunables> ops;
};

inline bool jit_backend::has_provider(const reduction_info& info) const {
  const auto& reg = provider_registry::instance();
  return info.builtin && !reg.empty() && reg.has(device().kind(), info.name);
}

inline bool jit_backend::needs_tensor_input(const reduction_info& info, std::size_t leaves) const {
  return static_cast<int>(leaves) + 2 > max_buffers() || has_provider(info);
}

inline void jit_backend::reduce(const device_reduction& r) {
  const lowered_pass& lp = r.lowered;
  if (r.inputs.size() == 1 && has_provider(r.info)) {
    const device_leaf& in = r.inputs[0];
    const reduce_call call{r.info.name,
                           device(),
                           {in.storage->handle(), *in.layout, in.type},
                           {r.out.handle(), r.out_layout, r.result},
                           r.mask};
    if (provider_registry::instance().run(call)) return;
  }
  const auto state = lp.state_for(state_owner(), [&] {
    auto c = std::make_shared<compiled_reduction>();
    c->id = tune::reduction_id(lp.ir, r.info.name, r.info.params);
    c->ops = tune::op_tunables_of(lp.ir, reduction_space(), r.info.name, r.info.tunables);
    return c;
  });
  auto& cr = static_cast<compiled_reduction&>(*state);
  const bool has_f64 = unsupported(dtype::f64).empty();
  const reduce_spec base{&r.info,  reduce_stage::thread,
                         r.value,  r.info.accumulator(r.value, has_f64),
                         r.result, has_f64 ? dtype::f64 : dtype::f32};
  // The plan and the kernels of one configuration (compiled once per stage, group size and
  // subgroup folding).
  // (By value: a tuner may call them after this reduction returned.)
  auto plan_for = [count = r.count, nout = r.nout, name = r.info.name](const tune::config& c) {
    reduce_plan p = plan_reduction(count, nout, c[tune::red::groups], name, c[tune::red::group],
                                   c[tune::red::thread_below]);
    p.first.preferred = p.merge.preferred = c[tune::red::groups];
    return p;
  };
  // The values a configuration gives the prologue's tunables (none where it has none).
  auto values_for = [&cr](const tune::config& c) {
    return cr.ops ? cr.ops->values_of(c) : std::vector<long long>();
  };
  auto kernels_for = [this, &cr, &lp, base](const reduce_plan& plan, int group, bool subgroup,
                                            const std::vector<long long>& values) {
    const auto key = std::make_tuple(plan.stage, group, subgroup, values);
    {
      std::lock_guard lock(cr.mutex);
      if (auto it = cr.kernels.find(key); it != cr.kernels.end()) return it->second;
    }
    reduce_spec spec = base;
    spec.stage = plan.stage;
    spec.group = group;
    spec.subgroup = subgroup;
    if (cr.ops) spec.tunables = cr.ops->reduction_tunables(values);
    std::vector<std::shared_ptr<kernel>> ks;
    const kernel_ir ir = stage_ir(cr.ops ? cr.ops->apply(lp.ir, values) : lp.ir, spec);
    auto used = ir.dtypes_used();
    used[static_cast<int>(spec.acc)] = true;
    if (const std::string why = cannot_run(used); !why.empty())
      throw error(spec.info->name, "the device cannot run this reduction",
                  device().str() + ": " + why);
    ks.push_back(compile_reduction(ir, spec));
    if (plan.stage == reduce_stage::partial) { // the second pass reads the partials
      reduce_spec merge = spec;
      merge.stage = reduce_stage::merge;
      ks.push_back(compile_reduction(stage_ir(ir, merge), merge));
    }
    std::lock_guard lock(cr.mutex);
    cr.kernels.emplace(key, ks);
    return ks;
  };
  const tune::config cfg =
      cr.choices.get(this, tuning_identity(), tune::space_of(cr.ops, reduction_space()), cr.id,
                     {tune::log2_floor(r.count), tune::log2_floor(r.nout)},
                     [plan_for, kernels_for, values_for](const tune::config& c) {
                       kernels_for(plan_for(c), static_cast<int>(c[tune::red::group]),
                                   c[tune::red::subgroup] != 0, values_for(c));
                     });
  if (tune::recording())
    tune::record_reduction(tuning_identity(), cr.id,
                           {tune::log2_floor(r.count), tune::log2_floor(r.nout)}, r);
  const reduce_plan plan = plan_for(cfg);
  const reduce_stage stage = plan.stage;
  reduce_spec spec = base;
  spec.stage = stage;
  spec.group = static_cast<int>(cfg[tune::red::group]);
  spec.subgroup = cfg[tune::red::subgroup] != 0;
  if (r.params.size() != std::size_t(r.info.params))
    throw error(r.info.name, "the reduction takes another number of run-time parameters",
                std::to_string(r.params.size()) + " given, " + std::to_string(r.info.params) +
                    " declared");
  // The run-time parameters' bits, after the expression's scalars (first pass) or alone
  // (the merge pass): stage_ir's order.
  std::vector<std::uint64_t> first_bits(r.scalars.begin(), r.scalars.end()), merge_bits;
  for (const double q : r.params) {
    std::uint64_t b = 0;
    if (spec.param_type == dtype::f64) {
      std::memcpy(&b, &q, 8);
    } else {
      const float f = static_cast<float>(q);
      std::memcpy(&b, &f, 4);
    }
    first_bits.push_back(b);
    merge_bits.push_back(b);
  }
  const std::vector<std::shared_ptr<kernel>> ks =
      kernels_for(plan, spec.group, spec.subgroup, values_for(cfg));
  const kernel& kn = *ks[0];
  std::vector<buffer_arg> args;
  std::vector<std::int64_t> offsets;
  std::vector<std::array<std::int64_t, max_rank>> strides;
  for (std::size_t i = 0; i < r.inputs.size(); ++i) {
    args.push_back({r.inputs[i].storage->handle()});
    offsets.push_back(r.inputs[i].layout->offset);
    strides.push_back(r.strides[i]);
  }
  const std::int64_t total = r.nout * r.count;
  const std::int64_t extras[reduce_extras] = {r.count, r.nout, plan.chunks, plan.chunk};
  auto params_of = [&](const kernel& k, const std::vector<std::uint64_t>& bits) {
    std::vector<std::byte> params(k.layout.bytes);
    k.layout.pack(params.data(), total, r.extents.data(), offsets.data(), strides, bits, extras);
    return params;
  };
  // A buffer the kernel indexes itself (by output, unit or partial), from its start.
  auto bind_whole = [&](void* handle) {
    args.push_back({handle});
    offsets.push_back(0);
    strides.push_back({});
  };
  if (stage != reduce_stage::partial) {
    bind_whole(r.out.handle());
    queue(kn, args, params_of(kn, first_bits), plan.first,
          static_cast<std::uint32_t>(r.scalars.size()));
    return;
  }
  // Two passes through partials, released once queued (the queue runs in order).
  std::vector<void*> partials;
  try {
    for (const dtype d : partial_dtypes(spec, lp.wide))
      partials.push_back(temp(static_cast<std::size_t>(plan.first.units) * size_of(d)));
    for (void* p : partials)
      bind_whole(p);
    queue(kn, args, params_of(kn, first_bits), plan.first,
          static_cast<std::uint32_t>(r.scalars.size()));
    const kernel& mk = *ks[1];
    args.clear();
    offsets.clear();
    strides.clear();
    for (void* p : partials)
      bind_whole(p);
    bind_whole(r.out.handle());
    queue(mk, args, params_of(mk, merge_bits), plan.merge);
  } catch (...) {
    for (void* p : partials)
      drop_temp(p);
    throw;
  }
  for (void* p : partials)
    drop_temp(p);
}

} // namespace kiln::jit
