#pragma once
// Reductions on a GPU device: one kernel from the template in kernels/, with the reduced
// expression fused into its load. The iteration runs over the input's dims reordered as
// (kept..., reduced...), merged like any pass, so element o * count + r is the r-th input
// of output o. Short reductions take an invocation per output, long ones a workgroup per
// chunk of an output, in two passes where an output has several chunks (reduce_plan.hpp):
// no kernel loops longer than launch_grid.hpp's budget at any size.
#include "kiln/jit/evaluate.hpp"
#include "kiln/jit/providers.hpp"
#include "kiln/jit/reduce_plan.hpp"
#include "kiln/reduce.hpp"

namespace kiln::jit {

template <class R>
constexpr reduce_kind kind_of() {
  if constexpr (std::is_same_v<R, reductions::sum>)
    return reduce_kind::sum;
  else if constexpr (std::is_same_v<R, reductions::prod>)
    return reduce_kind::prod;
  else if constexpr (std::is_same_v<R, reductions::mean>)
    return reduce_kind::mean;
  else if constexpr (std::is_same_v<R, reductions::max>)
    return reduce_kind::max;
  else if constexpr (std::is_same_v<R, reductions::min>)
    return reduce_kind::min;
  else if constexpr (std::is_same_v<R, reductions::argmax>)
    return reduce_kind::argmax;
  else if constexpr (std::is_same_v<R, reductions::argmin>)
    return reduce_kind::argmin;
  else if constexpr (std::is_same_v<R, reductions::all>)
    return reduce_kind::all;
  else
    return reduce_kind::any;
}

// The accumulator dtype: as the host's (double for float sums, i64 for integer ones),
// falling back to f32 where the device has no f64.
inline dtype accumulator(reduce_kind k, dtype value, bool has_f64) {
  const dtype wide_float = has_f64 ? dtype::f64 : dtype::f32;
  switch (k) {
  case reduce_kind::sum:
  case reduce_kind::prod:
    return is_floating(value) ? wide_float : dtype::i64;
  case reduce_kind::mean:
    return wide_float;
  case reduce_kind::all:
  case reduce_kind::any:
    return dtype::b8;
  default:
    return value == dtype::b8 ? dtype::u8 : compute_dtype(value);
  }
}

} // namespace kiln::jit

namespace kiln::detail {

template <class R, class E>
void device_reduce(const tensor<typename R::template result<value_t<E>>>& out, const E& e,
                   const std::array<bool, max_rank>& mask) {
  using V = value_t<E>;
  using Res = typename R::template result<V>;
  constexpr jit::reduce_kind kind = jit::kind_of<R>();
  const kiln::shape full = shape_of(e);
  const int rank = full.size();
  std::int64_t count = 1;
  kiln::shape kept;
  std::array<int, max_rank> order{}; // kept dims first, then reduced ones
  int k = 0;
  for (int d = 0; d < rank; ++d)
    if (!mask[d]) {
      kept.push_back(full[d]);
      order[k++] = d;
    }
  for (int d = 0; d < rank; ++d)
    if (mask[d]) {
      count *= full[d];
      order[k++] = d;
    }
  const std::int64_t nout = numel(kept);
  if (count == 0 && (kind == jit::reduce_kind::max || kind == jit::reduce_kind::min ||
                     kind == jit::reduce_kind::argmax || kind == jit::reduce_kind::argmin))
    if (nout > 0)
      throw error(R::name, "reduction over an empty axis has no identity", "shape " + full.str());
  if (nout == 0) return;
  auto& be = static_cast<jit::jit_backend&>(*out.storage()->backend());

  // A hand-written kernel registered for this op on this kind of device goes first.
  if (auto& reg = jit::provider_registry::instance();
      !reg.empty() && reg.has(out.device().kind(), R::name)) {
    tensor<V> in;
    if constexpr (is_tensor_v<E>)
      in = e;
    else {
      in = tensor<V>(full, out.device());
      assign(in, e);
    }
    const jit::reduce_call call{R::name,
                                out.device(),
                                {in.storage()->handle(), in.layout(), dtype_of<V>()},
                                {out.storage()->handle(), out.layout(), dtype_of<Res>()},
                                mask};
    if (reg.run(call)) return;
  }

  jit::leaf_table lt;
  jit::collect(e, lt);
  if (static_cast<int>(lt.inputs.size()) + 2 > be.max_buffers()) {
    // Too many leaves for one kernel: evaluate the expression (in stages) first.
    const tensor<V> tmp(full, out.device());
    assign(tmp, e);
    device_reduce<R>(out, tmp, mask);
    return;
  }
  kiln::shape permuted;
  for (int d = 0; d < rank; ++d)
    permuted.push_back(full[order[d]]);
  iteration_space space;
  for (const auto& l : lt.inputs) {
    const layout b = views::broadcast_to(*l.layout, full, R::name);
    std::array<std::int64_t, max_rank> st{};
    for (int d = 0; d < rank; ++d)
      st[d] = b.strides[order[d]];
    space.strides.push_back(st);
  }
  space.strides.push_back({}); // the output: indexed by o in the template, not by strides
  space.merge(permuted);
  space.strides.pop_back();
  const int mrank = space.extents.size();
  const std::int64_t total = nout * count;
  bool strided = mrank != 1;
  for (const auto& st : space.strides)
    strided = strided || st[0] != 1;
  const bool wide = total >= jit::narrow_index_limit || [&] {
    for (const auto& l : lt.inputs)
      if (l.storage->count() > std::numeric_limits<std::int32_t>::max()) return true;
    return false;
  }();
  const jit::reduce_plan plan =
      jit::plan_reduction(count, nout, be.launch_limits().preferred, R::name);
  const jit::reduce_stage stage = plan.stage;
  const jit::reduce_spec spec{
      kind, stage, dtype_of<V>(),
      jit::accumulator(kind, dtype_of<V>(), be.unsupported(dtype::f64).empty()), dtype_of<Res>()};

  struct memo_key {};
  using key = std::tuple<R, E, memo_key>;
  using memo = jit::kernel_memo<key>;
  const int variant = static_cast<int>(stage);
  const jit::compiled_pass* cp = nullptr;
  {
    std::lock_guard lock(memo::mutex);
    for (const auto& m : memo::entries)
      if (m->matches(lt, strided, mrank + 16 * variant, wide))
        for (const auto& [b, c] : m->compiled)
          if (b == &be) cp = c.get();
  }
  if (!cp) {
    const jit::kernel_ir ir =
        jit::stage_ir(jit::lower({dtype_of<V>()}, lt.pattern, strided, mrank, wide, e), spec);
    auto used = ir.dtypes_used();
    used[static_cast<int>(spec.acc)] = true;
    if (const std::string why = be.cannot_run(used); !why.empty())
      throw error(R::name, "the device cannot run this reduction", be.device().str() + ": " + why);
    auto c = std::make_unique<jit::compiled_pass>();
    c->kernels.push_back(be.compile_reduction(ir, spec));
    if (stage == jit::reduce_stage::partial) { // the second pass reads the partials
      jit::reduce_spec merge = spec;
      merge.stage = jit::reduce_stage::merge;
      c->kernels.push_back(be.compile_reduction(jit::stage_ir(ir, merge), merge));
    }
    std::lock_guard lock(memo::mutex);
    auto m = std::make_unique<jit::memo_entry>(
        jit::memo_entry{lt.pattern, strided, mrank + 16 * variant, wide, nullptr, {}});
    m->compiled.emplace_back(&be, std::move(c));
    cp = m->compiled.back().second.get();
    memo::entries.push_back(std::move(m));
  }
  const jit::kernel& kn = *cp->kernels[0];
  std::vector<jit::buffer_arg> args;
  std::vector<std::int64_t> offsets;
  std::vector<std::array<std::int64_t, max_rank>> strides;
  for (std::size_t i = 0; i < lt.inputs.size(); ++i) {
    args.push_back({lt.inputs[i].storage->handle()});
    offsets.push_back(lt.inputs[i].layout->offset);
    strides.push_back(space.strides[i]);
  }
  std::vector<std::uint64_t> scalars;
  for (const auto& s : lt.scalars)
    scalars.push_back(s.bits);
  const std::int64_t extras[jit::reduce_extras] = {count, nout, plan.chunks, plan.chunk};
  auto params_of = [&](const jit::kernel& k) {
    std::vector<std::byte> params(k.layout.bytes);
    k.layout.pack(params.data(), total, space.extents.data(), offsets.data(), strides, scalars,
                  extras);
    return params;
  };
  // A buffer the kernel indexes itself (by output, unit or partial), from its start.
  auto bind_whole = [&](void* handle) {
    args.push_back({handle});
    offsets.push_back(0);
    strides.push_back({});
  };
  if (stage != jit::reduce_stage::partial) {
    bind_whole(out.storage()->handle());
    be.launch(kn, args, params_of(kn), plan.first);
    return;
  }
  // Two passes through partials, released once queued (the queue runs in order).
  std::vector<void*> partials;
  try {
    for (const dtype d : jit::partial_dtypes(spec, wide))
      partials.push_back(be.allocate(static_cast<std::size_t>(plan.first.units) * size_of(d)));
    for (void* p : partials)
      bind_whole(p);
    be.launch(kn, args, params_of(kn), plan.first);
    const jit::kernel& mk = *cp->kernels[1];
    args.clear();
    offsets.clear();
    strides.clear();
    for (void* p : partials)
      bind_whole(p);
    bind_whole(out.storage()->handle());
    be.launch(mk, args, params_of(mk), plan.merge);
  } catch (...) {
    for (void* p : partials)
      be.release(p);
    throw;
  }
  for (void* p : partials)
    be.release(p);
}

} // namespace kiln::detail
