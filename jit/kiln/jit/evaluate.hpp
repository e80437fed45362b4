#pragma once
// Evaluation on a GPU device: every assignment (and kiln::eval with several outputs) whose
// target lives on a JIT device becomes one kernel launch, queued without waiting.
//   1. reductions inside are computed first (each its own kernel, queued before);
//   2. an output overlapping an input through another layout goes through a temporary;
//   3. leaves are collected; equal ones (same memory, layout, dtype) share one buffer;
//   4. layouts merge into the fewest dims (as on the host): rank 1 with unit strides is a
//      linear kernel, anything else strided over the merged rank;
//   5. the key (expression types, leaf pattern, linear/strided, rank, index width) finds
//      the lowered IR and the compiled kernel in kernel_memo: a hit builds no string and
//      hashes nothing; a miss lowers, and the backend compiles (or loads from its caches);
//   6. too many buffers for one kernel: the IR is split into stages (stages.hpp);
//   7. parameters (sizes, strides, offsets, scalars) are packed and the kernel queued.
#include "kiln/eval/assign.hpp"
#include "kiln/jit/jit_backend.hpp"
#include "kiln/jit/lower.hpp"
#include "kiln/jit/stages.hpp"

#include <limits>
#include <mutex>

namespace kiln::jit {

// A pass lowered and compiled for one backend: its stages' kernels.
struct compiled_pass {
  std::shared_ptr<const stage_plan> plan;
  std::vector<std::shared_ptr<kernel>> kernels; // one per stage
};

struct memo_entry {
  std::vector<std::int16_t> pattern;
  bool strided;
  int rank;
  bool wide;
  std::shared_ptr<const stage_plan> plan;
  std::vector<std::pair<const jit_backend*, std::unique_ptr<compiled_pass>>> compiled;
  bool matches(const leaf_table& lt, bool s, int r, bool w) const {
    return strided == s && rank == r && wide == w && pattern == lt.pattern;
  }
};

// One table per tuple of output expression types (the types are the rest of the key).
template <class Key>
struct kernel_memo {
  static inline std::mutex mutex;
  static inline std::vector<std::unique_ptr<memo_entry>> entries;
};

namespace detail {

template <class O>
const kiln::storage* dst_storage(const O& o) {
  return o.dst.storage().get();
}

// The compiled kernels of a pass on backend `be`, lowering and compiling on first use.
template <class Key, class... O>
const compiled_pass& kernels_for(jit_backend& be, const leaf_table& lt, bool strided, int rank,
                                 bool wide, const O&... outs) {
  using memo = kernel_memo<Key>;
  std::shared_ptr<const stage_plan> plan;
  {
    std::lock_guard lock(memo::mutex);
    for (const auto& e : memo::entries)
      if (e->matches(lt, strided, rank, wide)) {
        for (const auto& [b, c] : e->compiled)
          if (b == &be) return *c;
        plan = e->plan;
      }
  }
  // Miss: lower (once per key) and compile outside the lock; the backend's compile is
  // single-flight, so threads racing here share one compile of each kernel.
  if (!plan) {
    ++lowering_count();
    const kernel_ir ir = lower({dtype_of<typename O::dst_type>()...}, lt.pattern, strided, rank,
                               wide, *outs.expr...);
    plan = std::make_shared<const stage_plan>(split_stages(ir, be.max_buffers()));
  }
  if (const std::string why = be.cannot_run(plan->dtypes_used()); !why.empty())
    throw error("eval", "the device cannot run this expression", be.device().str() + ": " + why);
  auto c = std::make_unique<compiled_pass>();
  c->plan = plan;
  for (const auto& st : plan->stages)
    c->kernels.push_back(be.compile(st.ir));
  std::lock_guard lock(memo::mutex);
  memo_entry* entry = nullptr;
  for (auto& e : memo::entries)
    if (e->matches(lt, strided, rank, wide)) entry = e.get();
  if (!entry) {
    memo::entries.push_back(
        std::make_unique<memo_entry>(memo_entry{lt.pattern, strided, rank, wide, plan, {}}));
    entry = memo::entries.back().get();
  }
  for (const auto& [b, have] : entry->compiled)
    if (b == &be) return *have;
  entry->compiled.emplace_back(&be, std::move(c));
  return *entry->compiled.back().second;
}

// Queues the stages of a compiled pass. Buffer strides come from the merged iteration
// space (outputs first, then the unique inputs); temporaries are row-major over it.
inline void launch_stages(jit_backend& be, const compiled_pass& cp, const leaf_table& lt,
                          const kiln::detail::iteration_space& space, std::int64_t n,
                          std::span<const kiln::storage* const> dsts,
                          std::span<const kiln::layout* const> dst_layouts) {
  const int rank = space.extents.size();
  const auto nout = dsts.size();
  std::array<std::int64_t, max_rank> dense{};
  for (std::int64_t d = rank - 1, m = 1; d >= 0; --d) {
    dense[d] = m;
    m *= space.extents[d];
  }
  thread_local std::vector<void*> temps;
  temps.clear();
  for (dtype t : cp.plan->temps)
    temps.push_back(be.allocate(static_cast<std::size_t>(n) * size_of(t)));
  thread_local std::vector<buffer_arg> args;
  thread_local std::vector<std::int64_t> offsets;
  thread_local std::vector<std::array<std::int64_t, max_rank>> strides;
  thread_local std::vector<std::uint64_t> scalars;
  thread_local std::vector<std::byte> params;
  scalars.clear();
  for (const auto& s : lt.scalars)
    scalars.push_back(s.bits);
  try {
    for (std::size_t k = 0; k < cp.kernels.size(); ++k) {
      const stage& st = cp.plan->stages[k];
      args.clear();
      offsets.clear();
      strides.clear();
      for (const auto& b : st.buffers) {
        switch (b.kind) {
        case buffer_source::input:
          args.push_back({lt.inputs[b.index].storage->handle()});
          offsets.push_back(lt.inputs[b.index].layout->offset);
          strides.push_back(space.strides[nout + b.index]);
          break;
        case buffer_source::temp:
          args.push_back({temps[b.index]});
          offsets.push_back(0);
          strides.push_back(dense);
          break;
        case buffer_source::output:
          args.push_back({dsts[b.index]->handle()});
          offsets.push_back(dst_layouts[b.index]->offset);
          strides.push_back(space.strides[b.index]);
          break;
        }
      }
      const kernel& kn = *cp.kernels[k];
      params.assign(kn.layout.bytes, std::byte{0});
      kn.layout.pack(params.data(), n, space.extents.data(), offsets.data(), strides, scalars);
      be.launch(kn, args, params, launch_work{n, false, 1});
    }
  } catch (...) {
    for (void* t : temps)
      be.release(t);
    throw;
  }
  // Released now, reused safely: later work on the in-order queue runs after these stages.
  for (void* t : temps)
    be.release(t);
}

template <class... O>
void run_pass(const O&... outs) {
  const auto& first = std::get<0>(std::forward_as_tuple(outs...));
  const kiln::shape& shp = first.dst.shape();
  const std::int64_t n = numel(shp);
  if (n == 0) return;
  auto& be = static_cast<jit_backend&>(*first.dst.storage()->backend());

  thread_local leaf_table lt;
  lt.inputs.clear();
  lt.pattern.clear();
  lt.scalars.clear();
  (collect(*outs.expr, lt), ...);

  thread_local kiln::detail::iteration_space space;
  space.strides.clear();
  (space.add(outs.dst.layout(), shp), ...);
  for (const auto& l : lt.inputs)
    space.add(*l.layout, shp);
  space.merge(shp);
  const int rank = space.extents.size();
  bool strided = rank != 1;
  for (const auto& st : space.strides)
    strided = strided || st[0] != 1;
  bool wide = n >= narrow_index_limit;
  auto big = [](const kiln::storage* s) {
    return s->count() > std::numeric_limits<std::int32_t>::max();
  };
  ((wide = wide || big(dst_storage(outs))), ...);
  for (const auto& l : lt.inputs)
    wide = wide || big(l.storage);

  using key = std::tuple<typename O::dst_type..., typename O::expr_type...>;
  const compiled_pass& cp = kernels_for<key>(be, lt, strided, rank, wide, outs...);
  const std::array<const kiln::storage*, sizeof...(O)> dsts{dst_storage(outs)...};
  const std::array<const kiln::layout*, sizeof...(O)> layouts{&outs.dst.layout()...};
  launch_stages(be, cp, lt, space, n, dsts, layouts);
}

} // namespace detail
} // namespace kiln::jit

namespace kiln::detail {

// The GPU executor of the planner in include/kiln/eval/assign.hpp.
template <class... O>
void device_run(const O&... outs) {
  jit::detail::run_pass(outs...);
}

} // namespace kiln::detail
