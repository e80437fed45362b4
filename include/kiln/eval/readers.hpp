#pragma once
// A reduction's view of its input expression on the host (reduce.hpp): a tree of readers
// mirroring the expression tree. A leaf reader walks its tensor over the merged iteration
// space one row at a time; an op reader applies the op's host() (scalar) or simd() (xsimd
// batch) to its children. Also what the host evaluator's kernel shares with it (kernel.hpp):
// batches, lane widths, the gate's short circuit.
#include "kiln/expr.hpp"
#include "kiln/tensor.hpp"

#include <xsimd/xsimd.hpp>

#include <cstdint>

#include <boost/hana/all_of.hpp>
#include <boost/hana/for_each.hpp>
#include <boost/hana/transform.hpp>

// A reader's per-element functions are inlined into the loop, all the way down. Left to
// itself, the compiler stops inlining in a large tree (a gradient's) and every node becomes
// a call that passes its batch through memory: measured, the calls cost more than the
// arithmetic.
#define KILN_READER_INLINE [[gnu::always_inline]] inline

namespace kiln::detail {

using arch = xsimd::default_arch;
template <class T>
using batch = xsimd::batch<T, arch>;

template <class T>
inline constexpr bool simd_element =
    std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, std::int32_t> ||
    std::is_same_v<T, std::uint32_t> || std::is_same_v<T, std::int64_t>;

// Convert a batch between types of one size (so lanes line up).
template <class To, class From>
batch<To> batch_convert(const batch<From>& b) {
  if constexpr (std::is_same_v<To, From>)
    return b;
  else
    return xsimd::batch_cast<To>(b);
}

// --- lane_bytes<E>: the element size every type in E's tree shares when the whole
// expression can run on xsimd batches, else 0 (then the scalar loop runs it). An op without
// simd() does not stop that: it computes lane by lane (`lanewise`).
template <class E>
struct lane_bytes_of {
  static constexpr std::size_t value = 0;
};
template <element T>
struct lane_bytes_of<tensor<T>> {
  static constexpr std::size_t value = simd_element<T> ? sizeof(T) : 0;
};
template <element T>
struct lane_bytes_of<scalar_expr<T>> {
  static constexpr std::size_t value = simd_element<T> ? sizeof(T) : 0;
};
template <class Op, class... C>
struct lane_bytes_of<expr_node<Op, C...>> {
  using R = typename expr_node<Op, C...>::value_type;
  template <std::size_t... I>
  static constexpr bool operands_ok(std::index_sequence<I...>) {
    return ((simd_element<typename Op::rule::template operand<I, value_t<C>...>> &&
             sizeof(typename Op::rule::template operand<I, value_t<C>...>) == sizeof(R)) &&
            ...);
  }
  static constexpr std::size_t value =
      (simd_element<R> && ((lane_bytes_of<C>::value == sizeof(R)) && ...) &&
       operands_ok(std::index_sequence_for<C...>{}))
          ? sizeof(R)
          : 0;
};
template <class E>
inline constexpr std::size_t lane_bytes = lane_bytes_of<std::remove_cvref_t<E>>::value;

// The offset of a row: the outer part of the multi-index dotted with the strides.
inline std::int64_t row_offset(const std::int64_t* idx, const std::int64_t* st,
                               int outer) noexcept {
  std::int64_t off = 0;
  for (int d = 0; d < outer; ++d)
    off += idx[d] * st[d];
  return off;
}

// Walks one operand over the merged iteration space a row at a time: `row` points at
// the row's first element, `inner` is the stride along the row.
template <class P>
struct row_cursor {
  P* base = nullptr;
  std::int64_t st[max_rank] = {};
  P* row = nullptr;
  std::int64_t inner = 0;
  void set_row(const std::int64_t* idx, int outer) noexcept {
    row = base + row_offset(idx, st, outer);
  }
  // Starts at `b` with the strides `s` (max_rank of them).
  void start(P* b, const std::int64_t* s) noexcept {
    base = b;
    std::copy(s, s + max_rank, st);
  }
};

// --- readers
// at(j): element j of the current row; load(j): a batch from j on.
template <element T>
struct leaf_reader : row_cursor<const T> {
  using row_cursor<const T>::row;
  using row_cursor<const T>::inner;
  using value_type = T;
  KILN_READER_INLINE T at(std::int64_t j) const noexcept { return row[j * inner]; }
  // Unit: the pass checked that every operand's inner stride is 1 (no branch here).
  template <bool Unit = false>
  KILN_READER_INLINE batch<T> load(std::int64_t j) const noexcept {
    if (Unit || inner == 1) {
      // Ask for the line 4 KiB ahead: a pass that computes much per element (exp, log,
      // sin...) reads too slowly for the hardware prefetchers of the machine this was
      // measured on to run ahead, and waited on memory ~25% of its time at 2^24 elements
      // (bench/RESULTS.md). The address is formed as an integer: it may lie past the end.
      __builtin_prefetch(
          reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(row + j) + 4096));
      return batch<T>::load_unaligned(row + j);
    }
    if (inner == 0) return batch<T>(row[0]);
    alignas(64) T tmp[batch<T>::size];
    for (std::size_t k = 0; k < batch<T>::size; ++k)
      tmp[k] = row[(j + std::int64_t(k)) * inner];
    return batch<T>::load_aligned(tmp);
  }
};

template <element T>
struct scalar_reader {
  using value_type = T;
  T value;
  void set_row(const std::int64_t*, int) noexcept {}
  T at(std::int64_t) const noexcept { return value; }
  template <bool Unit = false>
  batch<T> load(std::int64_t) const noexcept {
    return batch<T>(value);
  }
};

// An op with `short_circuit` (autodiff's gate: operand 0 where operand 1 is non-zero, else
// 0) reads operand 0 only where it is needed: a batch whose mask is all zero costs the mask.
template <class Op>
inline constexpr bool short_circuits = requires {
  Op::short_circuit;
};

// Whether Op has simd() for all of its operands' compute types; where it has not, a pass
// that is otherwise vectorized computes that op lane by lane (`lanewise`).
template <class Op, class... T>
inline constexpr bool simd_all = (Op::template simd_for<T> && ...);

// An op without simd() inside a vectorized pass: each lane through host(), as the scalar
// loop computes it (the same values), while the ops around it stay on batches. Inline: the
// compiler vectorizes the lane loop of a host() without calls (a clamp, a polynomial).
template <class Op, class R, class... T, std::size_t... I>
KILN_READER_INLINE batch<R> lanewise_impl(std::index_sequence<I...>,
                                          const batch<T>&... b) noexcept {
  constexpr std::size_t n = batch<R>::size;
  static_assert(((batch<T>::size == n) && ...), "kiln: lanes of one pass share one width");
  std::tuple<std::array<T, n>...> in;
  (b.store_unaligned(std::get<I>(in).data()), ...);
  alignas(arch::alignment()) R out[n];
  for (std::size_t l = 0; l < n; ++l) {
    if constexpr (short_circuits<Op>) {
      if (std::get<1>(in)[l] == std::tuple_element_t<1, std::tuple<T...>>(0)) {
        out[l] = R(0);
        continue;
      }
    }
    out[l] = convert<R>(Op::host(convert<compute_t<T>>(std::get<I>(in)[l])...));
  }
  return batch<R>::load_aligned(out);
}
template <class Op, class R, class... T>
KILN_READER_INLINE batch<R> lanewise(const batch<T>&... b) noexcept {
  return lanewise_impl<Op, R, T...>(std::index_sequence_for<T...>{}, b...);
}

template <class Op, class... R>
struct op_reader {
  using op = Op;
  using value_type = typename Op::rule::template result<typename R::value_type...>;
  hana::tuple<R...> children;

  void set_row(const std::int64_t* idx, int outer) noexcept {
    hana::for_each(children, [&](auto& c) { c.set_row(idx, outer); });
  }
  KILN_READER_INLINE value_type at(std::int64_t j) const noexcept {
    return at_impl(j, std::index_sequence_for<R...>{});
  }
  template <bool Unit = false>
  KILN_READER_INLINE batch<value_type> load(std::int64_t j) const noexcept {
    return simd_impl<Unit>(j, std::index_sequence_for<R...>{});
  }

private:
  template <std::size_t I>
  using operand_t = typename Op::rule::template operand<I, typename R::value_type...>;

  template <std::size_t... I>
  KILN_READER_INLINE value_type at_impl(std::int64_t j, std::index_sequence<I...>) const noexcept {
    if constexpr (short_circuits<Op>) {
      const auto m = convert<compute_t<operand_t<1>>>(hana::at_c<1>(children).at(j));
      if (m == decltype(m)(0)) return value_type(0);
      return convert<value_type>(
          Op::host(convert<compute_t<operand_t<0>>>(hana::at_c<0>(children).at(j)), m));
    }
    return convert<value_type>(
        Op::host(convert<compute_t<operand_t<I>>>(hana::at_c<I>(children).at(j))...));
  }
  template <bool Unit, std::size_t... I>
  KILN_READER_INLINE batch<value_type> simd_impl(std::int64_t j,
                                                 std::index_sequence<I...>) const noexcept {
    if constexpr (!simd_all<Op, operand_t<I>...>) {
      return lanewise<Op, value_type, operand_t<I>...>(
          batch_convert<operand_t<I>>(hana::at_c<I>(children).template load<Unit>(j))...);
    } else if constexpr (short_circuits<Op>) {
      const auto m = batch_convert<operand_t<1>>(hana::at_c<1>(children).template load<Unit>(j));
      if (xsimd::none(m != decltype(m)(0))) return batch<value_type>(value_type(0));
      return batch_convert<value_type>(
          Op::simd(batch_convert<operand_t<0>>(hana::at_c<0>(children).template load<Unit>(j)), m));
    } else {
      return batch_convert<value_type>(
          Op::simd(batch_convert<operand_t<I>>(hana::at_c<I>(children).template load<Unit>(j))...));
    }
  }
};

// Visits the tensor leaves of an expression in a fixed (depth-first) order.
template <element T, class F>
void for_each_leaf(const tensor<T>& t, F&& f) {
  f(t);
}
template <element T, class F>
void for_each_leaf(const scalar_expr<T>&, F&&) {}
template <class Op, class... C, class F>
void for_each_leaf(const expr_node<Op, C...>& n, F&& f) {
  n.each_child([&](const auto& c) { for_each_leaf(c, f); });
}

// Builds the reader tree; strides come from `next()`, called once per tensor leaf in
// for_each_leaf's order, giving the leaf's strides over the merged iteration space.
template <element T, class Next>
leaf_reader<T> make_reader(const tensor<T>& t, Next& next) {
  leaf_reader<T> r;
  r.start(t.data(), next());
  return r;
}
template <element T, class Next>
scalar_reader<T> make_reader(const scalar_expr<T>& s, Next&) {
  return {s.value};
}
template <class Op, class... C, class Next>
auto make_reader(const expr_node<Op, C...>& n, Next& next) {
  // Children in order: hana::unpack evaluates its arguments left to right here because
  // each is built in a braced list.
  return n.apply([&](const auto&... c) {
    return op_reader<Op, decltype(make_reader(c, next))...>{
        hana::tuple<decltype(make_reader(c, next))...>{make_reader(c, next)...}};
  });
}

// Points every leaf reader of a tree at its innermost stride (set after merging).
template <class R>
void set_inner(R& r, int inner_dim) {
  if constexpr (requires { r.children; })
    hana::for_each(r.children, [&](auto& c) { set_inner(c, inner_dim); });
  else if constexpr (requires { r.st; })
    r.inner = r.st[inner_dim];
}

template <class E>
inline constexpr int node_count = 1;
template <class Op, class... C>
inline constexpr int node_count<expr_node<Op, C...>> = 1 + (node_count<C> + ...);

} // namespace kiln::detail
