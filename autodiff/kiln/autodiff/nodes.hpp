#pragma once
// The three node kinds autodiff adds to an adjoint tree. Each is an ordinary lazy kiln
// expression: `materialize` (found by ADL, like a reduction's) turns it into plain nodes
// and tensors before the host evaluator or the JIT sees it, so both evaluate adjoints
// unchanged.
//   route_node  moves an adjoint between a leaf occurrence and a tensor differentiated
//               with respect to ("wrt"): the same memory and layout fuse; a view of it or
//               a broadcast use is summed and scattered into the wrt's shape (a pass of
//               its own); another tensor contributes nothing. Which one holds is decided
//               at run time, so every case materializes to the same expression type.
//   expand_node a reduction's adjoint broadcast back over the axes it folded.
//   collapse_node its transpose (a sum over those axes), for second order.
#include "kiln/autodiff/constants.hpp"
#include "kiln/reduce.hpp"

#include <map>
#include <mutex>

namespace kiln::autodiff {

// A rank-0 zero tensor on `dev` (host ones are shared: nothing ever writes them).
template <element T>
tensor<T> scalar_zero(const kiln::device& dev) {
  if (dev.is_host()) {
    static const tensor<T> z = [] {
      tensor<T> t(kiln::shape{});
      t = T(0);
      return t;
    }();
    return z;
  }
  tensor<T> t(kiln::shape{}, dev);
  t = T(0);
  return t;
}

// The same expression with every tensor leaf replaced by a rank-0 zero: its type is
// unchanged and its shape is {}, so a switched-off term can sit in a sum of any shape.
template <element T>
tensor<T> rebind_scalar(const tensor<T>& t) {
  return scalar_zero<T>(t.device());
}
template <element T>
scalar_expr<T> rebind_scalar(const scalar_expr<T>& s) {
  return s;
}
template <class Op, class... C>
auto rebind_scalar(const expr_node<Op, C...>& n) {
  return hana::unpack(n.children, [](const auto&... c) {
    return expr_node<Op, std::remove_cvref_t<decltype(rebind_scalar(c))>...>(rebind_scalar(c)...);
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
tensor<T> unbroadcast(tensor<T> t, const layout& l, layout& out) {
  const int lead = t.rank() - l.rank();
  if (lead > 0) {
    std::vector<std::int64_t> ax;
    for (int d = 0; d < lead; ++d)
      ax.push_back(d);
    t = tensor<T>(kiln::sum(t, axis_list(ax), false));
  }
  out = l;
  std::vector<std::int64_t> ax;
  for (int d = 0; d < l.rank(); ++d) {
    const bool broadcast_use = l.shape[d] == 1 && t.shape()[d] > 1;
    const bool zero_stride = l.strides[d] == 0 && l.shape[d] > 1;
    if (broadcast_use || zero_stride) ax.push_back(d);
    if (zero_stride) out.shape[d] = 1;
  }
  if (!ax.empty()) t = tensor<T>(kiln::sum(t, axis_list(ax), true));
  return t;
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

template <class G, element T, direction Dir>
struct route_node : expression_base<route_node<G, T, Dir>> {
  using value_type = promote_t<value_t<G>, T>;
  G g;
  tensor<T> leaf, wrt;
  kiln::shape full; // the shape of the adjoint flowing into the leaf occurrence
  route_kind kind;
  route_node(G g_, tensor<T> leaf_, tensor<T> wrt_, kiln::shape full_, route_kind k)
      : g(std::move(g_)), leaf(std::move(leaf_)), wrt(std::move(wrt_)), full(std::move(full_)),
        kind(k) {}
};

template <class G, element T, direction Dir>
kiln::shape shape_of(const route_node<G, T, Dir>& n) {
  return Dir == direction::to_wrt ? n.wrt.shape() : n.leaf.shape();
}
template <class G, element T, direction Dir, class F>
void visit_devices(const route_node<G, T, Dir>& n, F&& f) {
  visit_devices(n.g, f);
}

template <class G, element T, direction Dir>
auto materialize(const route_node<G, T, Dir>& n) {
  using V = value_t<G>;
  const auto m = detail::evaluate_leaf_copy(materialize(n.g));
  const kiln::device dev = n.wrt.device();
  using M = std::remove_cvref_t<decltype(m)>;
  using gated = expr_node<ops::gate, M, scalar_expr<V>>;
  using R = promote_t<V, T>;
  auto result = [](gated a, tensor<R> b) { return expr_node<ops::add, gated, tensor<R>>(a, b); };
  if (n.kind == route_kind::fused)
    return result(gated(m, scalar_expr<V>(V(1))), scalar_zero<R>(dev));
  const gated off(rebind_scalar(m), scalar_expr<V>(V(0)));
  if (n.kind == route_kind::none) return result(off, scalar_zero<R>(dev));
  if constexpr (Dir == direction::to_wrt) {
    // Sum the broadcast dims, then write through the leaf's layout into fresh storage
    // that the wrt's layout reads back: the adjoint lands on the elements the view saw.
    layout l;
    const tensor<R> u = unbroadcast(evaluate_as(cast<R>(m), n.full, dev), n.leaf.layout(), l);
    const auto st = zeroed_like(n.wrt);
    tensor<R>(st, l) = u;
    return result(off, tensor<R>(st, n.wrt.layout()));
  } else {
    // The transpose: write the wrt-shaped adjoint into the wrt's elements and read it back
    // through the leaf's layout (broadcast by the evaluator to `full`).
    const auto st = zeroed_like(n.wrt);
    tensor<R>(st, n.wrt.layout()) = cast<R>(m);
    return result(off, tensor<R>(st, n.leaf.layout()));
  }
}

// A reduction's adjoint g (shape `out`) viewed with the folded axes back as extent 1.
template <class G>
struct expand_node : expression_base<expand_node<G>> {
  using value_type = value_t<G>;
  G g;
  kiln::axes over;
  bool keepdims;
  kiln::shape in, out;
  expand_node(G g_, kiln::axes a, bool k, kiln::shape in_, kiln::shape out_)
      : g(std::move(g_)), over(std::move(a)), keepdims(k), in(std::move(in_)),
        out(std::move(out_)) {}
};
template <class G>
kiln::shape shape_of(const expand_node<G>& n) {
  return n.in;
}
template <class G, class F>
void visit_devices(const expand_node<G>& n, F&& f) {
  visit_devices(n.g, f);
}

// Which dims of shape `in` a reduction over `over` folds.
inline std::array<bool, max_rank> folded(const kiln::axes& over, int rank, const char* op) {
  std::array<bool, max_rank> m{};
  if (over.everything) m.fill(true);
  for (auto a : over.list)
    m[normalize_axis(a, rank, op)] = true;
  return m;
}

template <class G>
tensor<value_t<G>> materialize(const expand_node<G>& n) {
  tensor<value_t<G>> t = evaluate_as(n.g, n.out, detail::device_of(n.g));
  if (!n.keepdims) {
    const auto m = folded(n.over, n.in.size(), "grad");
    for (int d = 0; d < n.in.size(); ++d)
      if (m[d]) t = t.unsqueeze(d);
  }
  return t;
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

} // namespace kiln::autodiff

namespace kiln {
template <class G, element T, autodiff::direction Dir>
struct is_expression_type<autodiff::route_node<G, T, Dir>> : std::true_type {};
template <class G>
struct is_expression_type<autodiff::expand_node<G>> : std::true_type {};
template <class G>
struct is_expression_type<autodiff::collapse_node<G>> : std::true_type {};
} // namespace kiln
