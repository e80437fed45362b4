#pragma once
// Common subexpressions in the host evaluator: which subtrees of a pass are memo sites. A
// subtree whose type occurs more than once in the pass's trees (all its outputs'), and
// which costs more to compute than a slot (see memoized), is a memo site; before the loop,
// the host pass gives sites of one type over the same memory, strides and scalar values one
// slot (host_pass.hpp), and in the loop the first of them to compute a batch stores it and
// the others take it from the slot (kernel.hpp). Only the types are known at compile time:
// x * y and z * w have one type, and whether they are the same values is decided once per
// pass. This is what keeps a value and its gradients (kiln::grad's adjoint trees repeat
// the forward subtrees in every route) from recomputing each shared exp or erf per use.
// Values are unchanged: a slot holds the batch the same code computed. A memo site is also
// where the kernel's code is split into functions: the rest of the tree inlines, so a
// subtree type's code exists once, however often the type occurs (an output's whole tree
// whose type repeats is split off too, kernel.hpp).
#include "kiln/eval/readers.hpp"
#include "kiln/ops/arithmetic.hpp"

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
// by exact type at run time (index_memo_sites).
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

// What a node costs per batch beyond its operands, in adds: the op's own `cost` where it
// states one (a user's op), else a guess: a math function (exp, log, erf, sqrt...: the
// float-computing rule) tens of instructions, a division several.
template <class Op>
inline constexpr int op_cost = declared_cost<Op>() >= 0 ? declared_cost<Op>()
                               : std::is_same_v<typename Op::rule, rules::floating> ? 40
                               : std::is_same_v<Op, ops::div>                       ? 8
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

} // namespace kiln::detail
