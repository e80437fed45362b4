#pragma once
// Reductions over everything, one axis or several, with keepdims. A reduction is a lazy
// node like any other; when it runs, the reduced expression is evaluated inside the
// reduction's loop (no temporary). Used inside a larger expression (x - max(x, 1, true)),
// it is computed first and the rest is fused as usual. Each reduction is defined in one
// file of reductions/ (define.hpp says what a definition holds); this file is the host
// executor's loop over any of them, and the hand-over to a device's.
#include "kiln/ir/lower.hpp"
#include "kiln/reductions/arg_extremum.hpp"
#include "kiln/reductions/boolean.hpp"
#include "kiln/reductions/count_nonzero.hpp"
#include "kiln/reductions/custom.hpp"
#include "kiln/reductions/extremum.hpp"
#include "kiln/reductions/logsumexp.hpp"
#include "kiln/reductions/mean.hpp"
#include "kiln/reductions/norm.hpp"
#include "kiln/reductions/prod.hpp"
#include "kiln/reductions/sum.hpp"
#include "kiln/reductions/var.hpp"

namespace kiln {

namespace detail {
// A reduction on a GPU device: defined by the JIT (jit/kiln/jit/backend/run_pass.hpp).
template <class R, class E>
void device_reduce(const tensor<typename R::template result<value_t<E>>>& out, const E& e,
                   const std::array<bool, max_rank>& mask, std::span<const double> params);
} // namespace detail

namespace detail {

// An accumulator row over the kept dims, walked like an output.
template <class A>
using acc_cursor = row_cursor<A>;
// The flat index of an element within the reduced axes, for argmax/argmin.
struct index_cursor {
  std::int64_t st[max_rank];
  std::int64_t row = 0, inner = 0;
  void set_row(const std::int64_t* idx, int outer) noexcept { row = row_offset(idx, st, outer); }
};

// A reduction's host parts with its run-time parameters bound (a custom reduction's; none
// for the built-ins).
template <class R>
struct bound_reduction {
  std::span<const double> q;
  template <class A, class V>
  A combine(const A& a, V v, std::int64_t i) const {
    if constexpr (param_count_of<R>() > 0)
      return R::combine(a, v, i, q);
    else
      return R::combine(a, v, i);
  }
  template <class A>
  A merge(const A& a, const A& b) const {
    if constexpr (param_count_of<R>() > 0)
      return R::merge(a, b, q);
    else
      return R::merge(a, b);
  }
  template <class Res, class A>
  Res finish(const A& a, std::int64_t n) const {
    if constexpr (param_count_of<R>() > 0)
      return R::template finish<Res>(a, n, q);
    else
      return R::template finish<Res>(a, n);
  }
};

// Folds elements [j, jend) of the current row into the accumulators.
template <class R, class E, class Rd, class A>
void fold_segment(const bound_reduction<R>& br, const Rd& rd, acc_cursor<A>& ac,
                  const index_cursor& ic, std::int64_t j, std::int64_t jend) {
  using V = value_t<E>;
  if (ac.inner == 0) { // the row is all reduced: fold into one accumulator
    A a = *ac.row;
    if constexpr (R::has_simd && std::is_floating_point_v<V> && lane_bytes<E> == sizeof(V)) {
      // Lanes sum short blocks in V; each block's total is added in double, which
      // keeps f32 sums accurate to about 1e-7 without converting every element.
      constexpr std::int64_t n = batch<V>::size, block = 64 * n;
      while (j + n <= jend) {
        const std::int64_t stop = std::min(jend, j + block);
        batch<V> s(V(0));
        for (; j + n <= stop; j += n)
          s += rd.load(j);
        a += static_cast<A>(xsimd::hadd(s));
      }
    }
    for (; j < jend; ++j)
      a = br.combine(a, rd.at(j), ic.row + j * ic.inner);
    *ac.row = a;
  } else {
    for (; j < jend; ++j) {
      A& a = ac.row[j * ac.inner];
      a = br.combine(a, rd.at(j), ic.row + j * ic.inner);
    }
  }
}

template <class R, class E>
void run_reduction(const tensor<typename R::template result<value_t<E>>>& out, const E& e,
                   const std::array<bool, max_rank>& mask, std::span<const double> params = {}) {
  const bound_reduction<R> br{params};
  using V = value_t<E>;
  using Res = typename R::template result<V>;
  using A = typename R::template acc_t<V>;
  const kiln::shape full = shape_of(e);
  const int rank = full.size();
  std::int64_t count = 1; // elements folded into each output
  kiln::shape kept;
  for (int d = 0; d < rank; ++d)
    if (mask[d])
      count *= full[d];
    else
      kept.push_back(full[d]);
  const std::int64_t nout = numel(kept), total = numel(full);
  if (count == 0 && !R::identity && nout > 0)
    throw error(R::name, "reduction over an empty axis has no identity", "shape " + full.str());

  // Operands of the iteration space: accumulator, reduced index, then the leaves.
  iteration_space space;
  {
    std::array<std::int64_t, max_rank> acc{}, idx{};
    std::int64_t a = 1, r = 1;
    for (int d = rank - 1; d >= 0; --d) {
      if (mask[d]) {
        idx[d] = r;
        r *= full[d];
      } else {
        acc[d] = a;
        a *= full[d];
      }
    }
    space.strides.push_back(acc);
    space.strides.push_back(idx);
    for_each_leaf(e, [&](const auto& t) { space.add(t.layout(), full); });
  }
  space.merge(full);
  const int mrank = space.extents.size();
  const std::int64_t inner = space.extents[mrank - 1];

  std::size_t next_operand = 2;
  auto next = [&]() { return space.strides[next_operand++].data(); };
  auto reader = make_reader(e, next);
  set_inner(reader, mrank - 1);

  const int threads = num_threads();
  constexpr int cost = node_count<E>;
  const std::int64_t grain = std::max<std::int64_t>(16384, (1 << 19) / cost);
  const int tasks = static_cast<int>(std::clamp<std::int64_t>(total / grain, 1, threads));
  // One accumulator buffer per task, merged in task order (so arg ties keep the first).
  std::vector<std::vector<A>> accs(
      tasks, std::vector<A>(static_cast<std::size_t>(nout), R::template init<V>()));

  auto body = [&](int t) {
    auto rd = reader;
    acc_cursor<A> ac;
    ac.start(accs[t].data(), space.strides[0].data());
    ac.inner = ac.st[mrank - 1];
    index_cursor ic{};
    std::copy(space.strides[1].begin(), space.strides[1].end(), ic.st);
    ic.inner = ic.st[mrank - 1];
    std::int64_t lo = total * t / tasks, hi = total * (t + 1) / tasks;
    const int outer = mrank - 1;
    std::int64_t idx[max_rank] = {};
    std::int64_t j = space.locate(lo, idx);
    for (std::int64_t e0 = lo; e0 < hi;) {
      rd.set_row(idx, outer);
      ac.set_row(idx, outer);
      ic.set_row(idx, outer);
      const std::int64_t jend = std::min(inner, j + (hi - e0));
      fold_segment<R, E>(br, rd, ac, ic, j, jend);
      e0 += jend - j;
      j = 0;
      space.next_row(idx);
    }
  };
  if (total == 0) {
    // Nothing to fold: every output keeps the identity.
  } else if (tasks <= 1) {
    body(0);
  } else {
    thread_pool::instance().parallel_for(tasks, body);
  }

  // Merge per-task accumulators and write the results through out's layout.
  std::vector<A>& acc0 = accs[0];
  for (int t = 1; t < tasks; ++t)
    for (std::int64_t i = 0; i < nout; ++i)
      acc0[i] = br.merge(acc0[i], accs[t][i]);
  Res* base = out.data(); // out is fresh and contiguous, in kept-dims order
  for (std::int64_t i = 0; i < nout; ++i)
    base[i] = br.template finish<Res>(acc0[i], count);
}

} // namespace detail

namespace detail {
// A reduction, replayed where it ran (the host, or its device's queue): its result and
// operand tree are the plan's (their tensors over the plan's slots and arena), its
// parameters read afresh.
template <class R, class E>
struct reduction_replay {
  tensor<typename R::template result<value_t<E>>> out;
  E e;
  std::array<bool, max_rank> mask;
  std::vector<double> params;
  static void run(void* p) {
    auto& d = *static_cast<reduction_replay*>(p);
    refresh_parameters(d.e);
    if constexpr (device_only_in<E> != nullptr) // (a device-only op: never on the host)
      device_reduce<R>(d.out, d.e, d.mask, d.params);
    else if (!d.out.device().is_host())
      device_reduce<R>(d.out, d.e, d.mask, d.params);
    else
      run_reduction<R>(d.out, d.e, d.mask, d.params);
  }
  static void drop(void* p) { delete static_cast<reduction_replay*>(p); }
  // On a device: the memory it names (the result first, then the operand's leaves) and the
  // operand's kernel scalars as the reduction's leaf table has them; whether any of them is
  // a plan parameter.
  static bool leaves(void* p, std::vector<const storage*>& bound, ir::leaf_table& lt) {
    auto& d = *static_cast<reduction_replay*>(p);
    refresh_parameters(d.e);
    const flat_pass<E> flat(d.e);
    bound.assign(1, d.out.storage().get());
    bool parameters = false;
    for (const flat_leaf& l : flat.leaf_span())
      bound.push_back(l.storage);
    for (const flat_scalar& x : flat.scalar_span())
      parameters = parameters || x.source != nullptr;
    lt.clear();
    std::span<const flat_leaf> l = flat.leaf_span();
    std::span<const flat_scalar> sc = flat.scalar_span();
    lt.add(ir::described<E>, l, sc);
    return parameters;
  }
};

// A reduction's step data over r's memory; deleted where that fails.
template <class R, class E>
reduction_replay<R, E>*
adopted_reduction(plan_recording& r, const tensor<typename R::template result<value_t<E>>>& out,
                  const E& e, const std::array<bool, max_rank>& mask,
                  std::span<const double> params) {
  auto* d = new reduction_replay<R, E>{out, e, mask, {params.begin(), params.end()}};
  try {
    adopt_leaves(d->out, r, R::name);
    adopt_leaves(d->e, r, R::name);
  } catch (...) {
    delete d;
    throw;
  }
  return d;
}

// Records the reduction into the thread's plan: on the host after it ran; on a device it
// runs as the plan's step, its launches recorded where the executor can. One entry, so the
// common reductions of a tensor instantiate it once (kiln/instances.hpp).
template <class R, class E>
void record_reduction(const tensor<typename R::template result<value_t<E>>>& out, const E& e,
                      const std::array<bool, max_rank>& mask, std::span<const double> params) {
  plan_recording& r = *recording_now();
  using D = reduction_replay<R, E>;
  D* d = adopted_reduction<R>(r, out, e, mask, params);
  if (out.device().is_host())
    plan_add(r, d, &D::run, &D::drop);
  else
    record_device_step(r, d, {&D::run, &D::drop, &D::leaves});
}
} // namespace detail

// Reductions inside an expression run first (inner ones before outer ones).
template <class R, class E>
KILN_STATEMENT auto materialize(const reduce_node<R, E>& n) {
  const auto inner = detail::materialized_value(n.expr);
  // Broadcast views can make an input of more than 2^63 elements: refuse, not wrap.
  checked_numel(shape_of(inner), R::name);
  const auto m = n.mask(shape_of(inner).size());
  const kiln::device where = detail::device_of(inner);
  tensor<value_t<reduce_node<R, E>>> out(n.result_shape(), where);
  if (where.is_host()) {
    constexpr const char* device_only =
        detail::device_only_in<std::remove_cvref_t<decltype(inner)>>;
    if constexpr (device_only != nullptr)
      detail::refuse_device_only(device_only);
    else
      detail::run_reduction<R>(out, inner, m, n.params());
  } else {
    detail::check_devices(inner, where, R::name);
    if (detail::recording_now() == nullptr) [[likely]]
      detail::device_reduce<R>(out, inner, m, n.params());
  }
  if (detail::recording_now() != nullptr) [[unlikely]] // (on a device it runs as the step)
    detail::record_reduction<R>(out, inner, m, n.params());
  return out;
}

} // namespace kiln

#include "kiln/eval/device_reduce.hpp"
