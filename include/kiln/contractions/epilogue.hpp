#pragma once
// A product and the elementwise work that consumes it, as one pass on the host: in
// `y = gelu(matmul(x, w) + b)` or `kiln::eval(pre = z, y = gelu(z))`, the assignment's pass
// runs on each strip of the product as soon as the kernel has finished it, while it is in
// cache (strip_pass.hpp), instead of after the whole product was stored and read back.
//
// How: the statement's tree is materialized with its top-level products (those in its
// elementwise part, not inside a reduction or another product's operand) deferred: each gets
// its result tensor, not yet computed, and occurrences of one product (the same operands,
// read the same way) share it, so a product that a tree mentions five times is computed
// once. Then one deferred product whose result has the outputs' shape is run with the pass
// as its epilogue; the others are computed first. It is not fused (and runs as before) where
// the planner wants temporaries, where an output overlaps the product's operands (the
// kernel still reads them while strips are written), or where the result is not of the
// accumulator's type (f16, bf16, i32: converted after the product).
#include "kiln/contractions/matmul.hpp"
#include "kiln/contractions/strip_pass.hpp"

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace kiln::detail {

template <class A, class B>
inline constexpr bool has_top_product<matmul_node<A, B>> = true;

// A product whose result exists but is not computed yet.
class deferred_product {
public:
  virtual ~deferred_product() = default;
  // Computes the result, handing each finished strip to `epilogue` where one is given.
  void compute(gemm_epilogue epilogue = nullptr, const void* ctx = nullptr) {
    if (done_) return;
    done_ = true;
    run(epilogue, ctx);
  }
  const contraction& shape() const { return c_; }
  // The result's shape: the product's (c_.out) or, for an einsum, the same elements in the
  // same order under the output's dims.
  const kiln::shape& result_shape() const { return result_; }
  const void* tag() const { return tag_; }
  // Computes the result straight into a whole contiguous tensor of its shape and dtype
  // (`dst = matmul(a, b)`), where that target is not an operand; false: nothing done.
  virtual bool compute_into(const std::shared_ptr<kiln::storage>& st, const layout& l, dtype t) = 0;
  bool fusable() const { return fusable_; }
  bool done() const { return done_; }
  // Whether an occurrence of node type `tag` over `leaves` and `scalars` is this product.
  bool is(const void* tag, std::span<const flat_leaf> leaves, std::span<const flat_scalar> scalars,
          const contraction& c, const kiln::shape& result) const {
    if (elsewhere_ || tag != tag_ || c.fa != c_.fa || c.fb != c_.fb || c.out_t != c_.out_t ||
        result != result_ || leaves.size() != leaves_.size() || scalars.size() != scalars_.size())
      return false;
    for (std::size_t i = 0; i < leaves.size(); ++i)
      if (leaves[i].storage != leaves_[i].storage || *leaves[i].layout != *leaves_[i].layout)
        return false;
    for (std::size_t i = 0; i < scalars.size(); ++i)
      if (scalars[i].bits != scalars_[i].bits) return false;
    return true;
  }
  // Whether the memory of `target` (l over storage st) meets one of the operands'.
  bool reads(const flat_leaf& target) const {
    for (const flat_leaf& f : leaves_) {
      // Host ranges are addresses; a device's count from its buffer's start.
      const bool comparable = f.storage->on_host()
                                  ? target.storage->on_host()
                                  : memory_of(*f.storage) == memory_of(*target.storage);
      if (comparable && intersect(byte_range(target, *target.layout), byte_range(f, *f.layout)))
        return true;
    }
    return false;
  }
  // On a device: the product with `e`'s outputs as its epilogue, in one kernel (lowerings in
  // `table`); false, having done nothing, where the device declines it.
  virtual bool fuse_on_device(const device_epilogue& e, lowering_table& table) = 0;
  // The result's memory (what the statement's leaves read) and its dtype.
  virtual const kiln::storage* result_storage() const = 0;
  virtual dtype result_type() const = 0;
  // On the host: computes the product into contiguous host memory (l over st, of the product's
  // shape and the result's dtype) instead of the result, handing each finished strip to
  // `epilogue`.
  virtual void compute_at(const std::shared_ptr<kiln::storage>& st, const layout& l,
                          gemm_epilogue epilogue, const void* ctx) = 0;

protected:
  deferred_product(const void* tag, const contraction& c, const kiln::shape& result, bool fusable)
      : tag_(tag), c_(c), result_(result), fusable_(fusable) {}
  virtual void run(gemm_epilogue epilogue, const void* ctx) = 0;
  const void* tag_;
  contraction c_;
  kiln::shape result_;
  bool fusable_;
  bool done_ = false;
  bool elsewhere_ = false;        // computed into a statement's output: `out` holds nothing
  std::vector<flat_leaf> leaves_; // pointing into the operands the derived class holds
  std::vector<flat_scalar> scalars_;
};

// Layout l, of (or broadcast to) an einsum's output shape `from`, viewed as its product's dims
// `to` (the same elements in the same order: rows or cols merged from several labels) and kept
// in `keep`; false where its strides do not allow it.
inline bool view_as_product(const layout*& l, const kiln::shape& from, const kiln::shape& to,
                            std::deque<layout>& keep) {
  const auto m = views::try_reshape(views::broadcast_to(*l, from, "einsum"), to);
  if (m) l = &keep.emplace_back(*m);
  return m.has_value();
}

template <class R, class A, class B>
class deferred_matmul final : public deferred_product {
public:
  static constexpr char tag = 0;
  deferred_matmul(const contraction& c, A a, B b, const kiln::device& where,
                  const kiln::shape& result)
      : deferred_product(&tag, c, result, std::is_same_v<R, matmul_acc_t<R>>), out(c.out, where),
        a_(std::move(a)), b_(std::move(b)) {
    const flat_pass<A, B> f(a_, b_);
    leaves_.assign(f.leaf_span().begin(), f.leaf_span().end());
    scalars_.assign(f.scalar_span().begin(), f.scalar_span().end());
  }
  tensor<R> out; // of the product's shape
  tensor<R> result() const { return out.reshape(result_); }
  const kiln::storage* result_storage() const override { return out.storage().get(); }
  dtype result_type() const override { return dtype_of<R>(); }
  void compute_at(const std::shared_ptr<kiln::storage>& st, const layout& l, gemm_epilogue epilogue,
                  const void* ctx) override {
    if (done_) return;
    done_ = true;
    elsewhere_ = true; // (no later mention may take `out`)
    if constexpr (std::is_same_v<R, matmul_acc_t<R>>)
      host_matmul(tensor<R>(st, l), a_, b_, c_, epilogue, ctx);
    else // (fusable() is false: never handed an epilogue)
      throw error("matmul", "internal: an epilogue for a product converted after it",
                  "result dtype " + std::string(name(dtype_of<R>())));
  }
  bool compute_into(const std::shared_ptr<kiln::storage>& st, const layout& l, dtype t) override {
    if (done_ || !out.device().is_host() || t != dtype_of<R>() || !l.is_contiguous() ||
        l.shape != result_ || reads(flat_leaf{st.get(), &l, t}))
      return false;
    const auto m = views::try_reshape(l, c_.out);
    if (!m) return false;
    done_ = true;
    host_matmul(tensor<R>(st, *m), a_, b_, c_);
    return true;
  }
  bool fuse_on_device(const device_epilogue& e, lowering_table& table) override {
    if (done_) return false;
    if (result_ == c_.out) {
      if (!device_contract(out, a_, b_, c_, &e, &table)) return false;
    } else { // an einsum's output: the epilogue's layouts as the product's dims
      std::deque<layout> keep;
      std::vector<flat_leaf> leaves(e.leaves.begin(), e.leaves.end()),
          targets(e.targets.begin(), e.targets.end());
      for (auto* v : {&leaves, &targets})
        for (flat_leaf& f : *v)
          if (!view_as_product(f.layout, result_, c_.out, keep)) return false;
      const device_epilogue r{e.exprs, leaves, e.scalars, targets};
      if (!device_contract(out, a_, b_, c_, &r, &table)) return false;
    }
    done_ = true;
    return true;
  }

private:
  void run(gemm_epilogue epilogue, const void* ctx) override {
    if (!out.device().is_host())
      device_matmul(out, a_, b_, c_);
    else if constexpr (std::is_same_v<R, matmul_acc_t<R>>)
      host_matmul(out, a_, b_, c_, epilogue, ctx);
    else
      host_matmul(out, a_, b_, c_);
  }
  A a_;
  B b_;
};

// The deferred products of one statement.
struct product_context {
  std::vector<std::unique_ptr<deferred_product>> products;
  // Where the products the innermost running statement deferred begin: a statement nested in
  // another (an operand evaluated on the way) runs only its own, so an outer one it shares
  // must be computed when it is found.
  std::size_t first = 0;
};

// A statement's span of its context's products, from here on, for its lifetime.
class own_products {
public:
  explicit own_products(product_context& ctx) : ctx_(ctx), saved_(ctx.first) {
    ctx.first = ctx.products.size();
  }
  ~own_products() { ctx_.first = saved_; }
  own_products(const own_products&) = delete;
  own_products& operator=(const own_products&) = delete;
  std::size_t first() const { return ctx_.first; }

private:
  product_context& ctx_;
  std::size_t saved_;
};

// materialize (eval/assign.hpp) with the top-level products deferred into ctx. Every
// overload gives the type materialize gives.
template <class N>
decltype(auto) materialize_top(const N& n, product_context&) {
  return materialize(n); // a reduction or another node: as always
}
template <element T>
const tensor<T>& materialize_top(const tensor<T>& t, product_context&) {
  return t;
}
template <element T>
const scalar_expr<T>& materialize_top(const scalar_expr<T>& s, product_context&) {
  return s;
}
template <class Op, class... C>
requires plain_tree<expr_node<Op, C...>>
const expr_node<Op, C...>& materialize_top(const expr_node<Op, C...>& n, product_context&) {
  return n;
}
template <class Op, class... C>
requires(!plain_tree<expr_node<Op, C...>>) auto materialize_top(const expr_node<Op, C...>& n,
                                                                product_context& ctx);
// The result (of shape `result`: c.out's elements in their order) of the product of a and b
// as c reads them, in the statement's products ctx: computed now (or, with `defer`, when the
// statement runs it), shared by every occurrence of the same product.
template <class R, class Ma, class Mb>
tensor<R> shared_product(const contraction& c, const Ma& a, const Mb& b, const kiln::device& where,
                         const kiln::shape& result, product_context& ctx, bool defer) {
  const flat_pass<Ma, Mb> f(a, b);
  for (std::size_t i = 0; i < ctx.products.size(); ++i) {
    deferred_product& d = *ctx.products[i];
    if (d.is(&deferred_matmul<R, Ma, Mb>::tag, f.leaf_span(), f.scalar_span(), c, result)) {
      // (one an enclosing statement deferred runs after this one: computed now)
      if (!defer || i < ctx.first) d.compute();
      return static_cast<const deferred_matmul<R, Ma, Mb>&>(d).result();
    }
  }
  auto d = std::make_unique<deferred_matmul<R, Ma, Mb>>(c, a, b, where, result);
  if (!defer) d->compute();
  tensor<R> out = d->result();
  ctx.products.push_back(std::move(d));
  return out;
}

// A product's result: computed now (or, with `defer`, when the statement runs it), shared by
// every occurrence of the same product in ctx, the statement's products (null: outside a
// statement, computed on its own). Operand expressions are materialized first; on a device,
// or with an operand the host cannot run, it is computed as materialize always did.
template <class A, class B>
auto product_result(const matmul_node<A, B>& n, product_context* ctx, bool defer) {
  using R = value_t<matmul_node<A, B>>;
  const auto a = materialized_value(n.a);
  const auto b = materialized_value(n.b);
  using Ma = std::remove_cvref_t<decltype(a)>;
  using Mb = std::remove_cvref_t<decltype(b)>;
  const kiln::device where = device_of(a);
  check_devices(b, where, "matmul");
  constexpr const char* device_only = first_named({device_only_in<Ma>, device_only_in<Mb>});
  if (device_only != nullptr || ctx == nullptr) {
    tensor<R> out(n.c.out, where);
    if constexpr (device_only != nullptr)
      refuse_device_only(device_only);
    else if (where.is_host())
      host_matmul(out, a, b, n.c);
    else
      device_matmul(out, a, b, n.c);
    return out;
  }
  return shared_product<R>(n.c, a, b, where, n.c.out, *ctx, defer);
}

// The products of the statement this thread runs (eval/assign.hpp's statement_scope): one
// result per product, kept until the statement ends.
inline product_context& statement_products() {
  thread_local product_context c;
  return c;
}
inline void end_statement_products() { statement_products().products.clear(); }

template <class A, class B>
auto materialize_top(const matmul_node<A, B>& n, product_context& ctx) {
  return product_result(n, &ctx, true);
}
template <class Op, class... C>
requires(!plain_tree<expr_node<Op, C...>>) auto materialize_top(const expr_node<Op, C...>& n,
                                                                product_context& ctx) {
  return n.apply([&](const auto&... c) {
    return expr_node<Op, std::remove_cvref_t<decltype(materialize(c))>...>(
        known_shape, n.out_shape(), materialize_top(c, ctx)...);
  });
}

template <class E>
decltype(auto) materialized_top(const E& e, product_context& ctx) {
  if constexpr (plain_tree<E>)
    return (e);
  else
    return materialize_top(e, ctx);
}

// Whether the one output `o` of a fused product d can hold the product itself: contiguous, of
// the product's shape and dtype, and sharing no byte with a leaf other than the product's
// result (which the epilogue then reads where the kernel stored it, each element before it
// is overwritten: an elementwise pass reads an element's own position only).
inline bool product_in_output(const deferred_product& d, const host_output& o,
                              std::span<const flat_leaf> leaves) {
  const kiln::shape& s = d.shape().out;
  if (!o.active || o.type != d.result_type() || !o.layout->is_contiguous() || o.layout->shape != s)
    return false;
  const auto lo = reinterpret_cast<std::uintptr_t>(o.data);
  const std::pair<std::uintptr_t, std::uintptr_t> bytes{lo, lo + std::uintptr_t(numel(s)) *
                                                                     size_of(o.type)};
  bool reads_product = false;
  for (const flat_leaf& f : leaves) {
    if (f.storage == d.result_storage()) {
      if (!f.layout->is_contiguous() || f.layout->shape != s || f.layout->offset != 0) return false;
      reads_product = true;
    } else if (intersect(bytes, byte_range(f, *f.layout))) {
      return false;
    }
  }
  return reads_product;
}

// The pass of the outputs (their shape the product's) as the epilogue of product d. Where one
// output can hold the product (product_in_output), the product is computed into it and the
// epilogue runs there in place: the product's temporary is never written, and the pass's
// stores go to lines the kernel has just written (beside a temporary, they missed the cache).
inline void fused_runner_product(deferred_product& d, const host_kernel_ref& k,
                                 std::span<const host_output> outs,
                                 std::span<const flat_leaf> leaves,
                                 std::span<const flat_scalar> scalars) {
  const contraction& c = d.shape();
  const bool in_output = outs.size() == 1 && product_in_output(d, outs[0], leaves);
  std::vector<flat_leaf> moved;
  // The output's memory, borrowed (not freed here): the product's target and its leaf.
  std::shared_ptr<kiln::storage> held;
  if (in_output) {
    const layout& l = *outs[0].layout;
    held = std::make_shared<kiln::storage>(outs[0].type, l.offset + numel(c.out),
                                           static_cast<unsigned char*>(outs[0].data) -
                                               l.offset * std::int64_t(size_of(outs[0].type)));
    moved.assign(leaves.begin(), leaves.end());
    for (flat_leaf& f : moved)
      if (f.storage == d.result_storage()) f = flat_leaf{held.get(), &l, f.type};
    leaves = moved;
  }
  strip_pass p{k, outs, leaves, scalars, c.out, int(c.batch.size()), true, true};
  // The kernel's rows and cols: the result's, or its transpose's where it is stored so.
  p.has_rows = c.out_t ? has_cols(c.fb) : has_rows(c.fa);
  p.has_cols = c.out_t ? has_rows(c.fa) : has_cols(c.fb);
  if (in_output) {
    ++host_gemm_counts().in_output;
    d.compute_at(held, *outs[0].layout, &run_strip, &p);
  } else
    d.compute(&run_strip, &p);
}

// The pass of a statement's outputs as the epilogue of the product `ctx` points at.
inline void fused_runner(const void* ctx, const host_kernel_ref& k,
                         std::span<const host_output> outs, std::span<const flat_leaf> leaves,
                         std::span<const flat_scalar> scalars, const kiln::shape& shape) {
  auto& d = *static_cast<deferred_product*>(const_cast<void*>(ctx));
  const contraction& c = d.shape();
  if (shape != c.out) { // an einsum's output: its layouts as the product's dims
    std::deque<layout> keep;
    std::vector<host_output> o(outs.begin(), outs.end());
    std::vector<flat_leaf> f(leaves.begin(), leaves.end());
    bool all = true;
    for (host_output& x : o)
      all = all && view_as_product(x.layout, shape, c.out, keep);
    for (flat_leaf& x : f)
      all = all && view_as_product(x.layout, shape, c.out, keep);
    if (!all) { // a layout the product's dims cannot view: the product, then the pass
      d.compute();
      run_host_pass(k, outs, leaves, scalars, shape);
      return;
    }
    fused_runner_product(d, k, o, f, scalars);
    return;
  }
  fused_runner_product(d, k, outs, leaves, scalars);
}

// The lowerings of device epilogues of output expressions Tup, per product type (its tag).
template <class Tup>
lowering_table& device_epilogue_table(const void* product) {
  static std::mutex m;
  static std::map<const void*, lowering_table> tables;
  std::lock_guard lock(m);
  return tables[product];
}

// On a device: the outputs as the epilogue of product d, one kernel; false where the device
// declines it (nothing done).
template <class Tup, std::size_t... I>
bool device_fused(deferred_product& d, const Tup& outs, std::index_sequence<I...>) {
  const flat_pass<typename std::tuple_element_t<I, Tup>::expr_type...> flat(
      *std::get<I>(outs).expr...);
  const std::array<ir::expr_description, sizeof...(I)> exprs{
      ir::described<typename std::tuple_element_t<I, Tup>::expr_type>...};
  const std::array<flat_leaf, sizeof...(I)> targets{
      flat_leaf{std::get<I>(outs).dst.storage().get(), &std::get<I>(outs).dst.layout(),
                dtype_of<typename std::tuple_element_t<I, Tup>::dst_type>()}...};
  const device_epilogue e{exprs, flat.leaf_span(), flat.scalar_span(), targets};
  return d.fuse_on_device(e, device_epilogue_table<Tup>(d.tag()));
}

// Runs outputs (pass_outputs over materialized trees) with one of ctx's products from
// `first` on (those this statement's materialization deferred) fused.
template <class Tup, std::size_t... I>
void run_with_products(product_context& ctx, std::size_t first, const Tup& outs,
                       std::index_sequence<I...> seq, const char* op) {
  constexpr const char* device_only =
      first_named({device_only_in<typename std::tuple_element_t<I, Tup>::expr_type>...});
  const kiln::shape& s = std::get<0>(outs).dst.shape();
  const bool on_host = std::get<0>(outs).dst.device().is_host();
  deferred_product* fused = nullptr;
  // (While a plan is captured, products run unfused: a plan records the product and its
  // consumer as two steps.)
  if (device_only == nullptr && recording_now() == nullptr &&
      ((std::get<I>(outs).dst.shape() == s) && ...)) {
    const std::array<flat_leaf, sizeof...(I)> targets{
        flat_leaf{std::get<I>(outs).dst.storage().get(), &std::get<I>(outs).dst.layout(),
                  dtype_of<typename std::tuple_element_t<I, Tup>::dst_type>()}...};
    for (std::size_t i = first; i < ctx.products.size(); ++i) {
      deferred_product* d = ctx.products[i].get();
      // (On a device the kernel converts the product to its type before the epilogue.)
      bool ok = !d->done() && (d->fusable() || !on_host) && d->result_shape() == s;
      for (const flat_leaf& t : targets)
        ok = ok && !d->reads(t);
      if (ok) {
        fused = d;
        break;
      }
    }
  }
  for (std::size_t i = first; i < ctx.products.size(); ++i)
    if (ctx.products[i].get() != fused) ctx.products[i]->compute();
  if (fused != nullptr) {
    if constexpr (device_only == nullptr) {
      if (outputs_in_place(outs, seq, op)) {
        if (!on_host) {
          if (device_fused(*fused, outs, seq)) return;
        } else {
          std::array<bool, sizeof...(I)> all;
          all.fill(true);
          host_run_pass_with(&fused_runner, fused, all, std::get<I>(outs)...);
          return;
        }
      }
    }
    fused->compute();
  }
  run_outputs(outs, seq, op);
}

// `dst = matmul(a, b)` of two tensors on the host, into a whole contiguous target of the
// result's shape and accumulator type that neither operand overlaps: the kernel straight into
// it, without the statement's deferred products (a small product's cost was a third that).
template <class E, class D>
inline constexpr bool direct_product = false;
template <element X, element Y, element D>
inline constexpr bool direct_product<matmul_node<tensor<X>, tensor<Y>>, D> =
    std::is_same_v<D, value_t<matmul_node<tensor<X>, tensor<Y>>>>&&
        std::is_same_v<D, matmul_acc_t<D>>;

template <element D, class X, class Y>
bool product_into(const tensor<D>& dst, const matmul_node<X, Y>& n) {
  if (!dst.is_contiguous() || dst.shape() != n.c.out || !n.a.device().is_host() ||
      !n.b.device().is_host())
    return false;
  const auto bytes = [](const auto& t) {
    return byte_range(flat_leaf{t.storage().get(), &t.layout(), dtype_of<value_t<decltype(t)>>()},
                      t.layout());
  };
  if (intersect(bytes(dst), bytes(n.a)) || intersect(bytes(dst), bytes(n.b))) return false;
  host_matmul(dst, n.a, n.b, n.c);
  return true;
}

// `dst = matmul(a, b)` on a device, of operand expressions whose leaves are on dst's device,
// into a whole contiguous target of the product's type that no leaf overlaps: the device's
// contraction kernel stores straight into it (no temporary and copy); false where it
// declines the shape.
template <class E, class D>
inline constexpr bool device_direct_product = false;
template <class X, class Y, element D>
inline constexpr bool device_direct_product<matmul_node<X, Y>, D> =
    plain_tree<X>&& plain_tree<Y>&& std::is_same_v<D, value_t<matmul_node<X, Y>>>;

template <element D, class X, class Y>
bool device_product_into(const tensor<D>& dst, const matmul_node<X, Y>& n) {
  // (While a plan is captured, device_matmul records the product: not this shortcut.)
  if (dst.device().is_host() || !dst.is_contiguous() || dst.shape() != n.c.out ||
      recording_now() != nullptr)
    return false;
  const flat_pass<X, Y> f(n.a, n.b);
  const flat_leaf target{dst.storage().get(), &dst.layout(), dtype_of<D>()};
  for (const flat_leaf& l : f.leaf_span())
    if (l.storage->device() != dst.device() ||
        (memory_of(*l.storage) == memory_of(*target.storage) &&
         intersect(byte_range(target, dst.layout()), byte_range(l, *l.layout))))
      return false;
  return device_contract(dst, n.a, n.b, n.c);
}

template <element D, class E>
void product_assign(const tensor<D>& dst, const E& e) {
  if constexpr (direct_product<E, D>)
    if (product_into(dst, e)) return;
  if constexpr (device_direct_product<E, D>)
    if (device_product_into(dst, e)) return;
  const statement_scope scope;
  product_context& ctx = statement_products();
  const own_products own(ctx);
  const std::size_t first = own.first();
  const auto m = materialize_top(e, ctx);
  if constexpr (is_tensor_v<std::remove_cvref_t<decltype(m)>>) { // dst = matmul(a, b)
    if (ctx.products.size() == first + 1 &&
        ctx.products[first]->compute_into(dst.storage(), dst.layout(), dtype_of<D>()))
      return;
  }
  run_with_products(ctx, first,
                    std::make_tuple(pass_output<D, std::remove_cvref_t<decltype(m)>>{dst, &m}),
                    std::index_sequence<0>{}, "assign");
}

template <class Ms, std::size_t... I, element... D, class... E>
void product_eval_with(product_context& ctx, std::size_t first, const Ms& ms,
                       std::index_sequence<I...> seq, pending_assign<D, E>&... p) {
  run_with_products(
      ctx, first,
      std::make_tuple(pass_output<D, std::remove_cvref_t<std::tuple_element_t<I, Ms>>>{
          p.target(), &std::get<I>(ms)}...),
      seq, "eval");
}

template <element... D, class... E>
void product_eval(pending_assign<D, E>&... p) {
  const statement_scope scope;
  product_context& ctx = statement_products();
  const own_products own(ctx);
  const std::size_t first = own.first();
  const std::tuple<decltype(materialized_top(p.expr(), ctx))...> ms(
      materialized_top(p.expr(), ctx)...);
  product_eval_with(ctx, first, ms, std::index_sequence_for<D...>{}, p...);
}

} // namespace kiln::detail

namespace kiln {
template <class A, class B>
KILN_STATEMENT auto materialize(const matmul_node<A, B>& n) {
  return detail::product_result(
      n, detail::statement_open() ? &detail::statement_products() : nullptr, false);
}
} // namespace kiln
