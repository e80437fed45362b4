#pragma once
// Common subexpressions in the host evaluator. A pass's reader trees (all its outputs')
// wrap every subtree whose type occurs more than once in a memo reader; before the loop,
// memo readers whose subtrees read the same memory through the same strides with the same
// scalar values are given one slot, and in the loop the first of them to load a batch
// computes it and the others take it from the slot. Only the types are known at compile
// time: x * y and z * w have one type, and whether they are the same values is decided
// here, once per pass. This is what keeps a value and its gradients (kiln::grad's
// adjoint trees repeat the forward subtrees in every route) from recomputing each shared
// exp or erf per use. Values are unchanged: a slot holds the batch the same code computed.
#include "kiln/eval/readers.hpp"
#include "kiln/eval/stream.hpp"

#include <boost/hana/length.hpp>

#include <cstring>
#include <vector>

namespace kiln::detail {

template <class... T>
struct type_list {};

template <class... L>
struct concat_lists;
template <>
struct concat_lists<> {
  using type = type_list<>;
};
template <class... A>
struct concat_lists<type_list<A...>> {
  using type = type_list<A...>;
};
template <class... A, class... B, class... Rest>
struct concat_lists<type_list<A...>, type_list<B...>, Rest...> {
  using type = typename concat_lists<type_list<A..., B...>, Rest...>::type;
};

// Every op-node type of a tree, once per occurrence.
template <class E>
struct subtree_types {
  using type = type_list<>;
};
template <class Op, class... C>
struct subtree_types<expr_node<Op, C...>> {
  using type = typename concat_lists<type_list<expr_node<Op, C...>>,
                                     typename subtree_types<C>::type...>::type;
};

template <class T, class L>
inline constexpr int occurrences = 0;
template <class T, class... U>
inline constexpr int occurrences<T, type_list<U...>> = (0 + ... + int(std::is_same_v<T, U>));

// Every subtree of the outputs' trees (Roots: their expression types), computed once per
// pass type. The per-node functions below are templated on Roots, never on this list: a
// list of every subtree type in every symbol's name made large gradient trees take
// minutes to compile.
template <class Roots>
struct all_subtrees;
template <class... E>
struct all_subtrees<type_list<E...>> {
  using type = typename concat_lists<typename subtree_types<E>::type...>::type;
};
template <class N, class Roots>
inline constexpr bool repeated = occurrences<N, typename all_subtrees<Roots>::type> >= 2;

// Worth a slot: a subtree that computes a math function, or several ops. (A slot costs a
// compare, and a store on a miss: more than one add or multiply.)
template <class E>
inline constexpr bool worth_memo = math_count<E> > 0 || node_count<E> >= 4;

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
  value_type at(std::int64_t j) const noexcept {
    static_assert(sizeof(value_type) <= sizeof(memo_slot::scalar));
    if (!slot) return wrapped.at(j);
    value_type v;
    if (slot->scalar_key == j) {
      std::memcpy(static_cast<void*>(&v), slot->scalar, sizeof v);
      return v;
    }
    v = wrapped.at(j);
    std::memcpy(slot->scalar, static_cast<const void*>(&v), sizeof v);
    slot->scalar_key = j;
    return v;
  }
  template <bool Unit = false>
  batch<value_type> load(std::int64_t j) const noexcept {
    return cached(j, [&] { return wrapped.template load<Unit>(j); });
  }
  // A splat at j is cached under a key no load uses.
  batch<value_type> splat(std::int64_t j) const noexcept {
    return cached(-2 - j, [&] { return wrapped.splat(j); });
  }

private:
  template <class F>
  batch<value_type> cached(std::int64_t key, F compute) const noexcept {
    static_assert(sizeof(batch<value_type>) <= sizeof(memo_slot::bytes));
    if (!slot) return compute();
    batch<value_type> v;
    if (slot->key == key) {
      std::memcpy(static_cast<void*>(&v), slot->bytes, sizeof v);
      return v;
    }
    v = compute();
    std::memcpy(slot->bytes, static_cast<const void*>(&v), sizeof v);
    slot->key = key;
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
  using N = expr_node<Op, C...>;
  if constexpr (!worth_memo<N>) // (tested first: a cheap node is not counted at all)
    return r;
  else if constexpr (repeated<N, Roots>)
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
