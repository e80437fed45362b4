#pragma once
// The host evaluator's compiled part: one function per tuple of output types and expression
// types, the fused loop over a run of n contiguous elements. Everything else about a pass
// (its layouts, strides, threads, chunks, packing of strided operands, which shared
// subtrees share a slot) is decided by host_pass.hpp, compiled once per program, and handed
// to the kernel as pointers: leaf k's values for this run at in[k], output i's at out[i].
//
// A node's operands are found by position: its leaves, scalars and memo sites are
// consecutive in depth-first order, so a node reads them from its context advanced by
// compile-time offsets, and the same code serves a subtree type wherever it occurs.
#include "kiln/eval/flat.hpp"
#include "kiln/eval/memo.hpp"
#include "kiln/eval/readers.hpp"
#include "kiln/eval/stream.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <span>
#include <tuple>

namespace kiln::detail {

// A node's view of a run: its first leaf's values, its first scalar, its first memo site's
// slot (null where no other site shares it: computing it again costs less than the slot).
struct node_ctx {
  const void* const* in;
  const flat_scalar* sc;
  memo_slot* const* slots;
  std::intptr_t ahead; // bytes a load asks for ahead of itself (prefetch_ahead passes)
};

// Memo sites (memoized subtrees, memo.hpp) in a tree, once per occurrence.
template <class E, class Roots>
inline constexpr int memo_count = 0;
template <class Op, class... C, class Roots>
inline constexpr int
    memo_count<expr_node<Op, C...>, Roots> = int(memoized<expr_node<Op, C...>, Roots>) +
                                             (0 + ... + memo_count<C, Roots>);

// Prefix sums of a per-operand count: element I is the sum over operands before I.
template <int... N>
constexpr std::array<int, sizeof...(N) + 1> prefix_sums() {
  std::array<int, sizeof...(N) + 1> a{};
  const int n[] = {N..., 0};
  for (std::size_t i = 0; i < sizeof...(N); ++i)
    a[i + 1] = a[i] + n[i];
  return a;
}

template <class E, class Roots>
struct eval_node;

// Whether a pass's loads ask for lines ahead: only where its trees compute math functions
// (exp, log, sin...). Such a pass reads too slowly for the hardware prefetchers of the
// machine this was measured on to run ahead, and waited on memory ~25% of its time at 2^24
// elements (bench/RESULTS.md); a pass of plain arithmetic keeps them busy by itself, and a
// prefetch per load cost it ~15% (the 5-point stencil of bench/heat2d.cpp, f64 2048^2).
// The distance: 1 KiB unless tuned (the host family's `prefetch`, kernel_args). The heavy
// expression of bench/elementwise.cpp at 2^24, one thread, on an AMD EPYC (AVX2): 0.94-0.98x
// the plain xsimd loop with 1 KiB, 0.79-0.94x with the 4 KiB first chosen on a Xeon,
// 0.82-0.84x with none; no size below moved measurably. A distance of 0 asks for the line
// being loaded: no effect, at the cost of the instruction.
inline constexpr std::intptr_t prefetch_bytes = 1024;
template <class Roots>
inline constexpr bool prefetch_ahead = false;
template <class... E>
inline constexpr bool prefetch_ahead<type_list<E...>> = (0 + ... + math_count<E>) > 0;

template <class T, class Roots>
struct eval_node<tensor<T>, Roots> {
  using value_type = T;
  KILN_READER_INLINE static T at(node_ctx c, std::int64_t j) noexcept {
    return static_cast<const T*>(c.in[0])[j];
  }
  KILN_READER_INLINE static batch<T> load(node_ctx c, std::int64_t j) noexcept {
    const T* p = static_cast<const T*>(c.in[0]) + j;
    // The address is formed as an integer: it may lie past the end.
    if constexpr (prefetch_ahead<Roots>)
      __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(p) +
                                                       static_cast<std::uintptr_t>(c.ahead)));
    return batch<T>::load_unaligned(p);
  }
};

template <class T, class Roots>
struct eval_node<scalar_expr<T>, Roots> {
  using value_type = T;
  KILN_READER_INLINE static T at(node_ctx c, std::int64_t) noexcept {
    T v;
    std::memcpy(static_cast<void*>(&v), &c.sc[0].bits, sizeof v);
    return v;
  }
  KILN_READER_INLINE static batch<T> load(node_ctx c, std::int64_t j) noexcept {
    return batch<T>(at(c, j));
  }
};

template <class Op, class... C, class Roots>
struct eval_node<expr_node<Op, C...>, Roots> {
  using node = expr_node<Op, C...>;
  using value_type = typename node::value_type;
  static constexpr bool memo = memoized<node, Roots>;

  KILN_READER_INLINE static value_type at(node_ctx c, std::int64_t j) noexcept {
    if constexpr (memo) {
      static_assert(sizeof(value_type) <= sizeof(memo_slot::scalar));
      if (const memo_slot* s = c.slots[0]; s && s->scalar_key == j) {
        value_type v;
        std::memcpy(static_cast<void*>(&v), s->scalar, sizeof v);
        return v;
      }
      return memo_at(c, j);
    } else {
      return compute_at(c, j);
    }
  }
  KILN_READER_INLINE static batch<value_type> load(node_ctx c, std::int64_t j) noexcept {
    if constexpr (memo) {
      static_assert(sizeof(batch<value_type>) <= sizeof(memo_slot::bytes));
      if (const memo_slot* s = c.slots[0]; s && s->key == j) {
        batch<value_type> v;
        std::memcpy(static_cast<void*>(&v), s->bytes, sizeof v);
        return v;
      }
      return memo_load(c, j);
    } else {
      return compute_load(c, j);
    }
  }

private:
  static constexpr auto leaf_at = prefix_sums<leaf_count<C>...>();
  static constexpr auto scalar_at = prefix_sums<scalar_count<C>...>();
  static constexpr auto site_at = prefix_sums<memo_count<C, Roots>...>();

  template <std::size_t I>
  KILN_READER_INLINE static node_ctx child(node_ctx c) noexcept {
    return {c.in + leaf_at[I], c.sc + scalar_at[I], c.slots + int(memo) + site_at[I], c.ahead};
  }
  template <std::size_t I>
  using child_t = eval_node<std::tuple_element_t<I, std::tuple<C...>>, Roots>;
  template <std::size_t I>
  using operand_t = typename Op::rule::template operand<I, value_t<C>...>;

  // A memo site's code, once per subtree type however often the type occurs (the nodes
  // below inline into it, down to the next memo sites). Left to itself, the compiler stops
  // inlining in a large tree (a gradient's) and every node becomes a call that passes its
  // batch through memory: measured, the calls cost more than the arithmetic.
  [[gnu::noinline]] static batch<value_type> memo_load(node_ctx c, std::int64_t j) noexcept {
    const batch<value_type> v = compute_load(c, j);
    if (memo_slot* s = c.slots[0]) {
      std::memcpy(s->bytes, static_cast<const void*>(&v), sizeof v);
      s->key = j;
    }
    return v;
  }
  [[gnu::noinline]] static value_type memo_at(node_ctx c, std::int64_t j) noexcept {
    const value_type v = compute_at(c, j);
    if (memo_slot* s = c.slots[0]) {
      std::memcpy(s->scalar, static_cast<const void*>(&v), sizeof v);
      s->scalar_key = j;
    }
    return v;
  }

  // (Index-sequence helpers, not lambdas: a lambda is a function of its own, which the
  // compiler stops inlining in a large tree.)
  KILN_READER_INLINE static value_type compute_at(node_ctx c, std::int64_t j) noexcept {
    return compute_at(c, j, std::index_sequence_for<C...>{});
  }
  template <std::size_t... I>
  KILN_READER_INLINE static value_type compute_at(node_ctx c, std::int64_t j,
                                                  std::index_sequence<I...>) noexcept {
    // A gate (autodiff's: operand 0 where operand 1 is non-zero, else 0) reads operand 0
    // only where it is needed.
    if constexpr (short_circuits<Op>) {
      const auto m = convert<compute_t<operand_t<1>>>(child_t<1>::at(child<1>(c), j));
      if (m == decltype(m)(0)) return value_type(0);
      return convert<value_type>(
          Op::host(convert<compute_t<operand_t<0>>>(child_t<0>::at(child<0>(c), j)), m));
    } else {
      return convert<value_type>(
          Op::host(convert<compute_t<operand_t<I>>>(child_t<I>::at(child<I>(c), j))...));
    }
  }
  KILN_READER_INLINE static batch<value_type> compute_load(node_ctx c, std::int64_t j) noexcept {
    return compute_load(c, j, std::index_sequence_for<C...>{});
  }
  template <std::size_t... I>
  KILN_READER_INLINE static batch<value_type> compute_load(node_ctx c, std::int64_t j,
                                                           std::index_sequence<I...>) noexcept {
    if constexpr (!simd_all<Op, operand_t<I>...>) { // no simd(): lane by lane
      return lanewise<Op, value_type, operand_t<I>...>(
          batch_convert<operand_t<I>>(child_t<I>::load(child<I>(c), j))...);
    } else if constexpr (short_circuits<Op>) { // a batch whose mask is all zero costs the mask
      const auto m = batch_convert<operand_t<1>>(child_t<1>::load(child<1>(c), j));
      if (xsimd::none(m != decltype(m)(0))) return batch<value_type>(value_type(0));
      return batch_convert<value_type>(
          Op::simd(batch_convert<operand_t<0>>(child_t<0>::load(child<0>(c), j)), m));
    } else {
      return batch_convert<value_type>(
          Op::simd(batch_convert<operand_t<I>>(child_t<I>::load(child<I>(c), j))...));
    }
  }
};

// A memo site as the host pass sees it: the subtree's type (one address per type), which
// output's tree it is in, and its leaves and scalars (ranges of the pass's flat lists).
// Two sites share a slot when their types, leaves (memory and strides) and scalars (bits)
// are the same.
struct memo_site {
  const void* type;
  int output;
  int leaf, leaves;
  int scalar, scalars;
};

template <class E>
inline constexpr char subtree_tag = 0;

template <class E, class Roots>
constexpr void collect_memo_sites(memo_site* out, int& i, int output, int leaf, int scalar) {
  if constexpr (memo_count<E, Roots> != 0) {
    [&]<class Op, class... C>(std::type_identity<expr_node<Op, C...>>) {
      if constexpr (memoized<E, Roots>)
        out[i++] = {&subtree_tag<E>, output, leaf, leaf_count<E>, scalar, scalar_count<E>};
      constexpr auto la = prefix_sums<leaf_count<C>...>();
      constexpr auto sa = prefix_sums<scalar_count<C>...>();
      [&]<std::size_t... I>(std::index_sequence<I...>) {
        (collect_memo_sites<C, Roots>(out, i, output, leaf + la[I], scalar + sa[I]), ...);
      }
      (std::index_sequence_for<C...>{});
    }(std::type_identity<E>{});
  }
}

// What the host pass hands a kernel for one run of n elements.
struct kernel_args {
  const void* const* in; // per leaf: its n values, contiguous
  const flat_scalar* scalars;
  memo_slot* const* slots; // per memo site: its slot, or null
  memo_slot* fresh;        // the distinct slots, emptied at each run's start
  int n_fresh;
  void* const* out; // per output: where its n values go, or null (not this run)
  std::int64_t n;
  bool stream; // streaming stores (every output is the destination itself)
  // No output shares a byte with an input or another output: a run of n >= L elements not
  // a multiple of L ends with one more batch over its last L elements (recomputing a few,
  // with the same arithmetic) instead of the tail's padded copies.
  bool apart = false;
  std::intptr_t prefetch = prefetch_bytes; // bytes ahead, where the pass prefetches
};

// A pass type's kernel and what the host pass must know about it.
struct host_kernel_ref {
  void (*run)(const kernel_args&);
  int lanes; // elements per batch; 1 for the scalar loop
  int cost;  // nodes per element, for the thread grain
  bool may_stream;
  std::span<const int> leaf_start;   // per output, and one past the last
  std::span<const int> scalar_start; // likewise
  std::span<const memo_site> memos;
  // The kernel's type as the compiler spells it: the tuning database's key for the pass
  // (stable from run to run of one build; hashed only where something is tuned).
  const char* (*type_name)();
};

template <class Dsts, class Exprs>
struct host_kernel;

template <class... D, class... E>
struct host_kernel<type_list<D...>, type_list<E...>> {
  using roots = type_list<E...>;
  static constexpr std::size_t n_out = sizeof...(E);

  // The batch width every type in every tree and every output shares, else 0 (the scalar
  // loop): computed on sizes, so no xsimd batch of an unsupported type is ever named.
  static constexpr std::size_t lane_width() {
    constexpr std::size_t bytes[] = {lane_bytes<E>...};
    constexpr bool dst_ok[] = {(simd_element<D> && sizeof(D) == lane_bytes<E>)...};
    for (std::size_t i = 0; i < n_out; ++i)
      if (bytes[i] == 0 || bytes[i] != bytes[0] || !dst_ok[i]) return 0;
    return bytes[0];
  }
  static constexpr bool simd = lane_width() != 0;
  using first_dst = std::tuple_element_t<0, std::tuple<D...>>;
  static constexpr int lanes() {
    if constexpr (simd)
      return int(batch<first_dst>::size);
    else
      return 1;
  }

  static constexpr std::array<int, n_out + 1> leaf_start = prefix_sums<leaf_count<E>...>();
  static constexpr std::array<int, n_out + 1> scalar_start = prefix_sums<scalar_count<E>...>();
  static constexpr std::array<int, n_out + 1> memo_start = prefix_sums<memo_count<E, roots>...>();
  static constexpr int n_memos = memo_start[n_out];
  static constexpr std::array<memo_site, n_memos ? n_memos : 1> memos = [] {
    std::array<memo_site, n_memos ? n_memos : 1> a{};
    int i = 0, o = 0;
    ((collect_memo_sites<E, roots>(a.data(), i, o, leaf_start[o], scalar_start[o]), ++o), ...);
    return a;
  }();

  static constexpr bool may_stream = simd && (math_count<E> + ...) == 0;

  static host_kernel_ref ref() {
    return {&run,
            lanes(),
            (node_count<E> + ...),
            may_stream,
            leaf_start,
            scalar_start,
            {memos.data(), std::size_t(n_memos)},
            &type_name};
  }
  static const char* type_name() { return __PRETTY_FUNCTION__; }

  static void run(const kernel_args& a) {
    for (int m = 0; m < a.n_fresh; ++m)
      a.fresh[m].key = a.fresh[m].scalar_key = INT64_MIN;
    if constexpr (simd) {
      // The streaming-store loop exists only where a pass may stream: a second copy of a
      // large tree's loop doubled its code, and the compiler's unit-growth limit then left
      // xsimd's exp a call per batch.
      if constexpr (may_stream)
        if (a.stream) return simd_loop<true>(a);
      simd_loop<false>(a);
    } else {
      scalar_loop(a);
    }
  }

private:
  static constexpr int n_leaves = leaf_start[n_out], n_scalars = scalar_start[n_out];

  // A run's pointers and scalars, copied into the loop's own frame. A batch is stored through
  // a pointer that may alias anything (xsimd's stores), so what the compiler cannot prove
  // apart from it (the caller's arrays) it reloads after every store, twice indirect; the
  // loop's own locals it keeps in registers. (Measured: r = a * b + c 20% slower without.)
  struct frame {
    const void* in[n_leaves ? n_leaves : 1];
    flat_scalar sc[n_scalars ? n_scalars : 1];
    memo_slot* slots[n_memos ? n_memos : 1];
    void* out[n_out];
    std::int64_t n;
    std::intptr_t ahead;
    explicit frame(const kernel_args& a) : n(a.n), ahead(a.prefetch) {
      std::copy_n(a.in, n_leaves, in);
      std::copy_n(a.scalars, n_scalars, sc);
      std::copy_n(a.slots, n_memos, slots);
      std::copy_n(a.out, n_out, out);
    }
  };
  // An output whose tree type repeats in the pass (memo.hpp's `repeated`: the gradients of
  // one grad with respect to tensors of one dtype share a type, and their gated sums are no
  // memo sites) is computed by one out-of-line copy of that tree's code, called once per
  // output: inlined, a pass of k such outputs compiled k copies of a tree that itself grows
  // with k (measured: the kernel of 8 gradients of a function of 8 tensors was 4x the code
  // of 4 of 4, at -O0).
  // Output I's value at j: a batch (Simd) or one element.
  template <bool Simd, class Ei>
  KILN_READER_INLINE static auto read(node_ctx c, std::int64_t j) noexcept {
    if constexpr (Simd)
      return eval_node<Ei, roots>::load(c, j);
    else
      return eval_node<Ei, roots>::at(c, j);
  }
  template <bool Simd, class Ei>
  [[gnu::noinline]] static auto read_apart(node_ctx c, std::int64_t j) noexcept {
    return read<Simd, Ei>(c, j);
  }
  template <bool Simd, std::size_t I>
  KILN_READER_INLINE static auto value(node_ctx c, std::int64_t j) noexcept {
    using Ei = std::tuple_element_t<I, std::tuple<E...>>;
    if constexpr (repeated<Ei, roots>)
      return read_apart<Simd, Ei>(c, j);
    else
      return read<Simd, Ei>(c, j);
  }

  template <std::size_t I>
  KILN_READER_INLINE static node_ctx root(const frame& f) noexcept {
    return {f.in + leaf_start[I], f.sc + scalar_start[I], f.slots + memo_start[I], f.ahead};
  }
  // Whether output I is filled by this run: always in a one-output pass (no test).
  template <std::size_t I>
  KILN_READER_INLINE static bool on(void* const* out) noexcept {
    if constexpr (n_out == 1)
      return true;
    else
      return out[I] != nullptr;
  }

  // (Not inlined: the tail runs it too, and one copy of the loop is the tree's code once.)
  template <bool Stream>
  [[gnu::noinline]] static void simd_loop(const kernel_args& a) {
    constexpr std::int64_t L = lanes();
    const frame f(a);
    std::int64_t j = 0;
    const bool overlap = a.apart && f.n >= L;
    // Whole batches in a plain counted loop, then, where the run allows it, one more over
    // the last L (else the tail below). With the end tested inside one loop (j reset to
    // n - L there), g++ rebuilt the math functions' constants in every batch: the heavy
    // expression of bench/elementwise.cpp ran ~15% slower than the same batches in a
    // plain loop.
    std::int64_t end = f.n / L * L;
    // Where the run allows it, the batches after the first start where the first output's
    // stores are whole aligned vectors: a row of a view (a stencil's interior, one element
    // past a line) otherwise splits every store, and a batch as wide as a cache line (AVX-512)
    // splits every one: the 5-point stencil of bench/heat2d.cpp (f64 2048^2, 1 thread) ran
    // at 0.82x a hand loop of 256-bit vectors. The first batch covers the elements before.
    std::int64_t next = -1;
    if (const std::int64_t head = overlap && f.n >= 2 * L ? aligned_head(f.out) : 0; head > 0)
      end = L, next = head;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      for (;;) {
        for (; j < end; j += L) {
          // All values of a position are computed before any is stored, so an output that
          // is also an input (same layout) is read before it is overwritten.
          const auto vals = std::make_tuple(
              (on<I>(f.out) ? value<true, I>(root<I>(f), j) : batch<value_t<E>>())...);
          (store<I, Stream>(f.out, j, std::get<I>(vals)), ...);
        }
        if (next >= 0) { // after the first batch, from the aligned one on
          j = next;
          end = next + (f.n - next) / L * L;
          next = -1;
          continue;
        }
        if (!overlap || j >= f.n) break;
        j = f.n - L; // the last few: one batch over the last L
        end = f.n;
      }
    }
    (std::index_sequence_for<E...>{});
    if (j < f.n) tail(a, j);
  }

  // Elements before the first filled output's first batch-aligned position (0 where it is
  // aligned, or not even aligned to its element).
  static std::int64_t aligned_head(void* const* out) noexcept {
    constexpr std::size_t size[] = {sizeof(D)...}, w = size[0] * std::size_t(lanes());
    for (std::size_t i = 0; i < n_out; ++i)
      if (out[i]) {
        const auto at = reinterpret_cast<std::uintptr_t>(out[i]);
        if (at % size[i] != 0) return 0;
        return std::int64_t((w - at % w) % w / size[i]);
      }
    return 0;
  }

  template <std::size_t I, bool Stream, class V>
  KILN_READER_INLINE static void store(void* const* out, std::int64_t j,
                                       const batch<V>& v) noexcept {
    using T = std::tuple_element_t<I, std::tuple<D...>>;
    if (!on<I>(out)) return;
    T* p = static_cast<T*>(out[I]) + j;
    const batch<T> d = batch_convert<T>(v);
    if constexpr (Stream)
      stream_store(p, d);
    else
      d.store_unaligned(p);
  }

  // The last n - j < L elements go through the same batch arithmetic, the batch filled out
  // with copies of its first element, so an element's value does not depend on where a
  // run happened to end.
  [[gnu::noinline]] static void tail(const kernel_args& a, std::int64_t j) {
    constexpr int L = lanes();
    const std::int64_t r = a.n - j;
    alignas(64) unsigned char buf[n_leaves ? n_leaves : 1][64];
    const void* in[n_leaves ? n_leaves : 1] = {};
    constexpr std::size_t w = lane_width();
    for (int k = 0; k < n_leaves; ++k) {
      if (!a.in[k]) continue; // a leaf of an output this run leaves alone
      const auto* src = static_cast<const unsigned char*>(a.in[k]) + j * std::int64_t(w);
      std::memcpy(buf[k], src, std::size_t(r) * w);
      for (int e = int(r); e < L; ++e)
        std::memcpy(buf[k] + std::size_t(e) * w, src, w);
      in[k] = buf[k];
    }
    // The batch is the main loop's, run once over the padded copies into buffers of its own
    // (a second copy of the tree's code here was as large as the loop's).
    static_assert(L * w <= 64, "kiln: internal: a batch is at most 64 bytes");
    alignas(64) unsigned char res[n_out][64];
    void* out[n_out];
    for (std::size_t i = 0; i < n_out; ++i)
      out[i] = a.out[i] ? res[i] : nullptr;
    for (int m = 0; m < a.n_fresh; ++m) // positions restart at 0 for this batch
      a.fresh[m].key = a.fresh[m].scalar_key = INT64_MIN;
    kernel_args one = a;
    one.in = in;
    one.out = out;
    one.n = L;
    simd_loop<false>(one);
    constexpr std::size_t size[] = {sizeof(D)...};
    for (std::size_t i = 0; i < n_out; ++i)
      if (a.out[i])
        std::memcpy(static_cast<unsigned char*>(a.out[i]) + j * std::int64_t(size[i]), res[i],
                    std::size_t(r) * size[i]);
  }

  static void scalar_loop(const kernel_args& a) {
    const frame f(a);
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      for (std::int64_t j = 0; j < f.n; ++j) {
        const auto vals =
            std::make_tuple((on<I>(f.out) ? value<false, I>(root<I>(f), j) : value_t<E>())...);
        (
            [&] {
              using T = std::tuple_element_t<I, std::tuple<D...>>;
              if (on<I>(f.out)) static_cast<T*>(f.out[I])[j] = convert<T>(std::get<I>(vals));
            }(),
            ...);
      }
    }
    (std::index_sequence_for<E...>{});
  }
};

} // namespace kiln::detail
