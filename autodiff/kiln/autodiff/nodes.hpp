#pragma once
// The three node kinds autodiff adds to an adjoint tree. Each is an ordinary lazy kiln
// expression: `materialize` (found by ADL, like a reduction's) turns it into plain nodes
// and tensors before the host evaluator or the JIT sees it, so both evaluate adjoints
// unchanged.
//   adjoint_node sums the adjoints of the leaf occurrences of a tensor differentiated
//               with respect to ("wrt"): an occurrence with the same memory and layout
//               fuses; a view of it or a broadcast use is summed and scattered into the
//               wrt's shape (a pass of its own); another tensor contributes nothing.
//               Which holds is decided at run time, so every case materializes to the
//               same expression type.
//   expand_node a reduction's adjoint broadcast back over the axes it folded.
//   collapse_node its transpose (a sum over those axes), for second order.
#include "kiln/autodiff/constants.hpp"
#include "kiln/autodiff/pack.hpp"
#include "kiln/reduce.hpp"

#include <boost/hana/for_each.hpp>
#include <boost/hana/transform.hpp>
#include <boost/hana/zip_with.hpp>

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

namespace kiln::autodiff {

// A rank-0 zero tensor on `dev`, shared: nothing ever writes them. (On a device, one per
// switched-off leaf would each be a buffer binding of the kernel, and enough of them split
// it into stages.) A device's is kept only while something holds it, so no device memory
// outlives its backend.
template <element T>
tensor<T> scalar_zero(const kiln::device& dev) {
  if (dev.is_host()) {
    static const tensor<T> z = [] {
      const kiln::detail::recording_pause pause; // (made for the program, not a plan's step)
      tensor<T> t(kiln::shape{});
      t = T(0);
      kiln::detail::note_constant_storage(t.storage());
      return t;
    }();
    return z;
  }
  static std::mutex m;
  static std::map<std::string, std::pair<std::weak_ptr<kiln::storage>, kiln::layout>> held;
  const std::lock_guard<std::mutex> lock(m);
  auto& [weak, l] = held[dev.str()];
  if (auto st = weak.lock()) return tensor<T>(st, l);
  tensor<T> t(kiln::shape{}, dev);
  t = T(0);
  weak = t.storage();
  l = t.layout();
  return t;
}

// What materialize(e) would give for a switched-off term, without computing anything:
// the same type, every tensor (and every reduction or adjoint that would have become one)
// a rank-0 zero, so its shape is {} and it can sit in a sum of any shape. A route that is
// not its tensor costs no reduction and no pass.
template <element T>
tensor<T> materialize_off(const tensor<T>& t) {
  return scalar_zero<T>(t.device());
}
template <element T>
scalar_expr<T> materialize_off(const scalar_expr<T>& s) {
  return s;
}
template <class Op, class... C>
auto materialize_off(const expr_node<Op, C...>& n);
template <class R, class E>
auto materialize_off(const reduce_node<R, E>& n) {
  return scalar_zero<value_t<reduce_node<R, E>>>(detail::device_of(n));
}
template <class A, class B>
auto materialize_off(const matmul_node<A, B>& n) {
  return scalar_zero<value_t<matmul_node<A, B>>>(detail::device_of(n));
}
template <class A, class B>
auto materialize_off(const einsum_node<A, B>& n) {
  return scalar_zero<value_t<einsum_node<A, B>>>(detail::device_of(n));
}
template <class Op, class... C>
auto materialize_off(const expr_node<Op, C...>& n) {
  // Every leaf of a switched-off tree is rank 0, so is every node: no shape to work out.
  return n.apply([](const auto&... c) {
    return expr_node<Op, std::remove_cvref_t<decltype(materialize_off(c))>...>(
        known_shape, kiln::shape{}, materialize_off(c)...);
  });
}

// Evaluates e broadcast to shape s on device dev.
template <class E>
tensor<value_t<E>> evaluate_as(const E& e, const kiln::shape& s, const kiln::device& dev) {
  tensor<value_t<E>> t(s, dev);
  detail::assign(t, e);
  return t;
}

// Fresh zeroed storage with as many elements as t's storage, so that t's layout (and the
// layout of any view of the same storage) addresses it in the same places.
template <element T>
std::shared_ptr<kiln::storage> zeroed_like(const tensor<T>& t) {
  const std::int64_t n = t.storage()->count();
  tensor<T> z(kiln::shape{n}, t.device());
  if (n > 0) z = T(0);
  return z.storage();
}

inline kiln::axes axis_list(const std::vector<std::int64_t>& v) {
  kiln::axes a;
  a.everything = false;
  for (auto d : v)
    a.list.push_back(d);
  return a;
}

// Sums `full`-shaped values down to what a leaf with layout `l` holds: leading dims and
// dims the leaf broadcasts (extent 1, or stride 0 as in a broadcast_to view). The result
// has the leaf's shape with extent 1 on its stride-0 dims; `out` gets that layout.
template <element T>
tensor<T> unbroadcast(const tensor<T>& t, const layout& l, layout& out) {
  // New handles throughout: assigning to a tensor would write values into its storage.
  auto summed = [](const tensor<T>& a, const std::vector<std::int64_t>& ax, bool keep) {
    return ax.empty() ? a : tensor<T>(kiln::sum(a, axis_list(ax), keep));
  };
  std::vector<std::int64_t> lead;
  for (int d = 0; d < t.rank() - l.rank(); ++d)
    lead.push_back(d);
  const tensor<T> t1 = summed(t, lead, false);
  out = l;
  std::vector<std::int64_t> ax;
  for (int d = 0; d < l.rank(); ++d) {
    const bool broadcast_use = l.shape[d] == 1 && t1.shape()[d] > 1;
    const bool zero_stride = l.strides[d] == 0 && l.shape[d] > 1;
    if (broadcast_use || zero_stride) ax.push_back(d);
    if (zero_stride) out.shape[d] = 1;
  }
  return summed(t1, ax, true);
}

enum class route_kind { fused, scattered, none };
enum class direction { to_wrt, to_leaf };

// Decides how a leaf occurrence (with adjoints of shape `full`) relates to `wrt`.
template <element T>
route_kind classify(const tensor<T>& leaf, const kiln::shape& full, const tensor<T>& wrt,
                    bool alive) {
  if (!alive || leaf.empty() || leaf.storage() != wrt.storage()) return route_kind::none;
  if (leaf.layout() == wrt.layout() && full == wrt.shape()) return route_kind::fused;
  return route_kind::scattered;
}

// One leaf occurrence's adjoint g, on its way to (or, transposed, from) the wrt tensor.
template <class G, element T>
struct route {
  G g;
  tensor<T> leaf;
  kiln::shape full; // the shape of the adjoint flowing into the leaf occurrence
  route_kind kind;
};

// The adjoint of `wrt`: the sum of its routes (to_wrt), or the transpose of one route,
// carrying a wrt-shaped adjoint back to a leaf occurrence (to_leaf, for second order).
template <direction Dir, element T, class... G>
struct adjoint_node : expression_base<adjoint_node<Dir, T, G...>> {
  using value_type = rules::common_t<T, value_t<G>...>;
  hana::tuple<route<G, T>...> routes;
  tensor<T> wrt;
  adjoint_node(hana::tuple<route<G, T>...> r, tensor<T> w)
      : routes(std::move(r)), wrt(std::move(w)) {}
};

template <direction Dir, element T, class... G>
kiln::shape shape_of(const adjoint_node<Dir, T, G...>& n) {
  if constexpr (Dir == direction::to_wrt)
    return n.wrt.shape();
  else
    return hana::front(n.routes).leaf.shape();
}
template <direction Dir, element T, class... G, class F>
void visit_devices(const adjoint_node<Dir, T, G...>& n, F&& f) {
  hana::for_each(n.routes, [&](const auto& r) { visit_devices(r.g, f); });
}

// Terms Lo..Hi-1 added as a balanced tree, term(k) making the k-th where it is used (no
// tuple of them copied from): a left fold would nest every partial sum in the next one's
// type, and a gradient has a term per leaf occurrence of its type.
template <std::size_t Lo, std::size_t Hi, class F>
auto balanced_sum(const F& term) {
  if constexpr (Hi - Lo == 1)
    return term(hana::size_c<Lo>);
  else
    return balanced_sum<Lo, (Lo + Hi) / 2>(term) + balanced_sum<(Lo + Hi) / 2, Hi>(term);
}

// sum_k gate(on_k ? m_k : off_k, on_k) + gate(z, z_on), off_k being m_k with its leaves
// rank-0 zeros (materialize_off, computed once per route); z holds what the scattered routes
// add (z_on: there are some). Every case of every route has this one type, so the adjoint is
// lowered and compiled once (and its scattered parts below reuse that same kernel). A
// switched-off gate reads nothing: on the host it costs a mask test, and its rank-0 leaves
// do not make the pass strided.
template <class R, class Ms, std::size_t... K>
auto gated_sum(const Ms& ms, const Ms& offs, const std::array<bool, sizeof...(K)>& on,
               const tensor<R>& z, bool z_on, std::index_sequence<K...>) {
  constexpr std::size_t n = sizeof...(K);
  auto term = [&](auto k) {
    if constexpr (decltype(k)::value == n) {
      return expr_node<ops::gate, tensor<R>, scalar_expr<R>>(
          std::in_place, z_on ? z : materialize_off(z), scalar_expr<R>(z_on ? R(1) : R(0)));
    } else {
      const auto& m = on[k] ? slot<decltype(k)::value>(ms) : slot<decltype(k)::value>(offs);
      using M = std::remove_cvref_t<decltype(m)>;
      using V = value_t<M>;
      return expr_node<ops::gate, M, scalar_expr<V>>(std::in_place, m,
                                                     scalar_expr<V>(on[k] ? V(1) : V(0)));
    }
  };
  return balanced_sum<0, n + 1>(term);
}

template <direction Dir, element T, class... G>
auto materialize(const adjoint_node<Dir, T, G...>& n) {
  using R = value_t<adjoint_node<Dir, T, G...>>;
  constexpr std::size_t N = sizeof...(G);
  static_assert(Dir == direction::to_wrt || N == 1,
                "kiln: internal: a transposed adjoint carries one route");
  // Each route's off form and its materialized adjoint, each built in place (pack.hpp).
  const auto offs = hana::unpack(n.routes, [](const auto&... r) {
    return pack<std::remove_cvref_t<decltype(materialize(r.g))>...>{
        {std::remove_cvref_t<decltype(materialize(r.g))>(materialize_off(r.g))}...};
  });
  const auto ms = [&]<std::size_t... K>(std::index_sequence<K...>) {
    auto one = [&](auto k) {
      const auto& r = hana::at(n.routes, k);
      using M = std::remove_cvref_t<decltype(slot<decltype(k)::value>(offs))>;
      // (A route that is not its tensor is never switched on: its off form stands in.)
      if (r.kind == route_kind::none) return M(slot<decltype(k)::value>(offs));
      return M(detail::materialized_value(r.g));
    };
    return pack<decltype(one(hana::size_c<K>))...>{{one(hana::size_c<K>)}...};
  }
  (std::make_index_sequence<N>{});
  // What the loop below needs of each route, none of it typed by the route: the loop is
  // then one piece of code, not one per route.
  std::array<route_kind, N> kinds{};
  std::array<const kiln::shape*, N> fulls{};
  std::array<const layout*, N> leaf_layouts{};
  {
    std::size_t k = 0;
    hana::for_each(n.routes, [&](const auto& r) {
      kinds[k] = r.kind;
      fulls[k] = &r.full;
      leaf_layouts[k++] = &r.leaf.layout();
    });
  }
  const kiln::device dev = n.wrt.device();
  const tensor<R> zero = scalar_zero<R>(dev);
  std::shared_ptr<kiln::storage> st; // the scattered routes' sum, once there is one
  // The layout z reads st through. Not a tensor handle assigned later: assigning a tensor
  // writes values, and z starting as a copy of the shared zero would write into it (a
  // rank-0 wrt did, and every later unused gradient read the last adjoint).
  layout zl;
  std::array<bool, N> on{};
  for (std::size_t k = 0; k < N; ++k) {
    on[k] = kinds[k] == route_kind::fused;
    if (kinds[k] != route_kind::scattered) continue;
    std::array<bool, N> only{};
    only[k] = true;
    const auto e = gated_sum<R>(ms, offs, only, zero, false, std::make_index_sequence<N>{});
    if (!st) st = zeroed_like(n.wrt);
    if constexpr (Dir == direction::to_wrt) {
      // Sum the broadcast dims, then add through the leaf's layout into storage that the
      // wrt's layout reads back: the adjoint lands on the elements the leaf saw (and
      // several scattered routes add up there).
      layout l;
      const tensor<R> u = unbroadcast(evaluate_as(e, *fulls[k], dev), *leaf_layouts[k], l);
      const tensor<R> into(st, l);
      detail::assign(into, into + u);
      zl = n.wrt.layout();
    } else {
      // The transpose: the wrt-shaped adjoint written into the wrt's elements, read back
      // through the leaf's layout (and broadcast by the evaluator to `full`).
      detail::assign(tensor<R>(st, n.wrt.layout()), e);
      zl = *leaf_layouts[k];
    }
  }
  const tensor<R> z = st ? tensor<R>(st, zl) : zero;
  return gated_sum<R>(ms, offs, on, z, bool(st), std::make_index_sequence<N>{});
}

// A reduction's adjoint g viewed with the folded axes back as extent 1. g has shape
// `full`: the reduction's result (shape `out`) may itself be used broadcast, and is then
// summed down to `out` first.
template <class G>
struct expand_node : expression_base<expand_node<G>> {
  using value_type = value_t<G>;
  G g;
  kiln::axes over;
  bool keepdims;
  kiln::shape in, out, full;
  expand_node(G g_, kiln::axes a, bool k, kiln::shape in_, kiln::shape out_, kiln::shape full_)
      : g(std::move(g_)), over(std::move(a)), keepdims(k), in(std::move(in_)), out(std::move(out_)),
        full(std::move(full_)) {}
};
template <class G>
kiln::shape shape_of(const expand_node<G>& n) {
  return n.in;
}
template <class G, class F>
void visit_devices(const expand_node<G>& n, F&& f) {
  visit_devices(n.g, f);
}

template <class G>
tensor<value_t<G>> materialize(const expand_node<G>& n) {
  using V = value_t<G>;
  layout unused;
  const tensor<V> t = unbroadcast(evaluate_as(n.g, n.full, detail::device_of(n.g)),
                                  layout::contiguous(n.out), unused);
  if (n.keepdims) return t;
  layout l = t.layout();
  // The reduction's own mask (its axes were checked when the reduction was built).
  const auto m = detail::reduction_mask(n.over, n.in.size(), "grad");
  for (int d = 0; d < n.in.size(); ++d)
    if (m[d]) l = views::unsqueeze(l, d);
  return tensor<value_t<G>>(t.storage(), l);
}

// The transpose of expand_node: g (broadcast to `in`) summed over the folded axes.
template <class G>
struct collapse_node : expression_base<collapse_node<G>> {
  using value_type = value_t<G>;
  G g;
  kiln::axes over;
  bool keepdims;
  kiln::shape in, out;
  collapse_node(G g_, kiln::axes a, bool k, kiln::shape in_, kiln::shape out_)
      : g(std::move(g_)), over(std::move(a)), keepdims(k), in(std::move(in_)),
        out(std::move(out_)) {}
};
template <class G>
kiln::shape shape_of(const collapse_node<G>& n) {
  return n.out;
}
template <class G, class F>
void visit_devices(const collapse_node<G>& n, F&& f) {
  visit_devices(n.g, f);
}
template <class G>
auto materialize(const collapse_node<G>& n) {
  const auto t = evaluate_as(n.g, n.in, detail::device_of(n.g));
  return materialize(kiln::sum(t, n.over, n.keepdims));
}

template <class G>
tensor<value_t<G>> materialize_off(const expand_node<G>& n) {
  return scalar_zero<value_t<G>>(detail::device_of(n.g));
}
template <class G>
auto materialize_off(const collapse_node<G>& n) {
  return scalar_zero<value_t<collapse_node<G>>>(detail::device_of(n.g));
}
template <direction Dir, element T, class... G>
auto materialize_off(const adjoint_node<Dir, T, G...>& n) {
  using R = value_t<adjoint_node<Dir, T, G...>>;
  constexpr std::size_t N = sizeof...(G);
  const auto ms = hana::unpack(n.routes, [](const auto&... r) {
    return pack<decltype(materialize_off(r.g))...>{{materialize_off(r.g)}...};
  });
  return gated_sum<R>(ms, ms, std::array<bool, N>{}, scalar_zero<R>(n.wrt.device()), false,
                      std::make_index_sequence<N>{});
}

} // namespace kiln::autodiff

namespace kiln {
template <autodiff::direction Dir, element T, class... G>
struct is_expression_type<autodiff::adjoint_node<Dir, T, G...>> : std::true_type {};
template <class G>
struct is_expression_type<autodiff::expand_node<G>> : std::true_type {};
template <class G>
struct is_expression_type<autodiff::collapse_node<G>> : std::true_type {};
} // namespace kiln
