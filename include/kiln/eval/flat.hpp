#pragma once
// An expression's leaves in a flat list, in depth-first order: the run-time half of a pass.
// The tree's type says what to compute (on the host the pass type's kernel, kernel.hpp; on a
// device its description, ir/describe.hpp); its leaves (tensors: memory, layout, dtype) and
// scalars (bits) say what to compute it on. The planner and the host and device passes read
// only this list, so their code exists once per program, not once per expression type.
#include "kiln/expr.hpp"
#include "kiln/tensor.hpp"

#include <array>
#include <cstdint>
#include <cstring>
#include <span>
#include <utility>

namespace kiln::detail {

// A tree of tensors, scalars and op nodes only: what a pass computes once the reductions
// inside an expression have been materialized.
template <class E>
inline constexpr bool plain_tree = false;
template <class T>
inline constexpr bool plain_tree<tensor<T>> = true;
template <class T>
inline constexpr bool plain_tree<scalar_expr<T>> = true;
template <class Op, class... C>
inline constexpr bool plain_tree<expr_node<Op, C...>> = (plain_tree<C> && ...);

// The name of a device-only op in a plain tree (README, "Raw device code"), else null: the
// host evaluators refuse such a tree before making its kernel.
constexpr const char* first_named(std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (n) return n;
  return nullptr;
}
template <class E>
inline constexpr const char* device_only_in = nullptr;
template <class Op, class... C>
inline constexpr const char* device_only_in<expr_node<Op, C...>> =
    device_only_op<Op>() ? Op::name : first_named({device_only_in<C>...});
// What a host evaluator says of such a tree (op: the device-only op's name).
[[noreturn]] inline void refuse_device_only(const char* op) {
  throw error(op, "the op has no host implementation (it is declared device_only)",
              "evaluate it on a GPU device");
}

template <class E>
inline constexpr int leaf_count = 0;
template <class T>
inline constexpr int leaf_count<tensor<T>> = 1;
template <class Op, class... C>
inline constexpr int leaf_count<expr_node<Op, C...>> = (0 + ... + leaf_count<C>);

template <class E>
inline constexpr int scalar_count = 0;
template <class T>
inline constexpr int scalar_count<scalar_expr<T>> = 1;
template <class Op, class... C>
inline constexpr int scalar_count<expr_node<Op, C...>> = (0 + ... + scalar_count<C>);

// A tensor leaf: its memory, its layout (the leaf's own, before broadcasting), its dtype.
struct flat_leaf {
  const kiln::storage* storage;
  const kiln::layout* layout;
  dtype type;
};

// The memory a storage lives in, for overlap tests: its address on the host, its buffer
// handle on a device (offsets then count from the buffer's start).
inline const void* memory_of(const storage& s) { return s.on_host() ? s.data() : s.handle(); }

// The bytes [first, second) a layout over t's storage touches, from the memory's start.
inline std::pair<std::uintptr_t, std::uintptr_t> byte_range(const flat_leaf& t, const layout& l) {
  const auto [lo, hi] = l.extent();
  const auto base = t.storage->on_host() ? reinterpret_cast<std::uintptr_t>(t.storage->data())
                                         : std::uintptr_t{0};
  return {base + static_cast<std::uintptr_t>(lo) * size_of(t.type),
          base + static_cast<std::uintptr_t>(hi) * size_of(t.type)};
}
inline bool intersect(std::pair<std::uintptr_t, std::uintptr_t> a,
                      std::pair<std::uintptr_t, std::uintptr_t> b) {
  return a.first < a.second && b.first < b.second && a.first < b.second && b.first < a.second;
}

// A scalar leaf's value, bit for bit in the low bytes (the kernel knows its type).
struct flat_scalar {
  std::uint64_t bits = 0;
  // A plan parameter's value (scalar_expr::source): a replay reads its bits from there.
  const void* source = nullptr;
};

template <class T>
flat_scalar scalar_bits_of(const T& v) {
  static_assert(sizeof(T) <= sizeof(std::uint64_t));
  flat_scalar s;
  std::memcpy(&s.bits, &v, sizeof v);
  return s;
}

template <class T>
void flatten(const tensor<T>& t, flat_leaf*& leaves, flat_scalar*&) {
  *leaves++ = {t.storage().get(), &t.layout(), dtype_of<T>()};
}
template <class T>
void flatten(const scalar_expr<T>& s, flat_leaf*&, flat_scalar*& scalars) {
  flat_scalar f = scalar_bits_of(s.value);
  f.source = s.source;
  *scalars++ = f;
}
template <class Op, class... C>
void flatten(const expr_node<Op, C...>& n, flat_leaf*& leaves, flat_scalar*& scalars) {
  n.each_child([&](const auto& c) { flatten(c, leaves, scalars); });
}

// The flat form of the expressions of a pass, one after another; it points into them,
// which must outlive it.
template <class... E>
struct flat_pass {
  static_assert((plain_tree<E> && ...), "kiln: a pass computes trees of tensors, scalars and ops");
  static constexpr int n_leaves = (0 + ... + leaf_count<E>);
  static constexpr int n_scalars = (0 + ... + scalar_count<E>);
  // (One element at least: a zero-length array member is not standard.)
  std::array<flat_leaf, n_leaves ? n_leaves : 1> leaves;
  std::array<flat_scalar, n_scalars ? n_scalars : 1> scalars;
  explicit flat_pass(const E&... e) {
    flat_leaf* l = leaves.data();
    flat_scalar* s = scalars.data();
    (flatten(e, l, s), ...);
  }
  std::span<const flat_leaf> leaf_span() const { return {leaves.data(), n_leaves}; }
  std::span<const flat_scalar> scalar_span() const { return {scalars.data(), n_scalars}; }
};

template <class E>
using flat_expr = flat_pass<E>;

} // namespace kiln::detail
