#pragma once
// The planner and the host evaluator's entry: every way of assigning expressions to tensors
// goes through here. The dispatch, in one place:
//   1. reductions inside the expression are computed first (materialize);
//   2. an output that overlaps an input through a different layout goes through a
//      temporary (same layout is safe: each element is read before it is written);
//   3. outputs of one shape on the host run as one pass: the pass type's kernel
//      (kernel.hpp) over the flat list of its leaves, by the host pass (host_pass.hpp),
//      whose code is compiled once per program; on a device, device_pass.hpp.
#include "kiln/eval/host_pass.hpp"
#include "kiln/eval/planner.hpp"
#include "kiln/plan/recording.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>

namespace kiln {

namespace detail {
inline void run_host_pass_runner(const void*, const host_kernel_ref& k,
                                 std::span<const host_output> outs,
                                 std::span<const flat_leaf> leaves,
                                 std::span<const flat_scalar> scalars, const kiln::shape& shape) {
  run_host_pass(k, outs, leaves, scalars, shape);
}

// Whether a product is part of the elementwise tree of an expression (not inside a
// reduction or another product's operand): on the host, such a product runs with that tree
// as its epilogue (contractions/epilogue.hpp, which specializes this for its node).
template <class E>
inline constexpr bool has_top_product = false;
template <class Op, class... C>
inline constexpr bool has_top_product<expr_node<Op, C...>> = (has_top_product<C> || ...);
template <element D, class E>
void product_assign(const tensor<D>& dst, const E& e);

// A statement (an assignment or a kiln::eval, with everything it evaluates on the way: the
// reductions, products and adjoints inside it) runs within one scope: a product that occurs
// in it several times, in the tree or in the adjoint trees of a gradient, is computed once
// (contractions/epilogue.hpp), and the results are let go when the statement ends.
inline bool& statement_open() {
  thread_local bool open = false;
  return open;
}
void end_statement_products();
class statement_scope {
public:
  statement_scope() : owner_(!statement_open()) { statement_open() = true; }
  ~statement_scope() {
    if (owner_) {
      end_statement_products();
      statement_open() = false;
    }
  }
  statement_scope(const statement_scope&) = delete;
  statement_scope& operator=(const statement_scope&) = delete;

private:
  bool owner_;
};
template <element... D, class... E>
void product_eval(pending_assign<D, E>&... p);
} // namespace detail

// Reductions inside an expression are evaluated first; every other node is kept.
template <element T>
const tensor<T>& materialize(const tensor<T>& t) {
  return t;
}
template <element T>
const scalar_expr<T>& materialize(const scalar_expr<T>& s) {
  return s;
}
// A subtree with nothing to compute is itself (no copy: a gradient's adjoint trees repeat the
// forward tree's subtrees many times over, and rebuilding each was most of their code); a
// rebuilt node keeps its shape, which computing a reduction does not change.
template <class Op, class... C>
requires detail::plain_tree<expr_node<Op, C...>>
const expr_node<Op, C...>& materialize(const expr_node<Op, C...>& n) { return n; }
template <class Op, class... C>
requires(!detail::plain_tree<expr_node<Op, C...>>) auto materialize(const expr_node<Op, C...>& n) {
  return n.apply([&](const auto&... c) {
    return expr_node<Op, std::remove_cvref_t<decltype(materialize(c))>...>(
        known_shape, n.out_shape(), materialize(c)...);
  });
}

// Calls f(device) for every tensor leaf, reductions' inputs included (found by ADL, so
// reduce.hpp adds its node kind).
template <element T, class F>
void visit_devices(const tensor<T>& t, F&& f) {
  if (!t.empty()) f(t.device());
}
template <element T, class F>
void visit_devices(const scalar_expr<T>&, F&&) {}
template <class Op, class... C, class F>
void visit_devices(const expr_node<Op, C...>& n, F&& f) {
  n.each_child([&](const auto& c) { visit_devices(c, f); });
}

namespace detail {

// What visit_devices hands each leaf's device to, the same type from every caller, so that
// a tree's visit is one function per node type (a lambda per caller made one per caller).
struct device_visit {
  kiln::device* first = nullptr;       // device_of: where the first leaf's device goes
  const kiln::device* where = nullptr; // check_devices: where every leaf must be
  const char* op = nullptr;
  bool seen = false;
  void operator()(const kiln::device& x) {
    if (where != nullptr) {
      if (x != *where) refuse_mixed_devices(op, *where, x);
    } else if (!seen) {
      *first = x;
      seen = true;
    }
  }
};

template <class E>
kiln::device device_of(const E& e) {
  kiln::device d;
  device_visit v{.first = &d};
  visit_devices(e, v);
  return d;
}

// Every leaf of e must live on `where`, the device of the target (or of the first leaf).
template <class E>
void check_devices(const E& e, const kiln::device& where, const char* op) {
  device_visit v{.where = &where, .op = op};
  visit_devices(e, v);
}

// A pass on a GPU device (eval/device_pass.hpp, included at the end): outputs of one shape on
// one device, computed together, after the planner below has made sure that no target
// overlaps what any output reads (else everything goes through temporaries); of them, those
// marked in `active` (one shape of a kiln::eval's several).
template <class... O>
void device_run(const O&... outs);
template <class... O>
void device_run_outputs(std::span<const bool> active, const O&... outs);

// One output of a pass: where it goes and the expression that fills it, both outliving the
// pass (a copy of the target's handle cost a reference count per statement).
template <element D, class E>
struct pass_output {
  using dst_type = D;
  using expr_type = E;
  const tensor<D>& dst;
  const E* expr;
};

// What runs a host pass once its parts are laid out: run_host_pass, or the epilogue of a
// fused product (contractions/epilogue.hpp), which runs it strip by strip.
using host_pass_runner = void (*)(const void* ctx, const host_kernel_ref& k,
                                  std::span<const host_output> outs,
                                  std::span<const flat_leaf> leaves,
                                  std::span<const flat_scalar> scalars, const kiln::shape& shape);

// Runs outputs of one shape on the host, those marked in `active` (the others are left
// alone): the pass type's kernel and the flat lists of its leaves, handed to the host pass
// (or to `runner`).
template <class... O>
void host_run_pass_with(host_pass_runner runner, const void* ctx,
                        const std::array<bool, sizeof...(O)>& active, const O&... outs) {
  using kernel =
      host_kernel<type_list<typename O::dst_type...>, type_list<typename O::expr_type...>>;
  constexpr int n_leaves = kernel::leaf_start.back(), n_scalars = kernel::scalar_start.back();
  std::array<flat_leaf, n_leaves ? n_leaves : 1> leaves;
  std::array<flat_scalar, n_scalars ? n_scalars : 1> scalars;
  flat_leaf* l = leaves.data();
  flat_scalar* s = scalars.data();
  (flatten(*outs.expr, l, s), ...);
  std::size_t i = 0, first = sizeof...(O);
  const std::array<host_output, sizeof...(O)> targets{host_output{
      outs.dst.data(), &outs.dst.layout(), dtype_of<typename O::dst_type>(), active[i++]}...};
  for (std::size_t k = sizeof...(O); k-- > 0;)
    if (active[k]) first = k;
  const kiln::shape* shapes[] = {&outs.dst.shape()...};
  const storage* stores[] = {outs.dst.storage().get()...};
  if (!runner) {
    runner = run_host_pass_runner;
    if (recording_now() != nullptr) [[unlikely]]
      runner = record_and_run_host_pass, ctx = stores;
  }
  runner(ctx, kernel::ref(), targets, {leaves.data(), std::size_t(n_leaves)},
         {scalars.data(), std::size_t(n_scalars)}, *shapes[first]);
}
template <class... O>
void host_run_pass(const std::array<bool, sizeof...(O)>& active, const O&... outs) {
  host_run_pass_with(nullptr, nullptr, active, outs...);
}

template <class... O>
void host_run(const std::array<bool, sizeof...(O)>& active, const O&... outs) {
  constexpr const char* device_only = first_named({device_only_in<typename O::expr_type>...});
  if constexpr (device_only != nullptr)
    refuse_device_only(device_only);
  else
    host_run_pass(active, outs...);
}

template <class Run, std::size_t N>
void run_by_shape(const Run& run, const std::array<kiln::shape, N>& shapes) {
  std::array<bool, N> done{};
  for (std::size_t first = 0; first < N; ++first) {
    if (done[first]) continue;
    std::array<bool, N> group{};
    for (std::size_t i = first; i < N; ++i)
      if (!done[i] && shapes[i] == shapes[first]) group[i] = done[i] = true;
    run(group);
  }
}

template <class Tup, std::size_t... I>
void run_outputs(const Tup& outs, std::index_sequence<I...> seq, const char* op = "eval");

// Runs outputs that share a shape and need no temporaries, where they live.
template <class... O>
void execute(const O&... outs) {
  if (std::get<0>(std::forward_as_tuple(outs...)).dst.device().is_host()) {
    std::array<bool, sizeof...(O)> all;
    all.fill(true);
    host_run(all, outs...);
  } else {
    device_run(outs...);
  }
}

// Runs outputs that need no temporaries: of one shape, as execute(); of several, one pass
// per shape (one kernel each on a device), the host and every device alike.
template <class Tup, std::size_t... I>
void execute_outputs(const Tup& outs, std::index_sequence<I...>) {
  const kiln::shape& s = std::get<0>(outs).dst.shape();
  if (((std::get<I>(outs).dst.shape() == s) && ...)) {
    execute(std::get<I>(outs)...);
  } else if (std::get<0>(outs).dst.device().is_host()) {
    run_by_shape([&](const auto& group) { host_run(group, std::get<I>(outs)...); },
                 std::array<kiln::shape, sizeof...(I)>{std::get<I>(outs).dst.shape()...});
  } else {
    run_by_shape([&](const auto& group) { device_run_outputs(group, std::get<I>(outs)...); },
                 std::array<kiln::shape, sizeof...(I)>{std::get<I>(outs).dst.shape()...});
  }
}

// Every output of a kiln::eval is computed from the values before the call (numpy's
// semantics), on the host and on a device alike: where a target overlaps an input or
// another target through a different layout (one shape), or shares memory with another
// output's inputs or target (several shapes, computed in groups), every output is computed
// into a temporary first, then copied.
// The planner's verdict on outputs (see run_outputs): whether they may be computed in place.
template <class Tup, std::size_t... I>
bool outputs_in_place(const Tup& outs, std::index_sequence<I...>, const char* op) {
  // Built in place (a copy through make_tuple stalled on store forwarding).
  const std::tuple<flat_expr<typename std::tuple_element_t<I, Tup>::expr_type>...> flats(
      *std::get<I>(outs).expr...);
  const std::array<plan_output, sizeof...(I)> plan{
      plan_output{flat_leaf{std::get<I>(outs).dst.storage().get(), &std::get<I>(outs).dst.layout(),
                            dtype_of<typename std::tuple_element_t<I, Tup>::dst_type>()},
                  shape_of(*std::get<I>(outs).expr), std::get<I>(flats).leaf_span()}...};
  return plan_in_place(plan, op);
}

template <class Tup, std::size_t... I>
void run_outputs(const Tup& outs, std::index_sequence<I...> seq, const char* op) {
  if (outputs_in_place(outs, seq, op)) {
    execute_outputs(outs, seq);
    return;
  }
  const kiln::device where = std::get<0>(outs).dst.device();
  using tmp_tuple =
      std::tuple<tensor<value_t<typename std::tuple_element_t<I, Tup>::expr_type>>...>;
  tmp_tuple tmps{std::tuple_element_t<I, tmp_tuple>(std::get<I>(outs).dst.shape(), where)...};
  execute_outputs(
      std::make_tuple(pass_output<value_t<typename std::tuple_element_t<I, Tup>::expr_type>,
                                  typename std::tuple_element_t<I, Tup>::expr_type>{
          std::get<I>(tmps), std::get<I>(outs).expr}...),
      seq);
  (execute(
       pass_output<typename std::tuple_element_t<I, Tup>::dst_type,
                   std::tuple_element_t<I, tmp_tuple>>{std::get<I>(outs).dst, &std::get<I>(tmps)}),
   ...);
}

template <element D, class E>
KILN_STATEMENT void assign(const tensor<D>& dst, const E& e) {
  if constexpr (!plain_tree<E>) { // reductions inside run first, on the target's device
    const statement_scope scope;
    if (!dst.empty()) check_devices(e, dst.device(), "assign");
    if constexpr (has_top_product<E>) {
      if (!dst.empty()) {
        product_assign(dst, e); // the product with this assignment as its epilogue
        return;
      }
    }
    static_assert(!std::is_same_v<std::remove_cvref_t<decltype(materialize(e))>, E>);
    assign(dst, materialize(e));
  } else {
    run_outputs(std::make_tuple(pass_output<D, E>{dst, &e}), std::index_sequence<0>{}, "assign");
  }
}

template <element T, class E>
KILN_STATEMENT tensor<T> construct(const E& e) {
  tensor<T> r(shape_of(e), device_of(e));
  assign(r, e);
  return r;
}

// materialize(e) as a value: a copy where it gives a reference (e itself, or a leaf of it),
// else the new node as materialize made it (not moved into another).
template <class E>
auto materialized_value(const E& e) {
  using M = decltype(materialize(e));
  if constexpr (std::is_reference_v<M>)
    return std::remove_cvref_t<M>(materialize(e));
  else
    return materialize(e);
}

template <class E>
KILN_STATEMENT tensor<value_t<E>> evaluate(const E& e) {
  if constexpr (is_tensor_v<std::remove_cvref_t<E>>) {
    return e;
  } else if constexpr (is_tensor_v<std::remove_cvref_t<decltype(materialize(e))>>) {
    return materialize(e); // a reduction: its result is already a new tensor
  } else {
    tensor<value_t<E>> r(shape_of(e), device_of(e)); // on the leaves' device
    assign(r, e);
    return r;
  }
}

template <class E>
KILN_STATEMENT std::vector<value_t<E>> to_vector(const E& e) {
  refuse_if_capturing("to_vector", "it reads values on the host, and a replay runs no host "
                                   "code (read results after the call)");
  using T = value_t<E>;
  const tensor<T> e0 = evaluate(e);
  if (e0.empty()) return {};
  const tensor<T> v = e0.device().is_host() ? e0 : e0.to(kiln::device{});
  // A new handle, not an assignment: assigning to v would write into the viewed storage.
  const tensor<T> t = v.is_contiguous() ? v : v.clone();
  return std::vector<T>(t.data(), t.data() + t.size());
}

} // namespace detail

namespace detail {
template <class Ms, std::size_t... I, element... D, class... E>
void eval_with(const Ms& ms, std::index_sequence<I...> seq, pending_assign<D, E>&... p) {
  const auto outs =
      std::make_tuple(pass_output<D, std::remove_cvref_t<std::tuple_element_t<I, Ms>>>{
          p.target(), &std::get<I>(ms)}...);
  run_outputs(outs, seq);
}

// A plain tree as it is; anything else with its reductions computed (materialize).
template <class E>
decltype(auto) materialized(const E& e) {
  if constexpr (plain_tree<E>)
    return (e);
  else
    return materialized_value(e);
}
} // namespace detail

// Several outputs at once: kiln::eval(r1 = e1, r2 = e2). Outputs of one shape share a pass
// (a kernel on a device), those of several run one pass per shape, all from the values before
// the call: if a target overlaps an input or another target where that could change what an
// output reads, every output is computed into a temporary first.
template <element... D, class... E>
KILN_STATEMENT void eval(pending_assign<D, E>&&... p) {
  static_assert(sizeof...(D) >= 1, "kiln::eval needs at least one assignment");
  (p.mark_done(), ...);
  const detail::statement_scope scope;
  if constexpr ((detail::has_top_product<E> || ...)) {
    if ((!p.target().empty() && ...)) {
      detail::product_eval(p...); // a product with these outputs as its epilogue
      return;
    }
  }
  const std::tuple<decltype(detail::materialized(p.expr()))...> ms(
      detail::materialized(p.expr())...);
  detail::eval_with(ms, std::index_sequence_for<D...>{}, p...);
}

} // namespace kiln

#include "kiln/eval/device_pass.hpp"
