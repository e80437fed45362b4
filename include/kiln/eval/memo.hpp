#pragma once
// Common subexpressions in the host evaluator. A pass's reader trees (all its outputs')
// wrap each subtree whose type occurs more than once, and which costs more to compute than
// a slot (see memoized), in a memo reader; before the loop, memo readers whose subtrees
// read the same memory through the same strides with the same scalar values are given one
// slot, and in the loop the first of them to load a batch computes it and the others take
// it from the slot. Only the types are known at compile
// time: x * y and z * w have one type, and whether they are the same values is decided
// here, once per pass. This is what keeps a value and its gradients (kiln::grad's
// adjoint trees repeat the forward subtrees in every route) from recomputing each shared
// exp or erf per use. Values are unchanged: a slot holds the batch the same code computed.
// A memo reader's subtree is also where the pass's code is split into functions: the rest
// of the tree inlines (readers.hpp), so a subtree type's code exists once, however often
// the type occurs.
#include "kiln/eval/readers.hpp"
#include "kiln/eval/stream.hpp"
#include "kiln/ops/arithmetic.hpp"

#include <boost/hana/length.hpp>

#include <array>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

namespace kiln::detail {

template <class... T>
struct type_list {};

// One 64-bit number per subtree type, from its structure: repeat detection compares numbers
// in a constexpr loop. (A fold of std::is_same over a concatenated type list instantiated
// one is_same per pair of subtree types, quadratic in the tree size, and the concatenation
// one pack per level. Comparing addresses of per-type variables is no constant expression
// under g++ -fsanitize=null or -fno-delete-null-pointer-checks.) Two types sharing a number
// (odds about n^2 / 2^64) would only give a subtree a slot nobody shares: slots are shared
// by exact type at run time (index_memos).
template <class T>
constexpr std::uint64_t spelling_hash() {
  std::uint64_t h = 14695981039346656037ull; // FNV-1a over the compiler's name of T
  for (const char* p = __PRETTY_FUNCTION__; *p; ++p)
    h = (h ^ static_cast<unsigned char>(*p)) * 1099511628211ull;
  return h;
}
constexpr std::uint64_t mix_hash(std::uint64_t h, std::uint64_t c) { // splitmix64's finalizer
  std::uint64_t z = h + 0x9e3779b97f4a7c15ull * (c | 1) + (c >> 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
template <class E> // leaves: tensor<T>, scalar_expr<T>
inline constexpr std::uint64_t subtree_hash = spelling_hash<E>();
template <class Op, class... C>
inline constexpr std::uint64_t subtree_hash<expr_node<Op, C...>> = [] {
  std::uint64_t h = spelling_hash<Op>();
  ((h = mix_hash(h, subtree_hash<C>)), ...);
  return h;
}();

// The number of op nodes of a tree, once per occurrence.
template <class E>
inline constexpr int subtree_count = 0;
template <class Op, class... C>
inline constexpr int subtree_count<expr_node<Op, C...>> = 1 + (0 + ... + subtree_count<C>);

template <class E>
constexpr void collect_subtrees(std::uint64_t* out, int& i) {
  if constexpr (subtree_count<E> != 0) {
    [&]<class Op, class... C>(std::type_identity<expr_node<Op, C...>>) {
      out[i++] = subtree_hash<E>;
      (collect_subtrees<C>(out, i), ...);
    }(std::type_identity<E>{});
  }
}

// Every subtree of the outputs' trees (Roots: their expression types), computed once per
// pass type. The per-node functions below are templated on Roots, never on this list: a
// list of every subtree type in every symbol's name made large gradient trees take
// minutes to compile.
template <class Roots>
struct all_subtrees;
template <class... E>
struct all_subtrees<type_list<E...>> {
  static constexpr int n = (0 + ... + subtree_count<E>);
  static constexpr std::array<std::uint64_t, n> ids = [] {
    std::array<std::uint64_t, n> a{};
    int i = 0;
    (collect_subtrees<E>(a.data(), i), ...);
    return a;
  }();
};
template <class N, class Roots>
inline constexpr bool repeated = [] {
  int k = 0;
  for (const std::uint64_t id : all_subtrees<Roots>::ids)
    k += id == subtree_hash<N>;
  return k >= 2;
}();

// Gates (short-circuit ops) and sums of them: what autodiff adds up per leaf occurrence.
// Their operands are memoized where worth it; the gates and sums themselves repeat in
// every gradient of one type but with other masks, so a slot would never be shared.
template <class E>
inline constexpr bool gate_sum = false;
template <class Op, class... C>
inline constexpr bool gate_sum<expr_node<Op, C...>> = short_circuits<Op>;
template <class A, class B>
inline constexpr bool gate_sum<expr_node<ops::add, A, B>> = gate_sum<A>&& gate_sum<B>;

// What a node costs per batch beyond its operands, in adds: a math function (exp, log,
// erf, sqrt...: the float-computing rule) tens of instructions, a division several.
template <class Op>
inline constexpr int op_cost = std::is_same_v<typename Op::rule, rules::floating> ? 40
                               : std::is_same_v<Op, ops::div>                     ? 8
                                                                                  : 1;

template <class E, class Roots>
inline constexpr bool memoized = false;
// The cost of computing E where its memoized operands are slot reads.
template <class E, class Roots>
inline constexpr int own_cost = 0;
template <class Op, class... C, class Roots>
inline constexpr int
    own_cost<expr_node<Op, C...>, Roots> = op_cost<Op> +
                                           ((memoized<C, Roots> ? 0 : own_cost<C, Roots>)+... + 0);

// A slot is worth it for a subtree that occurs more than once and whose own computation
// costs more than the slot's out-of-line call (~25 adds): cheaper ones are recomputed
// inline at each use. Gates and their sums never share (see gate_sum).
template <class Op, class... C, class Roots>
inline constexpr bool memoized<expr_node<Op, C...>, Roots> =
    !gate_sum<expr_node<Op, C...>> && own_cost<expr_node<Op, C...>, Roots> >= 25 &&
    repeated<expr_node<Op, C...>, Roots>;

// One batch, and the position it was computed for (INT64_MIN: none). Big enough for any
// batch (64 bytes: AVX-512).
struct alignas(64) memo_slot {
  std::int64_t key = INT64_MIN;
  alignas(64) unsigned char bytes[64];
  std::int64_t scalar_key = INT64_MIN; // the scalar loop's element (at)
  alignas(16) unsigned char scalar[16];
};

template <class R>
struct memo_reader {
  using value_type = typename R::value_type;
  R wrapped;
  int index = -1;            // the slot, shared with every equal reader (index_memos)
  bool shared = false;       // another reader has this slot: else a slot would cost only
  memo_slot* slot = nullptr; // this task's slot `index`, where shared

  void set_row(const std::int64_t* idx, int outer) noexcept {
    wrapped.set_row(idx, outer);
    if (slot) slot->key = slot->scalar_key = INT64_MIN;
  }
  KILN_READER_INLINE value_type at(std::int64_t j) const noexcept {
    static_assert(sizeof(value_type) <= sizeof(memo_slot::scalar));
    if (slot && slot->scalar_key == j) {
      value_type v;
      std::memcpy(static_cast<void*>(&v), slot->scalar, sizeof v);
      return v;
    }
    return compute_at(j);
  }
  template <bool Unit = false>
  KILN_READER_INLINE batch<value_type> load(std::int64_t j) const noexcept {
    if (slot && slot->key == j) return from_slot();
    return compute<Unit, false>(j);
  }
  // A splat at j is cached under a key no load uses.
  KILN_READER_INLINE batch<value_type> splat(std::int64_t j) const noexcept {
    if (slot && slot->key == -2 - j) return from_slot();
    return compute<false, true>(j);
  }

private:
  static_assert(sizeof(batch<value_type>) <= sizeof(memo_slot::bytes));
  KILN_READER_INLINE batch<value_type> from_slot() const noexcept {
    batch<value_type> v;
    std::memcpy(static_cast<void*>(&v), slot->bytes, sizeof v);
    return v;
  }
  // The subtree's own code, once per subtree type however often the type occurs (its
  // readers inline into it, down to the next memo readers).
  template <bool Unit, bool Splat>
  [[gnu::noinline]] batch<value_type> compute(std::int64_t j) const noexcept {
    batch<value_type> v;
    if constexpr (Splat)
      v = wrapped.splat(j);
    else
      v = wrapped.template load<Unit>(j);
    if (slot) {
      std::memcpy(slot->bytes, static_cast<const void*>(&v), sizeof v);
      slot->key = Splat ? -2 - j : j;
    }
    return v;
  }
  [[gnu::noinline]] value_type compute_at(std::int64_t j) const noexcept {
    const value_type v = wrapped.at(j);
    if (slot) {
      std::memcpy(slot->scalar, static_cast<const void*>(&v), sizeof v);
      slot->scalar_key = j;
    }
    return v;
  }
};

// Builds the reader tree like make_reader, wrapping each subtree whose type occurs at least
// twice in the outputs' trees (Roots: type_list of their expression types) and is worth it.
template <class Roots, element T, class Next>
leaf_reader<T> make_memo_reader(const tensor<T>& t, Next& next) {
  return make_reader(t, next);
}
template <class Roots, element T, class Next>
scalar_reader<T> make_memo_reader(const scalar_expr<T>& s, Next& next) {
  return make_reader(s, next);
}
template <class Roots, class Op, class... C, class Next>
auto make_memo_reader(const expr_node<Op, C...>& n, Next& next) {
  auto r = hana::unpack(n.children, [&](const auto&... c) {
    return op_reader<Op, decltype(make_memo_reader<Roots>(c, next))...>{
        hana::tuple<decltype(make_memo_reader<Roots>(c, next))...>{
            make_memo_reader<Roots>(c, next)...}};
  });
  if constexpr (memoized<expr_node<Op, C...>, Roots>)
    return memo_reader<decltype(r)>{std::move(r)};
  else
    return r;
}

// Whether two readers of one type read the same values: the same addresses through the
// same strides, and the same scalars (bit for bit).
template <class R>
bool same_values(const R& a, const R& b) {
  if constexpr (requires { a.wrapped; }) {
    return same_values(a.wrapped, b.wrapped);
  } else if constexpr (requires { a.children; }) {
    constexpr std::size_t n = decltype(hana::length(a.children))::value;
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return (same_values(hana::at_c<I>(a.children), hana::at_c<I>(b.children)) && ...);
    }
    (std::make_index_sequence<n>{});
  } else if constexpr (requires { a.st; }) {
    return a.base == b.base && a.inner == b.inner && std::equal(a.st, a.st + max_rank, b.st);
  } else {
    return std::memcmp(&a.value, &b.value, sizeof a.value) == 0;
  }
}

// Gives every memo reader of a tree its slot index: that of an earlier memo reader of the
// same type reading the same values, else a new one. `seen` lists the readers so far.
template <class R>
inline constexpr char memo_tag = 0; // one address per reader type (no RTTI needed)
struct memo_seen {
  const char* type;
  const void* reader;
  int index;
};
template <class R>
void index_memos(R& r, std::vector<memo_seen>& seen, int& slots) {
  if constexpr (requires { r.wrapped; }) {
    index_memos(r.wrapped, seen, slots);
    for (const auto& s : seen)
      if (s.type == &memo_tag<R> && same_values(*static_cast<const R*>(s.reader), r)) {
        r.index = s.index;
        return;
      }
    r.index = slots++;
    seen.push_back({&memo_tag<R>, &r, r.index});
  } else if constexpr (requires { r.children; }) {
    hana::for_each(r.children, [&](auto& c) { index_memos(c, seen, slots); });
  }
}

// Marks the memo readers whose slot has other readers (users[i]: readers of slot i).
template <class R>
void count_memo_users(R& r, std::vector<int>& users, bool mark) {
  if constexpr (requires { r.wrapped; }) {
    if (mark)
      r.shared = users[r.index] > 1;
    else
      ++users[r.index];
    count_memo_users(r.wrapped, users, mark);
  } else if constexpr (requires { r.children; }) {
    hana::for_each(r.children, [&](auto& c) { count_memo_users(c, users, mark); });
  }
}

// Points every shared memo reader at its slot in `slots` (one task's).
template <class R>
void bind_memos(R& r, memo_slot* slots) {
  if constexpr (requires { r.wrapped; }) {
    r.slot = r.shared ? slots + r.index : nullptr;
    bind_memos(r.wrapped, slots);
  } else if constexpr (requires { r.children; }) {
    hana::for_each(r.children, [&](auto& c) { bind_memos(c, slots); });
  }
}

} // namespace kiln::detail
