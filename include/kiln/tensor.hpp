#pragma once
// tensor<T>: a ref-counted handle to storage + layout + device. Copying a handle shares
// the storage (views too); assigning to a tensor writes values into its storage, so
// `a = a * 2 + b` works in place and `t.narrow(0, 1, 2) = e` writes through the view.
#include "kiln/expr.hpp"
#include "kiln/layout.hpp"
#include "kiln/plan/capture_state.hpp"
#include "kiln/storage.hpp"

#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <vector>

namespace kiln {

// Index arguments of tensor::operator(): an integer selects (and drops the dim),
// range{start, stop, step} slices like numpy, all keeps a dim, newaxis inserts one.
struct range {
  std::int64_t start = 0;
  std::int64_t stop = std::numeric_limits<std::int64_t>::max();
  std::int64_t step = 1;
};
// Which axes a reduction folds; none given means all of them.
struct axes {
  small_dims<std::int64_t> list;
  bool everything = true;
  // Inline: a few stores. Out of line, the call took the temporary's address, and g++'s
  // points-to analysis then counted it at every call of the function that wrote it.
  axes() noexcept {}
  axes(std::int64_t a) : everything(false) { list.push_back(a); } // rank 1: no check left
  KILN_STATEMENT axes(std::initializer_list<std::int64_t> l) : list(l), everything(false) {}
};
// `all` keeps a whole dim when indexing; called, it is the all() reduction (reduce.hpp).
struct all_t {
  template <class X>
  requires expression<X>
  auto operator()(X&& x, kiln::axes over = {}, bool keepdims = false) const;
};
inline constexpr all_t all{};
struct newaxis_t {};
inline constexpr newaxis_t newaxis{};

template <class I>
concept index_arg =
    std::is_integral_v<std::remove_cvref_t<I>> || std::is_same_v<std::remove_cvref_t<I>, range> ||
    std::is_same_v<std::remove_cvref_t<I>, all_t> ||
    std::is_same_v<std::remove_cvref_t<I>, newaxis_t>;

template <element T, class E>
class pending_assign;

namespace detail {
// Defined by the host evaluator (eval/assign.hpp).
template <element T, class E>
void assign(const tensor<T>& dst, const E& e);
template <class E>
tensor<value_t<E>> evaluate(const E& e);
template <class E>
std::vector<value_t<E>> to_vector(const E& e);
// A new tensor<T> holding e's values (tensor<T> t = e).
template <element T, class E>
tensor<T> construct(const E& e);
// The device an expression's leaves live on (host for an expression of scalars only); a
// mix of devices is checked where the expression is evaluated.
template <class E>
kiln::device device_of(const E& e);

// May values of type From be stored into a tensor<To> without an explicit cast?
template <class From, class To>
inline constexpr bool assignable = category(dtype_of<From>()) <= category(dtype_of<To>());

template <class From, class To>
constexpr void check_assignable() {
  static_assert(assignable<From, To>, "kiln: storing this expression would narrow its type (float "
                                      "to integer, or number to bool); wrap it in cast<T>()");
}
} // namespace detail

template <class Derived>
struct expression_base {
  const Derived& self() const { return static_cast<const Derived&>(*this); }
  // Evaluate now into a new tensor.
  auto eval() const { return detail::evaluate(self()); }
  kiln::shape shape() const { return shape_of(self()); }
  auto to_vector() const { return detail::to_vector(self()); }
  KILN_STATEMENT auto item() const { return eval().item(); }
  // Evaluate, then move to `dev`. Evaluation runs where the leaves live (a target on
  // another device would be an error), so where that is `dev` the result is made there
  // and not copied; otherwise it is copied once.
  KILN_STATEMENT auto to(const kiln::device& dev) const { return eval().to(dev); }
};

template <class T>
class tensor {
  static_assert(is_element_v<T>, "kiln: unsupported element type; a tensor holds bool, uint8_t, "
                                 "int32_t, uint32_t, int64_t, half, bfloat16, float or double");

public:
  using value_type = T;

  // An empty handle: no storage. Assigning an expression to it allocates.
  tensor() : p_() {}
  // Out of line: an expression holds its tensors by value, and copying or destroying a
  // gradient's tree inlined a reference count and two shapes per leaf into every node's
  // constructor (half the object code of a file of Greeks, and its build time).
  [[gnu::noinline]] tensor(const tensor& o) : p_(o.p_) {}
  [[gnu::noinline]] tensor(tensor&& o) noexcept : p_(std::move(o.p_)) {}
  [[gnu::noinline]] ~tensor() { p_.~parts(); }

  // Uninitialized storage of the given shape (see kiln::empty); errors name `op`.
  explicit tensor(const kiln::shape& s, const kiln::device& dev = {}, const char* op = "alloc")
      : p_{make_storage(s, dev, op), layout::contiguous(s)} {}

  tensor(std::shared_ptr<kiln::storage> st, kiln::layout l) : p_{std::move(st), std::move(l)} {}

  // Evaluating constructor: `tensor<float> z = expr;` runs one fused pass.
  template <class E>
  requires(expression<E> && !std::is_same_v<std::remove_cvref_t<E>, tensor>) tensor(const E& e)
      : tensor(detail::construct<T>(e)) {
    detail::check_assignable<value_t<E>, T>();
  }

  // Assignment writes values (see the file comment). An empty tensor, or a whole
  // contiguous tensor whose shape differs, takes new storage of the source's shape.
  tensor& operator=(const tensor& other) & {
    if (this == &other) return *this;
    other.require_storage("assign");
    prepare_for(other.shape(), other.device());
    detail::assign(*this, other);
    return *this;
  }
  tensor& operator=(tensor&& other) & {
    if (!p_.storage) {
      p_.storage = std::move(other.p_.storage);
      p_.layout = std::move(other.p_.layout);
      return *this;
    }
    return *this = static_cast<const tensor&>(other);
  }
  // Writing through a temporary view: `t.narrow(0, 1, 2) = other;`
  tensor& operator=(const tensor& other) && {
    require_storage("assign");
    other.require_storage("assign");
    detail::assign(*this, other);
    return *this;
  }

  // Assigning an expression defers the pass to the end of the statement, so that
  // kiln::eval(r1 = e1, r2 = e2) can fuse several outputs into one pass.
  template <class E>
  requires(expression<E> && !std::is_same_v<std::remove_cvref_t<E>, tensor>)
      pending_assign<T, std::remove_cvref_t<E>>
  operator=(E&& e) & {
    detail::check_assignable<value_t<E>, T>();
    prepare_for(shape_of(e), detail::device_of(e));
    return {*this, std::forward<E>(e)};
  }
  template <class E>
  requires(expression<E> && !std::is_same_v<std::remove_cvref_t<E>, tensor>)
      pending_assign<T, std::remove_cvref_t<E>>
  operator=(E&& e) && {
    detail::check_assignable<value_t<E>, T>();
    return {std::move(*this), std::forward<E>(e)};
  }
  // Fill with a scalar.
  template <scalar S>
  tensor& operator=(S v) {
    if (!p_.storage)
      throw error("assign", "tensor is empty", "cannot fill it: give it a shape first");
    detail::assign(*this, scalar_expr<T>(convert<T>(static_cast<scalar_element_t<S>>(v))));
    return *this;
  }

  template <class X>
  tensor& operator+=(const X& x) {
    return compound(*this + x);
  }
  template <class X>
  tensor& operator-=(const X& x) {
    return compound(*this - x);
  }
  template <class X>
  tensor& operator*=(const X& x) {
    return compound(*this * x);
  }
  template <class X>
  tensor& operator/=(const X& x) {
    return compound(*this / x);
  }

  // --- what it is
  bool empty() const noexcept { return !p_.storage; }
  const kiln::shape& shape() const noexcept { return p_.layout.shape; }
  const kiln::strides& strides() const noexcept { return p_.layout.strides; }
  std::int64_t offset() const noexcept { return p_.layout.offset; }
  const kiln::layout& layout() const noexcept { return p_.layout; }
  int rank() const noexcept { return p_.layout.rank(); }
  std::int64_t size() const noexcept { return p_.layout.size(); }
  std::int64_t dim(std::int64_t d) const {
    return p_.layout.shape[normalize_axis(d, rank(), "dim")];
  }
  static constexpr kiln::dtype dtype() noexcept { return dtype_of<T>(); }
  kiln::device device() const noexcept {
    return p_.storage ? p_.storage->device() : kiln::device{};
  }
  bool is_contiguous() const noexcept { return p_.layout.is_contiguous(); }
  const std::shared_ptr<kiln::storage>& storage() const noexcept { return p_.storage; }
  // The element at the layout's offset; with strides(), addresses every element. Null for
  // an empty handle; a tensor on a device has no host address: a kiln::error, not a pointer
  // that crashes the first read (copy it with .to(kiln::device{})).
  T* data() const {
    if (p_.storage && !p_.storage->on_host())
      throw error("data", "the tensor lives on a device, not in host memory",
                  device().str() + "; read it through a host copy: .to(kiln::device{})");
    return p_.storage && p_.storage->data() ? static_cast<T*>(p_.storage->data()) + p_.layout.offset
                                            : nullptr;
  }

  // --- reading (host)
  KILN_STATEMENT T item() const {
    detail::refuse_if_capturing("item", reads_values);
    require_storage("item");
    if (size() != 1)
      throw error("item", "tensor is not a scalar",
                  "shape " + shape().str() + " has " + std::to_string(size()) + " elements");
    return read_element(0);
  }
  std::vector<T> to_vector() const { return detail::to_vector(*this); }
  // One element by multi-index (bounds-checked).
  KILN_STATEMENT T at(std::initializer_list<std::int64_t> idx) const {
    detail::refuse_if_capturing("at", reads_values);
    require_storage("at");
    if (static_cast<int>(idx.size()) != rank())
      throw error("at", "wrong number of indices",
                  std::to_string(idx.size()) + " for shape " + shape().str());
    std::int64_t off = 0;
    int d = 0;
    for (auto i : idx) {
      if (i < 0 || i >= p_.layout.shape[d])
        throw error("at", "index out of range",
                    "index " + std::to_string(i) + " on dim " + std::to_string(d) + " of shape " +
                        shape().str());
      off += i * p_.layout.strides[d++];
    }
    return read_element(off);
  }
  tensor eval() const { return *this; }

  // --- moving between devices: a copy on `dev` (this tensor if it already lives there).
  // Reading a device tensor waits for the work queued before it; writing one does not.
  KILN_STATEMENT tensor to(const kiln::device& dev) const {
    require_storage("to");
    if (dev == device()) return *this;
    detail::refuse_if_capturing("to", "a copy between devices is not captured yet");
    if (!device().is_host() && !dev.is_host()) return to(kiln::device{}).to(dev);
    const tensor src = is_contiguous() ? *this : clone(); // contiguous, on our device
    tensor r(shape(), dev, "to");
    const std::size_t bytes = static_cast<std::size_t>(size()) * sizeof(T);
    if (bytes == 0) return r;
    if (dev.is_host())
      src.p_.storage->backend()->read(src.p_.storage->handle(), src.offset() * sizeof(T), r.data(),
                                      bytes);
    else
      r.p_.storage->backend()->write(r.p_.storage->handle(), 0, src.data(), bytes);
    return r;
  }

  // --- views: no copy, writes go to the same storage. Views, item(), at(), to() and clone()
  // are calls, not inlined code, in the function that uses them.
  KILN_STATEMENT tensor reshape(const kiln::shape& s) const {
    require_storage("reshape");
    auto l = views::try_reshape(p_.layout, s);
    if (!l)
      throw error("reshape", "this layout cannot be viewed with the new shape",
                  "shape " + shape().str() + " with strides " + strides().str() + " to " + s.str() +
                      "; call contiguous() first");
    return view(*l);
  }
  KILN_STATEMENT tensor transpose() const {
    return view("transpose", [&] { return views::transpose(p_.layout); });
  }
  KILN_STATEMENT tensor permute(std::initializer_list<std::int64_t> perm) const {
    return view("permute",
                [&] { return views::permute(p_.layout, std::span(perm.begin(), perm.size())); });
  }
  KILN_STATEMENT tensor narrow(std::int64_t dim, std::int64_t start, std::int64_t len) const {
    return view("narrow", [&] { return views::narrow(p_.layout, dim, start, len); });
  }
  KILN_STATEMENT tensor slice(std::int64_t dim, std::int64_t start, std::int64_t stop,
                              std::int64_t step = 1) const {
    return view("slice", [&] { return views::slice(p_.layout, dim, start, stop, step); });
  }
  KILN_STATEMENT tensor squeeze() const {
    return view("squeeze", [&] { return views::squeeze(p_.layout); });
  }
  KILN_STATEMENT tensor squeeze(std::int64_t dim) const {
    return view("squeeze", [&] { return views::squeeze(p_.layout, dim); });
  }
  KILN_STATEMENT tensor unsqueeze(std::int64_t dim) const {
    return view("unsqueeze", [&] { return views::unsqueeze(p_.layout, dim); });
  }
  KILN_STATEMENT tensor broadcast_to(const kiln::shape& s) const {
    return view("broadcast_to", [&] { return views::broadcast_to(p_.layout, s); });
  }
  // t(1, kiln::all, kiln::range{0, 8, 2}, kiln::newaxis)
  template <index_arg... I>
  KILN_STATEMENT tensor operator()(I... idx) const {
    require_storage("index");
    kiln::layout l = p_.layout;
    int dim = 0;
    const int given = ((std::is_same_v<I, newaxis_t> ? 0 : 1) + ... + 0);
    if (given > rank())
      throw error("index", "too many indices",
                  std::to_string(given) + " for shape " + shape().str());
    (apply_index(l, dim, idx), ...);
    return view(l);
  }

  // A contiguous tensor with the same values: this one if it already is, else a copy.
  tensor contiguous() const { return is_contiguous() ? *this : clone(); }
  // A new contiguous tensor with a copy of the values.
  KILN_STATEMENT tensor clone() const {
    require_storage("clone");
    tensor r(shape(), device());
    detail::assign(r, *this);
    return r;
  }

private:
  static constexpr const char* reads_values =
      "it reads a value on the host, and a replay runs no host code: a plan's steps cannot "
      "depend on values (read results after the call)";
  // Storage for a contiguous tensor of shape s. The count and the byte size are checked
  // (a wrapped size would be a small buffer indexed as a huge one), and every failure,
  // the backend's and the host's bad_alloc too, is reported as `op` with the shape.
  static std::shared_ptr<kiln::storage> make_storage(const kiln::shape& s, const kiln::device& dev,
                                                     const char* op) {
    const std::int64_t n = checked_numel(s, op, sizeof(T));
    try {
      auto st = std::make_shared<kiln::storage>(dtype_of<T>(), n, dev);
      if (detail::recording_now() != nullptr) [[unlikely]]
        detail::note_made_storage(st); // a captured function's temporary: the plan keeps it
      return st;
    } catch (const error& e) {
      throw error(op, e.reason(),
                  e.details() + "; shape " + s.str() + " of " + std::string(name(dtype())));
    } catch (const std::bad_alloc&) {
      throw error(op, "out of host memory",
                  "shape " + s.str() + " of " + std::string(name(dtype())) + ": " +
                      std::to_string(n * static_cast<std::int64_t>(sizeof(T))) + " bytes");
    }
  }
  // The element `off` elements past the layout's offset; a device tensor waits to read it.
  T read_element(std::int64_t off) const {
    if (p_.storage->on_host()) return data()[off];
    T v;
    p_.storage->backend()->read(p_.storage->handle(), (p_.layout.offset + off) * sizeof(T), &v,
                                sizeof(T));
    return v;
  }
  tensor view(kiln::layout l) const { return tensor(p_.storage, std::move(l)); }
  // A view of a handle with storage: an empty handle's rank-0 layout would read as one element.
  template <class F>
  tensor view(const char* op, F&& make_layout) const {
    require_storage(op);
    return tensor(p_.storage, make_layout());
  }
  void require_storage(const char* op) const {
    if (!p_.storage) throw error(op, "tensor is empty", "it has no storage");
  }
  // Before writing values of shape s: allocate if empty. Values that broadcast to this
  // shape are written in place; otherwise a whole tensor takes new storage of shape s
  // (like resizing) and a view is left to fail with a shape error.
  // An empty tensor takes new storage on the values' device.
  void prepare_for(const kiln::shape& s, const kiln::device& values_on) {
    if (p_.storage) {
      kiln::shape b = shape();
      if (shape() == s || (broadcast_into(b, s) && b == shape()) || !is_whole()) return;
    }
    p_.storage = make_storage(s, p_.storage ? device() : values_on, "assign");
    p_.layout = layout::contiguous(s);
  }
  bool is_whole() const noexcept {
    return p_.layout.offset == 0 && is_contiguous() && p_.storage->count() == size();
  }
  template <class E>
  tensor& compound(const E& e) {
    detail::assign(*this, e);
    return *this;
  }
  template <class I>
  static void apply_index(kiln::layout& l, int& dim, I idx) {
    if constexpr (std::is_same_v<I, newaxis_t>) {
      l = views::unsqueeze(l, dim++);
    } else if constexpr (std::is_same_v<I, all_t>) {
      ++dim;
    } else if constexpr (std::is_same_v<I, range>) {
      l = views::slice(l, dim++, idx.start, idx.stop, idx.step);
    } else {
      l = views::select(l, dim, static_cast<std::int64_t>(idx));
    }
  }

  struct parts {
    std::shared_ptr<kiln::storage> storage;
    kiln::layout layout;
  };
  // In a union: g++'s points-to analysis then counts a tensor as one variable, not one per
  // field; its cost grows with variables times calls in a function (see expr_node).
  union {
    parts p_;
  };
};

// The deferred `tensor = expression` (see tensor::operator=): runs at the end of the
// statement unless kiln::eval took it to fuse with other outputs. A named target is held by
// reference: a pending_assign can be neither copied nor moved, so it ends in the scope of
// the statement that made it, before the target (a handle copied here cost a reference
// count per statement). A temporary target, a view (`t.narrow(0, 1, 2) = e`), is copied:
// `auto p = (t.narrow(0, 1, 2) = e);` keeps the pending assignment past the view's end.
template <element T, class E>
class pending_assign {
public:
  template <class X>
  pending_assign(const tensor<T>& dst, X&& e) : dst_(&dst), expr_(std::forward<X>(e)) {
    check();
  }
  template <class X> // (copied, not moved from: `std::move(t) = e` must leave t as it is)
  pending_assign(tensor<T>&& dst, X&& e) : owned_(dst), dst_(&*owned_), expr_(std::forward<X>(e)) {
    check();
  }
  pending_assign(const pending_assign&) = delete;
  pending_assign& operator=(const pending_assign&) = delete;
  ~pending_assign() noexcept(false) {
    // Never throw while another exception unwinds the stack.
    if (!done_ && std::uncaught_exceptions() == uncaught_) detail::assign(*dst_, expr_);
  }
  const tensor<T>& target() const noexcept { return *dst_; }
  const E& expr() const noexcept { return expr_; }
  void mark_done() noexcept { done_ = true; }

private:
  void check() const {
    if (dst_->empty()) throw error("assign", "tensor is empty", "the target has no storage");
  }
  std::optional<tensor<T>> owned_;
  const tensor<T>* dst_;
  E expr_;
  bool done_ = false;
  int uncaught_ = std::uncaught_exceptions();
};

template <class>
inline constexpr bool is_tensor_v = false;
template <element T>
inline constexpr bool is_tensor_v<tensor<T>> = true;

} // namespace kiln
