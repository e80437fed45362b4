#pragma once
// Reductions: sum, prod, mean, max, min, argmax, argmin, all, any over everything, one
// axis or several, with keepdims. A reduction is a lazy node like any other; when it
// runs, the reduced expression is evaluated inside the reduction's loop (no temporary).
// Used inside a larger expression (x - max(x, 1, true)), it is computed first and the
// rest is fused as usual.
//
// Accuracy: float sums accumulate in double (f32 sums of 10^7 values stay within 1e-6 of
// a double reference), float products in double with their exponent kept apart (partial
// products never overflow or underflow); integer sums accumulate in i64 and give i64.
#include "kiln/eval/assign.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln {

namespace reductions {

template <class T>
using wide_t = std::conditional_t<is_floating(dtype_of<T>()), double, std::int64_t>;

struct sum {
  static constexpr const char* name = "sum";
  template <class T>
  using acc_t = wide_t<T>;
  template <class T>
  using result = std::conditional_t<is_floating(dtype_of<T>()), T, std::int64_t>;
  template <class T>
  static acc_t<T> init() {
    return 0;
  }
  template <class A, class V>
  static A combine(A a, V v, std::int64_t) {
    return a + static_cast<A>(v);
  }
  template <class A>
  static A merge(A a, A b) {
    return a + b;
  }
  template <class R, class A>
  static R finish(A a, std::int64_t) {
    return convert<R>(a);
  }
  static constexpr bool has_simd = true;
};

// Float products keep their binary exponent apart (scaled_product): the running value is
// multiplied by each factor's mantissa and brought back into range when it leaves
// [2^-500, 2^500], so a product whose partial runs leave double's range (1e-3 a million
// times, then 1e3 a million times) is still right, and the same however the work is split
// over threads (a plain double went to 0 in one part and inf in another: NaN when merged).
struct scaled_product {
  double m = 1;
  std::int64_t e = 0;
  void rescale() {
    if (m != 0 && std::isfinite(m) && !(std::abs(m) <= 0x1p500 && std::abs(m) >= 0x1p-500)) {
      int k = 0;
      m = std::frexp(m, &k);
      e += k;
    }
  }
  void times(double x) {
    if (x == 0 || !std::isfinite(x)) {
      m *= x; // 0, inf and NaN decide the product as they are
      return;
    }
    int k = 0;
    m *= std::frexp(x, &k);
    e += k;
    rescale();
  }
  double value() const {
    if (m == 0 || !std::isfinite(m)) return m;
    return std::ldexp(m, static_cast<int>(std::clamp<std::int64_t>(e, -4096, 4096)));
  }
};

struct prod {
  static constexpr const char* name = "prod";
  template <class T>
  using acc_t = std::conditional_t<is_floating(dtype_of<T>()), scaled_product, std::int64_t>;
  template <class T>
  using result = std::conditional_t<is_floating(dtype_of<T>()), T, std::int64_t>;
  template <class T>
  static acc_t<T> init() {
    if constexpr (is_floating(dtype_of<T>()))
      return {};
    else
      return 1;
  }
  template <class A, class V>
  static A combine(A a, V v, std::int64_t) {
    if constexpr (std::is_integral_v<A>) { // wraps like numpy, never signed-overflow UB
      return static_cast<A>(static_cast<std::uint64_t>(a) *
                            static_cast<std::uint64_t>(static_cast<A>(v)));
    } else {
      a.times(static_cast<double>(v));
      return a;
    }
  }
  template <class A>
  static A merge(A a, A b) {
    if constexpr (std::is_integral_v<A>) {
      return combine(a, b, 0);
    } else {
      a.m *= b.m; // both within [2^-500, 2^500] (or 0, inf, NaN): no overflow here
      a.e += b.e;
      a.rescale();
      return a;
    }
  }
  template <class R, class A>
  static R finish(A a, std::int64_t) {
    if constexpr (std::is_integral_v<A>)
      return convert<R>(a);
    else
      return convert<R>(a.value());
  }
  static constexpr bool has_simd = false;
};

struct mean {
  static constexpr const char* name = "mean";
  template <class T>
  using acc_t = double;
  template <class T>
  using result = float_of_t<T>;
  template <class T>
  static double init() {
    return 0;
  }
  template <class A, class V>
  static A combine(A a, V v, std::int64_t) {
    return a + static_cast<double>(v);
  }
  template <class A>
  static A merge(A a, A b) {
    return a + b;
  }
  template <class R, class A>
  static R finish(A a, std::int64_t n) {
    return convert<R>(a / static_cast<double>(n));
  }
  static constexpr bool has_simd = true;
};

// max/min propagate NaN, as numpy does.
template <bool Max>
struct extremum {
  static constexpr const char* name = Max ? "max" : "min";
  template <class T>
  using acc_t = compute_t<T>;
  template <class T>
  using result = T;
  template <class T>
  static acc_t<T> init() {
    using C = compute_t<T>;
    if constexpr (std::is_floating_point_v<C>)
      return Max ? -std::numeric_limits<C>::infinity() : std::numeric_limits<C>::infinity();
    else
      return Max ? std::numeric_limits<C>::lowest() : std::numeric_limits<C>::max();
  }
  template <class A, class V>
  static A combine(A a, V v, std::int64_t) {
    const A x = static_cast<A>(v);
    if constexpr (std::is_floating_point_v<A>)
      if (x != x || a != a) return a != a ? a : x;
    return (Max ? a < x : x < a) ? x : a;
  }
  template <class A>
  static A merge(A a, A b) {
    return combine(a, b, 0);
  }
  template <class R, class A>
  static R finish(A a, std::int64_t) {
    return convert<R>(a);
  }
  static constexpr bool has_simd = false;
};
using max = extremum<true>;
using min = extremum<false>;

// argmax/argmin: the first index of the extreme value (a NaN counts as extreme), as a
// flat row-major index over the reduced axes.
template <bool Max>
struct arg_extremum {
  static constexpr const char* name = Max ? "argmax" : "argmin";
  template <class T>
  struct acc {
    compute_t<T> value;
    std::int64_t index;
  };
  template <class T>
  using acc_t = acc<T>;
  template <class T>
  using result = std::int64_t;
  template <class T>
  static acc_t<T> init() {
    return {extremum<Max>::template init<T>(), -1};
  }
  template <class A, class V>
  static A combine(A a, V v, std::int64_t i) {
    const auto x = static_cast<decltype(a.value)>(v);
    if (a.index < 0) return {x, i};
    if constexpr (std::is_floating_point_v<decltype(x)>) {
      if (a.value != a.value) return a;
      if (x != x) return {x, i};
    }
    return (Max ? a.value < x : x < a.value) ? A{x, i} : a;
  }
  template <class A>
  static A merge(A a, A b) { // a holds the lower indices
    if (b.index < 0) return a;
    if (a.index < 0) return b;
    return combine(a, b.value, b.index);
  }
  template <class R, class A>
  static R finish(A a, std::int64_t) {
    return a.index;
  }
  static constexpr bool has_simd = false;
};
using argmax = arg_extremum<true>;
using argmin = arg_extremum<false>;

template <bool All>
struct boolean {
  static constexpr const char* name = All ? "all" : "any";
  template <class T>
  using acc_t = std::uint8_t; // not bool: accumulators live in a std::vector
  template <class T>
  using result = bool;
  template <class T>
  static std::uint8_t init() {
    return All;
  }
  template <class A, class V>
  static A combine(A a, V v, std::int64_t) {
    return All ? (a && convert<bool>(v)) : (a || convert<bool>(v));
  }
  template <class A>
  static A merge(A a, A b) {
    return All ? a && b : a || b;
  }
  template <class R, class A>
  static R finish(A a, std::int64_t) {
    return a;
  }
  static constexpr bool has_simd = false;
};
using all = boolean<true>;
using any = boolean<false>;

} // namespace reductions

template <class R, class E>
struct reduce_node : expression_base<reduce_node<R, E>> {
  using value_type = typename R::template result<value_t<E>>;
  using reduction = R;
  E expr;
  kiln::axes over;
  bool keepdims;
  // The result shape is computed, and the axes checked, when the node is built: an axis
  // error is raised at the reduction that causes it (point 5 of issue 11).
  reduce_node(E e, kiln::axes a, bool k)
      : expr(std::move(e)), over(std::move(a)), keepdims(k), out_shape(make_shape()) {}

  // Which input dims are folded (validated against the input's rank).
  std::array<bool, max_rank> mask(int rank) const {
    std::array<bool, max_rank> m{};
    if (over.everything) m.fill(true);
    for (auto a : over.list) {
      const int d = normalize_axis(a, rank, R::name);
      if (m[d] && !over.everything)
        throw error(R::name, "axis repeated", "axis " + std::to_string(a));
      m[d] = true;
    }
    return m;
  }
  const kiln::shape& result_shape() const { return out_shape; }

private:
  kiln::shape make_shape() const {
    detail::require_operand(expr, R::name);
    const kiln::shape& s = shape_of(expr);
    const auto m = mask(s.size());
    kiln::shape r;
    for (int d = 0; d < s.size(); ++d)
      if (!m[d])
        r.push_back(s[d]);
      else if (keepdims)
        r.push_back(1);
    return r;
  }

public:
  kiln::shape out_shape; // after the members make_shape reads
};
template <class R, class E>
struct is_expression_type<reduce_node<R, E>> : std::true_type {};

template <class R, class E>
const kiln::shape& shape_of(const reduce_node<R, E>& n) {
  return n.result_shape();
}
template <class R, class E, class F>
void visit_devices(const reduce_node<R, E>& n, F&& f) {
  visit_devices(n.expr, f);
}

namespace detail {
// A reduction on a GPU device: defined by the JIT (jit/kiln/jit/backend/run_pass.hpp).
template <class R, class E>
void device_reduce(const tensor<typename R::template result<value_t<E>>>& out, const E& e,
                   const std::array<bool, max_rank>& mask);
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

// Folds elements [j, jend) of the current row into the accumulators.
template <class R, class E, class Rd, class A>
void fold_segment(const Rd& rd, acc_cursor<A>& ac, const index_cursor& ic, std::int64_t j,
                  std::int64_t jend) {
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
      a = R::combine(a, rd.at(j), ic.row + j * ic.inner);
    *ac.row = a;
  } else {
    for (; j < jend; ++j) {
      A& a = ac.row[j * ac.inner];
      a = R::combine(a, rd.at(j), ic.row + j * ic.inner);
    }
  }
}

template <class R, class E>
void run_reduction(const tensor<typename R::template result<value_t<E>>>& out, const E& e,
                   const std::array<bool, max_rank>& mask) {
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
  if (count == 0 &&
      (std::is_same_v<R, reductions::argmax> || std::is_same_v<R, reductions::argmin> ||
       std::is_same_v<R, reductions::max> || std::is_same_v<R, reductions::min>))
    if (nout > 0)
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
    std::int64_t row = lo / inner, j = lo % inner;
    for (int d = outer - 1; d >= 0; --d) {
      idx[d] = row % space.extents[d];
      row /= space.extents[d];
    }
    for (std::int64_t e0 = lo; e0 < hi;) {
      rd.set_row(idx, outer);
      ac.set_row(idx, outer);
      ic.set_row(idx, outer);
      const std::int64_t jend = std::min(inner, j + (hi - e0));
      fold_segment<R, E>(rd, ac, ic, j, jend);
      e0 += jend - j;
      j = 0;
      for (int d = outer - 1; d >= 0; --d) {
        if (++idx[d] < space.extents[d]) break;
        idx[d] = 0;
      }
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
      acc0[i] = R::merge(acc0[i], accs[t][i]);
  Res* base = out.data(); // out is fresh and contiguous, in kept-dims order
  for (std::int64_t i = 0; i < nout; ++i)
    base[i] = R::template finish<Res>(acc0[i], count);
}

} // namespace detail

// Reductions inside an expression run first (inner ones before outer ones).
template <class R, class E>
auto materialize(const reduce_node<R, E>& n) {
  const auto inner = detail::evaluate_leaf_copy(materialize(n.expr));
  // Broadcast views can make an input of more than 2^63 elements: refuse, not wrap.
  checked_numel(shape_of(inner), R::name);
  const auto m = n.mask(shape_of(inner).size());
  const kiln::device where = detail::device_of(inner);
  tensor<value_t<reduce_node<R, E>>> out(n.result_shape(), where);
  if (where.is_host()) {
    detail::run_reduction<R>(out, inner, m);
  } else {
    detail::check_devices(inner, where, R::name);
    detail::device_reduce<R>(out, inner, m);
  }
  return out;
}

#define KILN_REDUCTION(fn, R)                                                                      \
  template <class X>                                                                               \
  requires expression<X>                                                                           \
  auto fn(X&& x, kiln::axes over = {}, bool keepdims = false) {                                    \
    return reduce_node<R, std::remove_cvref_t<X>>(std::forward<X>(x), std::move(over), keepdims);  \
  }
KILN_REDUCTION(sum, reductions::sum)
KILN_REDUCTION(prod, reductions::prod)
KILN_REDUCTION(mean, reductions::mean)
KILN_REDUCTION(max, reductions::max)
KILN_REDUCTION(min, reductions::min)
KILN_REDUCTION(argmax, reductions::argmax)
KILN_REDUCTION(argmin, reductions::argmin)
KILN_REDUCTION(any, reductions::any)
#undef KILN_REDUCTION

// kiln::all is both the reduction and the "whole dim" index tag of tensor::operator().
template <class X>
requires expression<X>
auto all_t::operator()(X&& x, kiln::axes over, bool keepdims) const {
  return reduce_node<reductions::all, std::remove_cvref_t<X>>(std::forward<X>(x), std::move(over),
                                                              keepdims);
}

} // namespace kiln

#include "kiln/eval/device_reduce.hpp"
