#pragma once
// kiln::einsum and kiln::tensordot as lazy nodes. When one runs (materialize, like a
// reduction), its plan (einsum_plan.hpp) is lowered over views of the operands: a label an
// operand repeats is read on its diagonal, a label only one operand has is summed away first
// (the fused reduction), the batch, free and contracted labels are arranged into a batched
// matrix product (matmul's kernels: host or device), merged without a copy where the strides
// allow and copied once where they do not; where nothing is contracted it is one elementwise
// pass over broadcast views. The result is written in the output's order (through a view
// where that is the product's own order, else copied once). Operand expressions are evaluated
// first, in the result's accumulator type (f32, f64 or i64, as matmul's sums: a copy of an
// operand of another type). Where the product is the output (its dims in the product's
// order), the einsum is one of its statement's products (epilogue.hpp): its consumer is the
// product's epilogue, as a matmul's is, and an operand expression that is the product's
// matrix as it is (einsum_reads_in_order) is read by the kernel, not evaluated first.
#include "kiln/contractions/einsum_plan.hpp"
#include "kiln/contractions/matmul.hpp"
#include "kiln/creation.hpp"
#include "kiln/reduce.hpp"

#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace kiln {

// The second operand of a one-operand einsum: none.
struct einsum_unit {};

template <class A, class B>
struct einsum_node : expression_base<einsum_node<A, B>> {
  using value_type = std::conditional_t<
      std::is_same_v<B, einsum_unit>, value_t<A>,
      promote_t<value_t<A>, value_t<std::conditional_t<std::is_same_v<B, einsum_unit>, A, B>>>>;
  static_assert(!std::is_same_v<value_type, bool>,
                "kiln: einsum of bool tensors is not defined; cast them to an integer type");
  A a;
  B b;
  einsum_plan p; // labels, extents and the result's shape, checked when the node is built
  einsum_node(A a_, B b_, einsum_plan p_) : a(std::move(a_)), b(std::move(b_)), p(std::move(p_)) {}
  einsum_node(const einsum_node&) = default;
  einsum_node(einsum_node&&) = default;
  einsum_node& operator=(const einsum_node&) = default;
  einsum_node& operator=(einsum_node&&) = default;
  KILN_STATEMENT ~einsum_node() {}
};
template <class A, class B>
struct is_expression_type<einsum_node<A, B>> : std::true_type {};

template <class A, class B>
const kiln::shape& shape_of(const einsum_node<A, B>& n) {
  return n.p.out_shape;
}
template <class A, class B, class F>
void visit_devices(const einsum_node<A, B>& n, F&& f) {
  visit_devices(n.a, f);
  if constexpr (!std::is_same_v<B, einsum_unit>) visit_devices(n.b, f);
}

namespace detail {

// Operand i (viewed as v, its labels distinct) with the labels that neither the other
// operand nor the output has summed away; v then describes the result.
template <class T>
tensor<T> fold_away(const einsum_plan& p, int i, const tensor<T>& t, label_view& v) {
  kiln::axes over;
  over.everything = false;
  einsum_labels kept;
  for (std::size_t d = 0; d < v.labels.size(); ++d) {
    const std::int8_t x = v.labels[d];
    if (!p.in_output(x) && !p.in_operand(1 - i, x))
      over.list.push_back(std::int64_t(d));
    else
      kept.push_back(x);
  }
  const tensor<T> view(t.storage(), v.l);
  if (over.list.empty()) return view;
  const tensor<T> r = evaluate(kiln::cast<T>(kiln::sum(view, over)));
  v.labels = std::move(kept);
  v.l = r.layout();
  return r;
}

inline einsum_labels joined(std::initializer_list<const einsum_labels*> parts) {
  einsum_labels r;
  for (const einsum_labels* p : parts)
    r.insert(r.end(), p->begin(), p->end());
  return r;
}

// Operand t over `batch` then its matrix's `rows` and `cols` label groups, each group one dim
// (absent where empty): a view where the strides allow, a contiguous copy where not.
template <class T>
tensor<T> as_matrix(const einsum_plan& p, const tensor<T>& t, const label_view& v,
                    const einsum_roles& r, const einsum_labels& rows, const einsum_labels& cols) {
  const layout l = arranged(p, v, joined({&r.batch, &rows, &cols}));
  kiln::shape target;
  for (const std::int8_t x : r.batch)
    target.push_back(p.extent[x]);
  for (const einsum_labels* g : {&rows, &cols}) {
    if (g->empty()) continue;
    std::int64_t e = 1;
    for (const std::int8_t x : *g)
      e *= p.extent[x];
    target.push_back(e);
  }
  if (auto m = views::try_reshape(l, target)) return tensor<T>(t.storage(), *m);
  return tensor<T>(t.storage(), l).clone().reshape(target);
}

// A plan lowered over operand tensors ta and tb of the accumulator type (tb unused with one
// operand): each operand's distinct-label view with its summed-away labels folded, the
// labels' roles, and, where labels are contracted, the batched product's operands as
// matrices.
template <class Acc>
struct einsum_lowering {
  label_view va, vb;
  tensor<Acc> fa, fb;
  einsum_roles r;
  einsum_labels bound; // the output's labels an operand has, once each
  einsum_labels nat;   // the product's own order: batch, a's free, b's free
  bool direct = true;  // bound is the output (not an adjoint's diagonal or broadcast)
  tensor<Acc> ma, mb;  // where r.contracted is not empty
  contraction c;
  // Whether the product's result, stored contiguously, is the output (the same elements in
  // the same order): then it is computed straight into the output.
  bool product_is_output(const einsum_plan& p) const {
    if (r.contracted.empty() || !direct) return false;
    const label_view vo{layout::contiguous(bound_shape(p)), bound};
    const auto into = views::try_reshape(arranged(p, vo, nat), c.out);
    return into && into->is_contiguous();
  }
  kiln::shape bound_shape(const einsum_plan& p) const {
    kiln::shape s;
    for (const std::int8_t x : bound)
      s.push_back(p.extent[x]);
    return s;
  }
};

template <class Acc>
einsum_lowering<Acc> lower_einsum(const einsum_plan& p, const tensor<Acc>& ta,
                                  const tensor<Acc>& tb) {
  einsum_lowering<Acc> w;
  w.va = distinct_view(p, p.in[0], ta.layout());
  w.fa = fold_away(p, 0, ta, w.va);
  if (p.operands == 2) {
    w.vb = distinct_view(p, p.in[1], tb.layout());
    w.fb = fold_away(p, 1, tb, w.vb);
  }
  w.r = roles_of(p, w.va.labels, w.vb.labels);
  for (const std::int8_t x : p.out)
    if (!einsum_plan::has(w.bound, x) &&
        (einsum_plan::has(w.va.labels, x) || einsum_plan::has(w.vb.labels, x)))
      w.bound.push_back(x);
  w.direct = w.bound == p.out;
  w.nat = joined({&w.r.batch, &w.r.free_a, &w.r.free_b});
  if (!w.r.contracted.empty()) {
    w.ma = as_matrix(p, w.fa, w.va, w.r, w.r.free_a, w.r.contracted);
    w.mb = as_matrix(p, w.fb, w.vb, w.r, w.r.contracted, w.r.free_b);
    w.c = make_contraction("einsum", w.ma.shape(),
                           w.r.free_a.empty() ? matrix_form::row : matrix_form::full, w.mb.shape(),
                           w.r.free_b.empty() ? matrix_form::column : matrix_form::full);
  }
  return w;
}

// The plan run over its lowering w, on `where`.
template <class R, class Acc = matmul_acc_t<R>>
KILN_STATEMENT tensor<R> run_einsum(const einsum_plan& p, const einsum_lowering<Acc>& w,
                                    const kiln::device& where) {
  const einsum_roles& r = w.r;
  // The result over the output's labels that an operand has (all of them, once each, unless
  // this is an adjoint writing a diagonal or broadcasting).
  const tensor<R> out(w.bound_shape(p), where);
  const label_view vo{out.layout(), w.bound};
  const layout onat = arranged(p, vo, w.nat);
  if (r.contracted.empty()) {
    const tensor<Acc> xa(w.fa.storage(), arranged(p, w.va, w.nat));
    if (p.operands == 1) {
      assign(tensor<R>(out.storage(), onat), kiln::cast<R>(xa));
    } else {
      const tensor<Acc> xb(w.fb.storage(), arranged(p, w.vb, w.nat));
      assign(tensor<R>(out.storage(), onat), kiln::cast<R>(xa * xb));
    }
  } else {
    const auto into = views::try_reshape(onat, w.c.out);
    const bool in_place = into && into->is_contiguous();
    const tensor<R> dst = in_place ? tensor<R>(out.storage(), *into) : tensor<R>(w.c.out, where);
    if (where.is_host())
      host_matmul(dst, w.ma, w.mb, w.c);
    else
      device_matmul(dst, w.ma, w.mb, w.c);
    if (!in_place) {
      kiln::shape ns;
      for (const std::int8_t x : w.nat)
        ns.push_back(p.extent[x]);
      assign(tensor<R>(out.storage(), onat), dst.reshape(ns));
    }
  }
  if (w.direct) return out;
  // An adjoint's result: zeros off its diagonals, broadcast along labels no operand has.
  const tensor<R> full = kiln::zeros<R>(p.out_shape, where);
  const label_view vf = distinct_view(p, p.out, full.layout());
  assign(tensor<R>(full.storage(), vf.l), tensor<R>(out.storage(), arranged(p, vo, vf.labels)));
  return full;
}

// An operand as a tensor of the accumulator type C of the result (f32 for 16-bit floats and
// f32, f64, i64 for integers and bool): a copy where the operand's type differs, so that a
// label summed away before the product is summed as the product's own sums are (in an
// operand's narrower type a u8 or i32 sum wrapped, a bool one stuck at 1, an f16 one rounded).
template <class C, class X>
tensor<C> einsum_operand(const X& x) {
  if constexpr (std::is_same_v<C, value_t<X>>)
    return evaluate(x);
  else
    return evaluate(kiln::cast<C>(x));
}

template <class X>
void require_einsum_operand() {
  static_assert(expression<X>, "kiln: einsum's and tensordot's operands are kiln tensors or "
                               "expressions (multiply a scalar with *)");
}

} // namespace detail

namespace detail {

template <class A, class B>
inline constexpr bool has_top_product<einsum_node<A, B>> = !std::is_same_v<B, einsum_unit>;

// The contraction's result, computed where its operands live (the first operand's device).
// Within a statement (ctx not null), an einsum whose product is its output is one of the
// statement's products (epilogue.hpp): shared with every occurrence of the same product,
// and, with `defer`, computed when the statement runs it, with its consumer as the epilogue.
// An operand as the product reads it: as it is, in the accumulator's type (a cast the kernel
// applies while packing).
template <class C, class X>
auto as_accumulated(const X& x) {
  if constexpr (std::is_same_v<C, value_t<X>>)
    return x;
  else
    return kiln::cast<C>(x);
}

// A stand-in for an operand the product reads as it is (einsum_reads_in_order): its shape,
// no memory (the lowering only views it, and its views are not read).
template <class C, class X>
tensor<C> stand_in(const X& x) {
  return tensor<C>(std::shared_ptr<storage>{}, layout::contiguous(shape_of(x)));
}

// The contraction's result, computed where its operands live (the first operand's device).
// Within a statement (ctx not null), an einsum whose product is its output is one of the
// statement's products (epilogue.hpp): shared with every occurrence of the same product,
// and, with `defer`, computed when the statement runs it, with its consumer as the epilogue;
// an operand expression that is the product's matrix as it is (einsum_reads_in_order) is
// then read while the kernel packs it, not evaluated first.
template <class A, class B>
tensor<value_t<einsum_node<A, B>>> einsum_result(const einsum_node<A, B>& n, product_context* ctx,
                                                 bool defer) {
  using R = value_t<einsum_node<A, B>>;
  using C = matmul_acc_t<R>;
  // (Operands the kernel may read: elementwise trees, nothing inside them to compute first, on
  // any device.)
  constexpr bool two = !std::is_same_v<B, einsum_unit>;
  constexpr bool read_a = two && !is_tensor_v<A> && plain_tree<A> && device_only_in<A> == nullptr;
  constexpr bool read_b = two && !is_tensor_v<B> && plain_tree<B> && device_only_in<B> == nullptr;
  if constexpr (read_a || read_b) {
    const bool ra = read_a && ctx != nullptr && einsum_reads_in_order(n.p, 0);
    const bool rb = read_b && ctx != nullptr && einsum_reads_in_order(n.p, 1);
    if (ra || rb) {
      const kiln::device where = device_of(n.a);
      check_devices(n.b, where, "einsum");
      const tensor<C> ta = ra ? stand_in<C>(n.a) : einsum_operand<C>(n.a);
      const tensor<C> tb = rb ? stand_in<C>(n.b) : einsum_operand<C>(n.b);
      const einsum_lowering<C> w = lower_einsum(n.p, ta, tb);
      if (w.product_is_output(n.p)) {
        const kiln::shape& out = n.p.out_shape;
        if constexpr (read_a && read_b)
          if (ra && rb)
            return shared_product<R>(w.c, as_accumulated<C>(n.a), as_accumulated<C>(n.b), where,
                                     out, *ctx, defer);
        if constexpr (read_a)
          if (ra && !rb)
            return shared_product<R>(w.c, as_accumulated<C>(n.a), w.mb, where, out, *ctx, defer);
        if constexpr (read_b)
          if (rb && !ra)
            return shared_product<R>(w.c, w.ma, as_accumulated<C>(n.b), where, out, *ctx, defer);
      }
      // (not the output's order after all: every operand evaluated, as below)
      const tensor<C> ea = ra ? einsum_operand<C>(n.a) : ta, eb = rb ? einsum_operand<C>(n.b) : tb;
      return run_einsum<R>(n.p, lower_einsum(n.p, ea, eb), where);
    }
  }
  const tensor<C> ta = einsum_operand<C>(n.a);
  // (tb bound once: assigning a tensor writes into its elements)
  const tensor<C> tb = [&] {
    if constexpr (std::is_same_v<B, einsum_unit>) {
      return ta;
    } else {
      tensor<C> t = einsum_operand<C>(n.b);
      check_devices(t, ta.device(), "einsum");
      return t;
    }
  }();
  const einsum_lowering<C> w = lower_einsum(n.p, ta, tb);
  if (ctx != nullptr && w.product_is_output(n.p))
    return shared_product<R>(w.c, w.ma, w.mb, ta.device(), n.p.out_shape, *ctx, defer);
  return run_einsum<R>(n.p, w, ta.device());
}

template <class A, class B>
auto materialize_top(const einsum_node<A, B>& n, product_context& ctx) {
  return einsum_result(n, &ctx, true);
}

} // namespace detail

template <class A, class B>
KILN_STATEMENT auto materialize(const einsum_node<A, B>& n) {
  return detail::einsum_result(
      n, detail::statement_open() ? &detail::statement_products() : nullptr, false);
}

// numpy's einsum for one or two operands: "ij,jk->ik", "bij,bkj->bik", "ii->i" (a
// diagonal), "ij->" (a sum), "i,j->ij", "...ij,...jk->...ik" (broadcast batch dims); without
// "->" the output is the labels used once, in character order. A label repeated in one
// operand reads its diagonal; a dim of 1 broadcasts against the label's other dims.
template <class X>
KILN_STATEMENT auto einsum(std::string_view spec, X&& x) {
  detail::require_einsum_operand<std::remove_cvref_t<X>>();
  detail::require_operand(x, "einsum");
  einsum_plan p = parse_einsum("einsum", spec, shape_of(x), nullptr);
  return einsum_node<std::remove_cvref_t<X>, einsum_unit>(std::forward<X>(x), einsum_unit{},
                                                          std::move(p));
}
template <class X, class Y>
KILN_STATEMENT auto einsum(std::string_view spec, X&& x, Y&& y) {
  detail::require_einsum_operand<std::remove_cvref_t<X>>();
  detail::require_einsum_operand<std::remove_cvref_t<Y>>();
  detail::require_operand(x, "einsum");
  detail::require_operand(y, "einsum");
  einsum_plan p = parse_einsum("einsum", spec, shape_of(x), &shape_of(y));
  return einsum_node<std::remove_cvref_t<X>, std::remove_cvref_t<Y>>(
      std::forward<X>(x), std::forward<Y>(y), std::move(p));
}

// numpy's tensordot: x's dims `ax` contracted with y's dims `ay` (pairwise, equal extents);
// the result has x's other dims, then y's, in order.
template <class X, class Y>
KILN_STATEMENT auto tensordot(X&& x, Y&& y, const std::vector<std::int64_t>& ax,
                              const std::vector<std::int64_t>& ay) {
  detail::require_einsum_operand<std::remove_cvref_t<X>>();
  detail::require_einsum_operand<std::remove_cvref_t<Y>>();
  detail::require_operand(x, "tensordot");
  detail::require_operand(y, "tensordot");
  einsum_plan p = tensordot_plan(shape_of(x), shape_of(y), ax, ay);
  return einsum_node<std::remove_cvref_t<X>, std::remove_cvref_t<Y>>(
      std::forward<X>(x), std::forward<Y>(y), std::move(p));
}
// tensordot(x, y, n): x's last n dims contracted with y's first n.
template <class X, class Y>
KILN_STATEMENT auto tensordot(X&& x, Y&& y, std::int64_t n = 2) {
  const int rx = shape_of(x).size();
  if (n < 0 || n > rx || n > shape_of(y).size())
    throw error("tensordot", "more dims to contract than an operand has",
                std::to_string(n) + " dims of shapes " + shape_of(x).str() + " and " +
                    shape_of(y).str());
  std::vector<std::int64_t> ax, ay;
  for (std::int64_t i = 0; i < n; ++i) {
    ax.push_back(rx - n + i);
    ay.push_back(i);
  }
  return tensordot(std::forward<X>(x), std::forward<Y>(y), ax, ay);
}

} // namespace kiln
