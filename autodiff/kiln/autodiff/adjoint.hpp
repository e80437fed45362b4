#pragma once
// The reverse transform. backprop(e, g, full) walks an expression type once and returns,
// for every tensor-leaf occurrence below e, a record: the adjoint expression reaching it
// (g pushed through each op's derivative rule), the leaf handle, and the shape that
// adjoint has (`full`: the shape of the nearest enclosing reduction input or of the root,
// since adjoints are summed back to a leaf's shape only at the leaf). Zero adjoints make
// no record; scalars are constants.
#include "kiln/autodiff/custom_vjp.hpp"
#include "kiln/autodiff/nodes.hpp"
#include "kiln/autodiff/pack.hpp"

#include <boost/hana/concat.hpp>
#include <boost/hana/drop_front.hpp>
#include <boost/hana/filter.hpp>
#include <boost/hana/fold_left.hpp>
#include <boost/hana/front.hpp>
#include <boost/hana/length.hpp>
#include <boost/hana/range.hpp>

namespace kiln::autodiff {

template <class G, element T>
struct record {
  G g;
  tensor<T> leaf;
  kiln::shape full;
  bool alive = true; // false: the adjoint is switched off (a route seen as `none`)
};

template <class E>
inline constexpr bool has_tensor = false;
template <element T>
inline constexpr bool has_tensor<tensor<T>> = true;
template <class Op, class... C>
inline constexpr bool has_tensor<expr_node<Op, C...>> = (has_tensor<C> || ...);
template <class R, class E>
inline constexpr bool has_tensor<reduce_node<R, E>> = has_tensor<E>;
template <direction Dir, element T, class... G>
inline constexpr bool has_tensor<adjoint_node<Dir, T, G...>> = (has_tensor<G> || ...);
template <class G>
inline constexpr bool has_tensor<expand_node<G>> = has_tensor<G>;
template <class G>
inline constexpr bool has_tensor<collapse_node<G>> = has_tensor<G>;
template <class Rule, class Fwd, class... A>
inline constexpr bool has_tensor<custom_vjp_node<Rule, Fwd, A...>> = (has_tensor<A> || ...);
template <class G>
inline constexpr bool has_tensor<sum_to_node<G>> = has_tensor<G>;
template <class A, class B>
inline constexpr bool has_tensor<matmul_node<A, B>> = has_tensor<A> || has_tensor<B>;
template <class A, class B>
inline constexpr bool has_tensor<einsum_node<A, B>> = has_tensor<A> || has_tensor<B>;

// A subtree's records: one record (a leaf), or a pack (pack.hpp) of its operands' records,
// so that each record is built where its leaf makes it and never moved.
template <class... T>
using records = pack<T...>;
using no_records = records<>;

template <class R>
inline constexpr std::size_t record_count = 1;
template <std::size_t... I, class... T>
inline constexpr std::size_t record_count<pack_of<std::index_sequence<I...>, T...>> =
    (std::size_t(0) + ... + record_count<T>);

// Which slot of a pack whose slots hold n[j] records holds record k, and how many records
// the slots before it hold.
template <std::size_t N>
constexpr std::pair<std::size_t, std::size_t> slot_of(const std::array<std::size_t, N>& n,
                                                      std::size_t k) {
  std::size_t j = 0, before = 0;
  while (before + n[j] <= k)
    before += n[j++];
  return {j, before};
}
// The K-th record (in leaf order) of a subtree's records.
template <std::size_t K, class R>
const R& record_at(const R& r) {
  static_assert(K == 0, "kiln: internal: a leaf's records are one record");
  return r;
}
template <std::size_t K, std::size_t... I, class... T>
const auto& record_at(const pack_of<std::index_sequence<I...>, T...>& p) {
  constexpr auto where = slot_of(std::array<std::size_t, sizeof...(T)>{record_count<T>...}, K);
  return record_at<K - where.second>(slot<where.first>(p));
}

template <class Op>
inline constexpr bool has_rule = requires {
  typename Op::derivative;
};

template <class Op>
constexpr void check_rule() {
  static_assert(has_rule<Op>, "kiln: this op has no derivative rule (give its definition a "
                              "`derivative`, or `using derivative = zero_gradient;`)");
}

template <element T, class G>
auto backprop(const tensor<T>& t, const G& g, const kiln::shape& full, bool alive) {
  using A = decltype(toolkit::expr(g));
  return record<A, T>{toolkit::expr(g), t, full, alive};
}

// Every overload, declared first: they call one another, and the kiln node kinds are not
// in this namespace, so argument-dependent lookup would not find them.
template <element T, class G>
auto backprop(const tensor<T>& t, const G& g, const kiln::shape& full, bool alive);
template <element T, class G>
auto backprop(const scalar_expr<T>&, const G&, const kiln::shape&, bool);
template <class Op, class... C, class G>
auto backprop(const expr_node<Op, C...>& n, const G& g, const kiln::shape& full, bool alive);
template <class R, class E, class G>
auto backprop(const reduce_node<R, E>& n, const G& g, const kiln::shape&, bool alive);
template <class G2, class G>
auto backprop(const expand_node<G2>& n, const G& g, const kiln::shape&, bool alive);
template <class G2, class G>
auto backprop(const collapse_node<G2>& n, const G& g, const kiln::shape&, bool alive);
template <direction Dir, element T, class... G2, class G>
auto backprop(const adjoint_node<Dir, T, G2...>& n, const G& g, const kiln::shape&, bool alive);
template <class Rule, class Fwd, class... A, class G>
auto backprop(const custom_vjp_node<Rule, Fwd, A...>& n, const G& g, const kiln::shape& full,
              bool alive);
template <class G2, class G>
auto backprop(const sum_to_node<G2>& n, const G& g, const kiln::shape&, bool alive);
template <class A, class B, class G>
auto backprop(const matmul_node<A, B>& n, const G& g, const kiln::shape& full, bool alive);
template <class A, class B, class G>
auto backprop(const einsum_node<A, B>& n, const G& g, const kiln::shape& full, bool alive);

template <class N, class Adj, class G, std::size_t... I>
auto children_backprop(const N& n, const Adj& adj, const G&, const kiln::shape& full, bool alive,
                       std::index_sequence<I...>);

template <class Op, class... C, class G>
auto backprop(const expr_node<Op, C...>& n, const G& g, const kiln::shape& full, bool alive) {
  check_rule<Op>();
  if constexpr (!has_tensor<expr_node<Op, C...>> ||
                std::is_same_v<typename Op::derivative, zero_gradient>) {
    return no_records{};
  } else {
    const auto adj =
        n.apply([&](const auto&... c) { return Op::derivative::template vjp<toolkit>(g, c...); });
    static_assert(decltype(hana::length(adj))::value == sizeof...(C),
                  "kiln: a derivative rule must give one adjoint per operand");
    return children_backprop(n, adj, g, full, alive, std::index_sequence_for<C...>{});
  }
}

// The adjoint of a reduction's input, given the adjoint g (of shape `full`) of its
// result. At the root (Root: f itself is the reduction) g is one of the result's shape.
template <bool Root, class R, class E, class G>
auto reduction_adjoint(const reduce_node<R, E>& n, const G& g, const kiln::shape& full) {
  using V = value_t<E>;
  const kiln::shape in = shape_of(n.expr);
  // one at the root broadcasts as it is. Elsewhere ones of shape `full` summed to the
  // result's shape are a constant: the number of broadcast copies. Anything else is
  // summed down and viewed with the folded axes back.
  auto expanded = [&] {
    if constexpr (is_one<G> && Root) {
      return one_t<V>{};
    } else if constexpr (is_one<G>) {
      const kiln::shape out = n.result_shape();
      const std::int64_t copies = numel(out) == 0 ? 0 : numel(full) / numel(out);
      return scalar_expr<V>(static_cast<V>(copies));
    } else {
      return expand_node<G>(g, n.over, n.keepdims, in, n.result_shape(), full);
    }
  };
  // The reduction's own rule (reductions/*.hpp), given g broadcast back.
  if constexpr (std::is_same_v<typename R::derivative, zero_gradient>)
    return toolkit::zero; // piecewise constant, or not a number
  else
    return R::derivative::template vjp<toolkit>(expanded(), n);
}

template <class R, class E, class G>
auto backprop(const reduce_node<R, E>& n, const G& g, const kiln::shape& full, bool alive) {
  if constexpr (!has_tensor<E>) {
    return no_records{};
  } else {
    const auto a = reduction_adjoint<false>(n, g, full);
    if constexpr (is_zero<decltype(a)>)
      return no_records{};
    else
      return backprop(n.expr, a, shape_of(n.expr), alive);
  }
}

// expand (sum `full` down to `out`, view over `in`) and collapse (sum `in` down to `out`)
// are each other's transpose.
template <class G2, class G>
auto backprop(const expand_node<G2>& n, const G& g, const kiln::shape&, bool alive) {
  return backprop(n.g, collapse_node(toolkit::expr(g), n.over, n.keepdims, n.in, n.out), n.full,
                  alive);
}
template <class G2, class G>
auto backprop(const collapse_node<G2>& n, const G& g, const kiln::shape& full, bool alive) {
  return backprop(n.g, expand_node(toolkit::expr(g), n.over, n.keepdims, n.in, n.out, full), n.in,
                  alive);
}

// Through an adjoint (second order): each route's transpose carries g back to its leaf.
template <direction Dir, element T, class... G2, class G>
auto backprop(const adjoint_node<Dir, T, G2...>& n, const G& g, const kiln::shape&, bool alive) {
  constexpr direction back = Dir == direction::to_wrt ? direction::to_leaf : direction::to_wrt;
  using A = decltype(toolkit::expr(g));
  return hana::unpack(n.routes, [&](const auto&... rs) {
    auto one = [&](const auto& r) {
      const adjoint_node<back, T, A> t(
          hana::make_tuple(route<A, T>{toolkit::expr(g), r.leaf, r.full, r.kind}), n.wrt);
      const kiln::shape inner = Dir == direction::to_wrt ? r.full : n.wrt.shape();
      return backprop(r.g, t, inner, alive && r.kind != route_kind::none);
    };
    return records<decltype(one(rs))...>{{one(rs)}...};
  });
}
// Through a composite with its own rule: the rule's adjoint of each argument, of its own
// shape (an argument may differ in shape from the composite: a norm's vector), or `full`
// where it is g itself, type-level one.
template <class Rule, class Fwd, class... A, class G>
auto backprop(const custom_vjp_node<Rule, Fwd, A...>& n, const G& g, const kiln::shape& full,
              bool alive) {
  if constexpr (!has_tensor<custom_vjp_node<Rule, Fwd, A...>>) {
    return no_records{};
  } else {
    // g summed down to the composite's own shape (it may be used broadcast); a type-level
    // one becomes the number of broadcast copies.
    using V = value_t<custom_vjp_node<Rule, Fwd, A...>>;
    const kiln::shape own = shape_of(n);
    const auto g_own = [&] {
      if constexpr (is_one<G>)
        return scalar_expr<V>(static_cast<V>(numel(own) == 0 ? 0 : numel(full) / numel(own)));
      else
        return sum_to_node<std::remove_cvref_t<decltype(toolkit::expr(g))>>(toolkit::expr(g), full,
                                                                            own);
    }();
    const auto adj = hana::unpack(
        n.args, [&](const auto&... a) { return n.rule.template vjp<toolkit>(g_own, n, a...); });
    static_assert(decltype(hana::length(adj))::value == sizeof...(A),
                  "kiln: a custom_vjp rule must give one adjoint per argument");
    auto one = [&](auto i) {
      const auto& arg = hana::at(n.args, i);
      const auto& a = hana::at(adj, i);
      using Arg = std::remove_cvref_t<decltype(arg)>;
      using Adj = std::remove_cvref_t<decltype(a)>;
      if constexpr (is_zero<Adj> || !has_tensor<Arg>) {
        return no_records{};
      } else {
        kiln::shape s = shape_of(toolkit::expr(a));
        const kiln::shape own = shape_of(arg);
        if (!broadcast_into(s, own))
          throw error("custom_vjp", "the rule's adjoint does not broadcast to its argument's shape",
                      "argument " + std::to_string(decltype(i)::value) + ": adjoint shape " +
                          shape_of(toolkit::expr(a)).str() + ", argument shape " + own.str());
        return backprop(arg, a, s, alive);
      }
    };
    return hana::unpack(hana::make_range(hana::size_c<0>, hana::size_c<sizeof...(A)>),
                        [&](auto... i) { return records<decltype(one(i))...>{{one(i)}...}; });
  }
}

// The transpose of summing down to `own` is broadcasting back to `full`.
template <class G2, class G>
auto backprop(const sum_to_node<G2>& n, const G& g, const kiln::shape&, bool alive) {
  return backprop(n.g, g, n.full, alive);
}

// The adjoint of a contraction node n of its own shape, from the adjoint g of shape `full`
// (n used broadcast): summed down, or where g is one, the number of copies.
template <class N, class G>
auto node_cotangent(const N& n, const G& g, const kiln::shape& full) {
  using V = value_t<N>;
  const kiln::shape& own = shape_of(n);
  if constexpr (is_one<G>) {
    tensor<V> t(kiln::shape{}, detail::device_of(n));
    t = static_cast<V>(numel(own) == 0 ? 0 : numel(full) / numel(own));
    return t.broadcast_to(own);
  } else {
    return sum_to_node<std::remove_cvref_t<decltype(toolkit::expr(g))>>(toolkit::expr(g), full,
                                                                        own);
  }
}

// The records below a contraction's operand, given its adjoint `adj` (which has the
// contraction's batch dims: where the operand broadcast one, its leaves sum it down).
template <class Op, class Adj>
auto operand_backprop(const Op& operand, const Adj& adj, bool alive) {
  if constexpr (!has_tensor<Op>) {
    return no_records{};
  } else {
    kiln::shape s = shape_of(adj);
    broadcast_into(s, shape_of(operand)); // the operand's dims are the adjoint's or broadcast
    return backprop(operand, adj, s, alive);
  }
}

// Through a product C = opA(A) opB(B): the adjoints are products again, dA = g opB(B)^T
// (computed as opB(B) g^T where A is read transposed, so that it has A's own layout) and
// dB = opA(A)^T g, g being the adjoint of C's own shape (summed down where C is used
// broadcast). Each has the batch dims of C; where an operand broadcasts a batch dim, its
// leaf sums the adjoint down like any broadcast use. g is an operand of the backward
// products, read while they pack it, never stored.
template <class A, class B, class G>
auto backprop(const matmul_node<A, B>& n, const G& g, const kiln::shape& full, bool alive) {
  if constexpr (!has_tensor<matmul_node<A, B>>) {
    return no_records{};
  } else {
    const auto go = node_cotangent(n, g, full);
    using Go = std::remove_cvref_t<decltype(go)>;
    const contraction& c = n.c;
    // g read as C (transposed back where C is stored transposed).
    matrix_form fg = has_rows(c.fa) ? (has_cols(c.fb) ? matrix_form::full : matrix_form::column)
                                    : (has_cols(c.fb) ? matrix_form::row : matrix_form::scalar);
    if (c.out_t) fg = transposed(fg);
    auto da = [&] {
      return operand_backprop(n.a,
                              matmul_node<Go, B>(go, n.b, fg, transposed(c.fb), "matmul (adjoint)",
                                                 c.fa == matrix_form::transposed),
                              alive);
    };
    auto db = [&] {
      return operand_backprop(n.b,
                              matmul_node<A, Go>(n.a, go, transposed(c.fa), fg, "matmul (adjoint)",
                                                 c.fb == matrix_form::transposed),
                              alive);
    };
    return records<decltype(da()), decltype(db())>{{da()}, {db()}};
  }
}

// Through an einsum: each operand's adjoint is an einsum of the output's adjoint with the
// other operand, back onto that operand's labels (a diagonal written back on its diagonal,
// a label it summed away broadcast back).
template <class A, class B, class G>
auto backprop(const einsum_node<A, B>& n, const G& g, const kiln::shape& full, bool alive) {
  if constexpr (!has_tensor<einsum_node<A, B>>) {
    return no_records{};
  } else {
    const auto go = node_cotangent(n, g, full);
    using Go = std::remove_cvref_t<decltype(go)>;
    auto da = [&] {
      return operand_backprop(n.a, einsum_node<Go, B>(go, n.b, adjoint_plan(n.p, 0)), alive);
    };
    if constexpr (std::is_same_v<B, einsum_unit>) {
      return da();
    } else {
      auto db = [&] {
        return operand_backprop(n.b, einsum_node<A, Go>(n.a, go, adjoint_plan(n.p, 1)), alive);
      };
      return records<decltype(da()), decltype(db())>{{da()}, {db()}};
    }
  }
}

template <element T, class G>
auto backprop(const scalar_expr<T>&, const G&, const kiln::shape&, bool) {
  return no_records{};
}

// Each operand's records, concatenated (operands whose adjoint is zero, or that hold no
// tensor, add none).
template <class N, class Adj, class G, std::size_t... I>
auto children_backprop(const N& n, const Adj& adj, const G&, const kiln::shape& full, bool alive,
                       std::index_sequence<I...>) {
  auto one = [&](auto i) {
    const auto& child = n.template child<decltype(i)::value>();
    const auto& a = hana::at(adj, i);
    using Child = std::remove_cvref_t<decltype(child)>;
    if constexpr (is_zero<decltype(a)> || !has_tensor<Child>)
      return no_records{};
    else
      return backprop(child, a, full, alive);
  };
  return records<decltype(one(hana::size_c<I>))...>{{one(hana::size_c<I>)}...};
}

// Which records have a leaf of type tensor<T>, by position: the routes are built from the
// records straight (a filtered copy of them first cost a copy of every adjoint tree).
template <element T, class Records>
struct leaves_of {
  static constexpr std::size_t size = record_count<Records>;
  template <std::size_t I>
  static constexpr bool is_mine = std::is_same_v<
      decltype(std::remove_cvref_t<decltype(record_at<I>(std::declval<const Records&>()))>::leaf),
      tensor<T>>;
  static constexpr auto count = [] {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return (std::size_t(0) + ... + std::size_t(is_mine<I>));
    }
    (std::make_index_sequence<size>{});
  }();
  static constexpr auto index = [] {
    std::array<std::size_t, count> r{};
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      std::size_t k = 0;
      ((is_mine<I> ? void(r[k++] = I) : void()), ...);
    }
    (std::make_index_sequence<size>{});
    return r;
  }();
};

// The adjoint of `wrt` from the records: the sum of a route per occurrence of its type,
// or zeros of its shape when none can be it.
template <element T, class Records>
auto collect(const Records& recs, const tensor<T>& wrt) {
  using mine = leaves_of<T, Records>;
  if constexpr (mine::count == 0) {
    return scalar_zero<T>(wrt.device()).broadcast_to(wrt.shape());
  } else {
    auto route_of = [&](const auto& r) {
      return route<std::remove_cvref_t<decltype(r.g)>, T>{r.g, r.leaf, r.full,
                                                          classify(r.leaf, r.full, wrt, r.alive)};
    };
    return [&]<std::size_t... J>(std::index_sequence<J...>) {
      return adjoint_node<direction::to_wrt, T,
                          std::remove_cvref_t<decltype(record_at<mine::index[J]>(recs).g)>...>(
          hana::make_tuple(route_of(record_at<mine::index[J]>(recs))...), wrt);
    }
    (std::make_index_sequence<mine::count>{});
  }
}

} // namespace kiln::autodiff
