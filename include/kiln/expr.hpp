#pragma once
// Expression nodes. An expression is a compile-time tree (Boost.Hana tuples of children
// held by value) whose leaves are tensor handles and scalar values; nothing is computed
// until a result is needed. Holding children by value means an expression built from
// local tensors and returned from a function never dangles: a copied leaf is a refcount
// bump on the tensor's storage.
#include "kiln/dtype.hpp"
#include "kiln/ops/definition.hpp"
#include "kiln/ops/rules.hpp"
#include "kiln/shape.hpp"

#include <boost/hana/for_each.hpp>
#include <boost/hana/tuple.hpp>
#include <boost/hana/unpack.hpp>

#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace kiln {

namespace hana = boost::hana;

// Unconstrained so that a bad element type gets one sentence (tensor.hpp), not a concept dump.
template <class T>
class tensor;

// Every node kind opts in by specializing this trait.
template <class E>
struct is_expression_type : std::false_type {};
template <class T>
struct is_expression_type<tensor<T>> : std::true_type {};

template <class E>
concept expression = is_expression_type<std::remove_cvref_t<E>>::value;

template <class E>
using value_t = typename std::remove_cvref_t<E>::value_type;

// A C++ scalar that may stand in an expression: arithmetic types and kiln's 16-bit floats.
template <class S>
concept scalar = (std::is_arithmetic_v<std::remove_cvref_t<S>> ||
                  std::is_same_v<std::remove_cvref_t<S>, half> ||
                  std::is_same_v<std::remove_cvref_t<S>, bfloat16>)&&!expression<S>;

template <class X>
concept operand = expression<X> || scalar<X>;

template <class Derived>
struct expression_base; // eval(), shape(), to_vector(), item(): see tensor.hpp

// A scalar value, already converted to the type it meets in its expression. It is a
// runtime value: a GPU kernel takes it as a parameter, so new values never recompile.
template <element T>
struct scalar_expr : expression_base<scalar_expr<T>> {
  using value_type = T;
  T value;
  // A captured plan's parameter (kiln::param): where the value of each replay is found.
  const T* source = nullptr;
  explicit scalar_expr(T v) : value(v) {}
  scalar_expr(T v, const T* from) : value(v), source(from) {}
};
template <element T>
struct is_expression_type<scalar_expr<T>> : std::true_type {};

namespace detail {
template <class Op, class... C>
kiln::shape broadcast_children(const C&... children);
}

namespace detail {
// A node's children: one base per child, so that child I is one cast away and a visit of
// them is a fold. (A hana::tuple cost several small functions per visit and per child -
// unpack, for_each, at, ebo - in every node type of every expression, and the optimizer
// pays for each: a tenth of a gradient file's functions.)
template <std::size_t I, class T>
struct child_slot {
  T value;
};
template <class Seq, class... C>
struct child_pack;
template <std::size_t... I, class... C>
struct child_pack<std::index_sequence<I...>, C...> : child_slot<I, C>... {
  template <class... X>
  explicit child_pack(std::in_place_t, X&&... x) : child_slot<I, C>{std::forward<X>(x)}... {}
};
template <std::size_t I, class T>
const T& slot_value(const child_slot<I, T>& s) noexcept {
  return s.value;
}
} // namespace detail

// Tags the constructor of a node whose shape is already known.
struct known_shape_t {
  explicit known_shape_t() = default;
};
inline constexpr known_shape_t known_shape{};

// A node knows its broadcast shape from when it is built: a shape error is raised at the
// op that causes it, as numpy does, not where the expression is later evaluated; and
// evaluation reads the shape instead of folding the tree again.
template <class Op, class... Children>
struct expr_node : expression_base<expr_node<Op, Children...>> {
  using op = Op;
  using value_type = typename Op::rule::template result<value_t<Children>...>;
  using children_type = detail::child_pack<std::index_sequence_for<Children...>, Children...>;
  // Children built in place from the operands as given: one copy or move of each subtree
  // (a by-value constructor made two, and make_node a third), one constructor per node type.
  // The shape first, from the operands: nothing may throw once the union member is built.
  template <class... X>
  explicit expr_node(std::in_place_t, X&&... ch)
      : s_{detail::broadcast_children<Op>(ch...),
           children_type(std::in_place, std::forward<X>(ch)...)} {}
  // A node rebuilt from another of the same shape (its children materialized): no checks.
  template <class... X>
  expr_node(known_shape_t, const kiln::shape& s, X&&... ch)
      : s_{s, children_type(std::in_place, std::forward<X>(ch)...)} {}
  KILN_STATEMENT expr_node(const expr_node& o) : s_(o.s_) {}
  KILN_STATEMENT
  expr_node(expr_node&& o) noexcept(std::is_nothrow_move_constructible_v<children_type>)
      : s_(std::move(o.s_)) {}
  expr_node& operator=(const expr_node& o) {
    s_ = o.s_;
    return *this;
  }
  expr_node& operator=(expr_node&& o) noexcept(std::is_nothrow_move_assignable_v<children_type>) {
    s_ = std::move(o.s_);
    return *this;
  }
  KILN_STATEMENT ~expr_node() { s_.~state(); }

  const kiln::shape& out_shape() const noexcept { return s_.out_shape; }
  // Child I; f(children...); f(child) for each child in order.
  template <std::size_t I>
  const auto& child() const noexcept {
    return detail::slot_value<I>(s_.children);
  }
  template <class F>
  decltype(auto) apply(F&& f) const {
    return apply_(f, std::index_sequence_for<Children...>{});
  }
  template <class F>
  void each_child(F&& f) const {
    each_(f, std::index_sequence_for<Children...>{});
  }

private:
  template <class F, std::size_t... I>
  decltype(auto) apply_(F& f, std::index_sequence<I...>) const {
    return f(detail::slot_value<I>(s_.children)...);
  }
  template <class F, std::size_t... I>
  void each_(F& f, std::index_sequence<I...>) const {
    (f(detail::slot_value<I>(s_.children)), ...);
  }
  struct state {
    kiln::shape out_shape;
    children_type children;
  };
  // In a union: g++'s points-to analysis then counts a node as one variable, not one per
  // field of it and of every leaf below it. Its cost grows with variables times calls in a
  // function, so a function of many statements compiled superlinearly in its statements.
  union {
    state s_;
  };
};
template <class Op, class... Children>
struct is_expression_type<expr_node<Op, Children...>> : std::true_type {};

// The broadcast shape of an expression (rank 0 for a scalar).
template <element T>
const kiln::shape& shape_of(const tensor<T>& t) {
  return t.shape();
}
template <element T>
kiln::shape shape_of(const scalar_expr<T>&) {
  return {};
}
template <class Op, class... C>
const kiln::shape& shape_of(const expr_node<Op, C...>& n) {
  return n.out_shape();
}

} // namespace kiln

// Out of line, one copy per program: inlined into every node's constructor, the shape
// checks and their error messages were a third of a gradient file's object code. Declared
// (or, header-only, defined) here, before broadcast_children calls it.
#if KILN_CORE_DEFINITIONS
#include "kiln/expr_impl.hpp"
#else
namespace kiln::detail {
void broadcast_operand(kiln::shape& acc, const kiln::shape& s, const char* op);
} // namespace kiln::detail
#endif

namespace kiln {
namespace detail {
template <class X>
inline constexpr bool is_scalar_operand = false;
template <class T>
inline constexpr bool is_scalar_operand<scalar_expr<T>> = true;

template <class Op, class... C>
kiln::shape broadcast_children(const C&... children) {
  kiln::shape acc;
  (
      [&] {
        if constexpr (!is_scalar_operand<std::remove_cvref_t<C>>) // rank 0: no change
          broadcast_operand(acc, shape_of(children), Op::name);
      }(),
      ...);
  // Broadcast views of valid tensors can meet in a shape of more than 2^63 elements.
  if (acc.size() > 1) checked_numel(acc, Op::name);
  return acc;
}
} // namespace detail

namespace detail {

// The common value type of the expression operands of a call (bool if there are none),
// which a scalar operand is converted to when it does not widen it.
template <class... X>
struct peer_type {
  using type = bool;
};
template <class X, class... R>
struct peer_type<X, R...> {
  using type = typename peer_type<R...>::type; // a scalar does not count
};
template <expression X, class... R>
struct peer_type<X, R...> {
  using type = promote_t<value_t<X>, typename peer_type<R...>::type>;
};

// An empty tensor handle has no storage to read: refuse it where the node is built, once,
// so no evaluator ever meets a leaf without storage.
template <class X>
void require_operand(const X& x, std::string_view op) {
  if constexpr (requires {
                  x.empty();
                  x.storage();
                })
    if (x.empty())
      throw error(std::string(op), "tensor is empty",
                  "an operand is a default-constructed tensor handle with no storage");
}

// The child an operand becomes: an expression is passed on as it is (the node copies or
// moves it once, into place); a scalar becomes a scalar_expr of the type it meets.
template <class Op, class Peer, class X>
decltype(auto) as_child(X&& x) {
  if constexpr (expression<X>) {
    require_operand(x, Op::name);
    return std::forward<X>(x);
  } else {
    using S = scalar_element_t<std::remove_cvref_t<X>>;
    using T = promote_with_scalar_t<Peer, S>;
    const T v = convert<T>(static_cast<S>(x));
    if constexpr (!is_floating(dtype_of<T>()) && !std::is_same_v<T, bool> &&
                  std::is_arithmetic_v<std::remove_cvref_t<X>>) {
      // An integer scalar that does not fit the tensor's type is an error, not a wrap.
      if (static_cast<long double>(v) != static_cast<long double>(x))
        throw error("scalar", "value does not fit the tensor's dtype",
                    std::to_string(static_cast<long double>(x)) + " as " +
                        std::string(name(dtype_of<T>())));
    }
    return scalar_expr<T>(v);
  }
}

template <class Op, class Peer, class X>
using child_t = std::remove_cvref_t<decltype(as_child<Op, Peer>(std::declval<X>()))>;

} // namespace detail

// Builds the node for Op from operands (expressions and scalars), checking the op's
// type rule with a readable message.
template <class Op, class... X>
KILN_STATEMENT auto make_node(X&&... x) {
  // Before the children are made: they name the op in their errors.
  static_assert(
      requires { Op::name; },
      "kiln: an op needs `static constexpr const char* name` (derive it from "
      "kiln::op_base)");
  using Peer = typename detail::peer_type<std::remove_cvref_t<X>...>::type;
  using Node = expr_node<Op, detail::child_t<Op, Peer, X>...>;
  detail::check_op<Op, value_t<detail::child_t<Op, Peer, X>>...>(std::index_sequence_for<X...>{});
  Op::rule::template check<value_t<detail::child_t<Op, Peer, X>>...>();
  return Node(std::in_place, detail::as_child<Op, Peer>(std::forward<X>(x))...);
}

// Base of every op definition, the catalog's and a user's (README, "Writing your own op"):
// the slots the JIT (device spellings) and autodiff (derivative rule) fill in for each op,
// empty until the op defines them, and the arithmetic promotion as the result-type rule.
// `device` is one body for every C-family dialect (GLSL, CUDA C++), used where the op
// gives no spelling of that dialect's own.
struct op_base {
  using rule = rules::arithmetic;
  static constexpr spelling device{};
  static constexpr spelling glsl{};
  static constexpr spelling cuda{};
  static constexpr spelling msl{};
  static constexpr std::nullptr_t derivative = nullptr;
  // Compute types for which simd() exists; the host evaluator falls back to host().
  template <class T>
  static constexpr bool simd_for = false;
};

// An op declares `using derivative = zero_gradient;` when it is piecewise constant or not
// a number (comparisons, rounding, sign, logical and bitwise ops): autodiff then treats its
// gradient as zero everywhere, the convention of JAX and PyTorch.
struct zero_gradient {};

} // namespace kiln
