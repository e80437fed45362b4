#pragma once
// The host evaluator: every way of assigning expressions to tensors goes through run_pass,
// one fused loop over the outputs' shape with no temporaries. The dispatch, in one place:
//   1. reductions inside the expression are computed first (materialize);
//   2. an output that overlaps an input through a different layout goes through a
//      temporary (same layout is safe: each element is read before it is written);
//   3. the operands' layouts are merged into the fewest dims (contiguous runs collapse),
//      so a contiguous expression is one linear loop;
//   4. the inner loop runs xsimd batches when every type in the tree shares one lane
//      width (lane_bytes), else scalar host() calls; strided and broadcast leaves
//      load per their inner stride;
//   5. large passes are split over the persistent thread pool.
#include "kiln/eval/memo.hpp"
#include "kiln/eval/readers.hpp"
#include "kiln/eval/stream.hpp"
#include "kiln/eval/thread_pool.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>

namespace kiln {

// Reductions inside an expression are evaluated first; every other node is kept.
template <element T>
const tensor<T>& materialize(const tensor<T>& t) {
  return t;
}
template <element T>
const scalar_expr<T>& materialize(const scalar_expr<T>& s) {
  return s;
}
template <class Op, class... C>
auto materialize(const expr_node<Op, C...>& n) {
  return hana::unpack(n.children, [](const auto&... c) {
    return expr_node<Op, std::remove_cvref_t<decltype(materialize(c))>...>(materialize(c)...);
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
  hana::for_each(n.children, [&](const auto& c) { visit_devices(c, f); });
}

namespace detail {

template <class E>
kiln::device device_of(const E& e) {
  kiln::device d;
  bool first = true;
  visit_devices(e, [&](const kiln::device& x) {
    if (first) d = x;
    first = false;
  });
  return d;
}

// Every leaf of e must live on `where`, the device of the target (or of the first leaf).
template <class E>
void check_devices(const E& e, const kiln::device& where, const char* op) {
  visit_devices(e, [&](const kiln::device& x) {
    if (x != where)
      throw error(op, "operands live on different devices",
                  "target on " + where.str() + ", an operand on " + x.str() +
                      "; move it with .to(" + where.str() + ")");
  });
}

// The GPU executor, defined by the JIT (jit/kiln/jit/backend/run_pass.hpp): outputs of one shape
// on one device, computed together, after the planner below has made sure that no target
// overlaps what any output reads (else everything goes through temporaries).
template <class... O>
void device_run(const O&... outs);

template <class E>
inline constexpr bool is_materialized =
    std::is_same_v<std::remove_cvref_t<decltype(materialize(std::declval<const E&>()))>, E>;

template <element D>
struct leaf_writer : row_cursor<D> {
  using row_cursor<D>::row;
  using row_cursor<D>::inner;
  template <class V>
  void store(std::int64_t j, V v) const noexcept {
    row[j * inner] = convert<D>(v);
  }
  template <bool Unit, bool Stream, class V>
  void store_batch(std::int64_t j, const batch<V>& b) const noexcept {
    const batch<D> d = batch_convert<D>(b);
    if constexpr (Stream) {
      stream_store(row + j, d);
    } else if (Unit || inner == 1) {
      d.store_unaligned(row + j);
    } else {
      alignas(64) D tmp[batch<D>::size];
      d.store_aligned(tmp);
      for (std::size_t k = 0; k < batch<D>::size; ++k)
        row[(j + std::int64_t(k)) * inner] = tmp[k];
    }
  }
};

// One output of a pass: where it goes and the expression that fills it.
template <element D, class E>
struct pass_output {
  using dst_type = D;
  using expr_type = E;
  tensor<D> dst;
  const E* expr;
};

// The merged iteration space of a pass: extents and, per operand (outputs first, then
// every tensor leaf in for_each_leaf order), its strides.
struct iteration_space {
  kiln::shape extents;
  std::vector<std::array<std::int64_t, max_rank>> strides;

  // An operand of an output this run leaves alone: strides 0, which merge with anything.
  void add_idle() { strides.push_back({}); }
  // Strides of l broadcast to `target` (which l must broadcast to).
  void add(const layout& l, const kiln::shape& target) {
    const layout b = views::broadcast_to(l, target, "assign");
    std::array<std::int64_t, max_rank> s{};
    std::copy(b.strides.begin(), b.strides.end(), s.begin());
    strides.push_back(s);
  }
  // Drop extent-1 dims and join neighbours that every operand walks contiguously.
  void merge(const kiln::shape& full) {
    const std::size_t n = strides.size();
    kiln::shape ext;
    std::vector<std::array<std::int64_t, max_rank>> out(n);
    for (int d = 0; d < full.size(); ++d) {
      if (full[d] == 1) continue;
      const int k = ext.size();
      ext.push_back(full[d]);
      for (std::size_t o = 0; o < n; ++o)
        out[o][k] = strides[o][d];
      bool join = k > 0;
      for (std::size_t o = 0; o < n && join; ++o)
        join = out[o][k - 1] == out[o][k] * full[d];
      if (join) { // dim k continues dim k-1 in every operand: fold it in
        ext[k - 1] *= full[d];
        for (std::size_t o = 0; o < n; ++o)
          out[o][k - 1] = out[o][k];
        ext.resize(k);
      }
    }
    if (ext.empty()) {
      ext.push_back(1);
      for (auto& st : out)
        st[0] = 0;
    }
    extents = ext;
    strides = std::move(out);
  }
};

template <class... Outs>
class pass {
public:
  static constexpr std::size_t n_outs = sizeof...(Outs);
  using mask = std::array<bool, n_outs>;

  explicit pass(Outs... outs) : outs_(std::move(outs)...) {}

  void run() {
    mask all;
    all.fill(true);
    run(all);
  }
  // Fills the outputs marked in `active` (which share a shape) and leaves the others: one
  // instantiation serves every group of outputs of one shape (run_outputs).
  void run(const mask& active) {
    const kiln::shape shape = active_shape(active);
    const std::int64_t total = numel(shape);
    if (total == 0) return;
    iteration_space space;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((active[I] ? space.add(std::get<I>(outs_).dst.layout(), shape) : space.add_idle()), ...);
      (for_each_leaf(*std::get<I>(outs_).expr,
                     [&](const auto& t) {
                       if (active[I])
                         space.add(t.layout(), shape);
                       else
                         space.add_idle();
                     }),
       ...);
    }
    (std::index_sequence_for<Outs...>{});
    space.merge(shape);
    const int rank = space.extents.size();
    const std::int64_t inner = space.extents[rank - 1];

    // Writers and reader trees, built once and copied into each task.
    std::size_t next_operand = 0;
    auto next = [&]() { return space.strides[next_operand++].data(); };
    // Braced lists: left to right (make_tuple's arguments have no order, and each writer
    // and reader takes the next operand's strides).
    auto writers = std::apply(
        [&](const auto&... o) { return std::tuple{make_writer(o.dst, next)...}; }, outs_);
    using roots = type_list<std::remove_cvref_t<decltype(*std::declval<Outs>().expr)>...>;
    auto readers = std::apply(
        [&](const auto&... o) { return std::tuple{make_memo_reader<roots>(*o.expr, next)...}; },
        outs_);
    std::apply([&](auto&... w) { ((w.inner = w.st[rank - 1]), ...); }, writers);
    std::apply([&](auto&... r) { (set_inner(r, rank - 1), ...); }, readers);
    // Shared subexpressions: equal memo readers share a slot (memo.hpp).
    int memo_slots = 0;
    {
      std::vector<memo_seen> seen;
      std::apply([&](auto&... r) { (index_memos(r, seen, memo_slots), ...); }, readers);
      std::vector<int> users(memo_slots);
      std::apply([&](auto&... r) { (count_memo_users(r, users, false), ...); }, readers);
      std::apply([&](auto&... r) { (count_memo_users(r, users, true), ...); }, readers);
    }

    // Enough elements per thread that waking a worker pays off; heavier trees split sooner.
    constexpr int cost =
        (node_count<std::remove_cvref_t<decltype(*std::declval<Outs>().expr)>> + ...);
    // (Waking a worker costs ~10-20 us; a cheap op streams ~5 elements/ns from cache.)
    const std::int64_t grain = std::max<std::int64_t>(16384, (1 << 19) / cost);
    const int threads = num_threads();
    // A few tasks per thread, taken dynamically, so a thread slowed by anything else on
    // its core does not leave the others idle at the end.
    const int tasks = threads == 1 ? 1
                                   : static_cast<int>(std::min<std::int64_t>(
                                         std::int64_t{threads} * 8, (total + grain - 1) / grain));
    // The common case, every operand contiguous along the inner dim, gets a loop with no
    // per-batch stride test.
    bool unit = true;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      unit = ((!active[I] || (std::get<I>(writers).inner == 1 && all_unit(std::get<I>(readers)))) &&
              ...);
    }
    (std::index_sequence_for<Outs...>{});
    // A pass too large for the last-level cache writes with streaming stores (stream.hpp).
    bool stream = false;
    if constexpr (all_lanes() != 0 &&
                  (math_count<std::remove_cvref_t<decltype(*std::declval<Outs>().expr)>> + ...) ==
                      0) {
      if (unit) {
        std::int64_t bytes = 0;
        [&]<std::size_t... I>(std::index_sequence<I...>) {
          (
              [&](const auto& o) {
                if (!active[I]) return;
                bytes += o.dst.size() * std::int64_t(sizeof(*o.dst.data()));
                for_each_leaf(*o.expr, [&](const auto& t) {
                  bytes += t.size() * std::int64_t(sizeof(*t.data()));
                });
              }(std::get<I>(outs_)),
              ...);
        }
        (std::index_sequence_for<Outs...>{});
        stream = bytes >= stream_threshold();
      }
    }
    auto body = [&](int t) {
      auto w = writers;
      auto r = readers;
      std::vector<memo_slot> slots(memo_slots);
      std::apply([&](auto&... x) { (bind_memos(x, slots.data()), ...); }, r);
      constexpr std::int64_t align = 64;
      std::int64_t lo = total * t / tasks / align * align,
                   hi = total * (t + 1) / tasks / align * align;
      if (t == tasks - 1) hi = total;
      if (stream) {
        run_range<true, true>(w, r, active, space.extents, lo, hi, inner);
        stream_fence();
      } else if (unit) {
        run_range<true, false>(w, r, active, space.extents, lo, hi, inner);
      } else {
        run_range<false, false>(w, r, active, space.extents, lo, hi, inner);
      }
    };
    if (tasks <= 1)
      body(0);
    else
      thread_pool::instance().parallel_for(tasks, body);
  }

private:
  template <element D, class Next>
  static leaf_writer<D> make_writer(const tensor<D>& t, Next& next) {
    leaf_writer<D> w;
    w.start(t.data(), next());
    return w;
  }

  static constexpr std::size_t all_lanes() {
    constexpr std::size_t bytes[] = {lane_bytes<decltype(*std::declval<Outs>().expr)>...};
    for (std::size_t b : bytes)
      if (b == 0 || b != bytes[0]) return 0;
    return bytes[0];
  }

  // The shape of the first output the run fills.
  kiln::shape active_shape(const mask& active) const {
    kiln::shape s;
    bool found = false;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((!found && active[I] ? (s = std::get<I>(outs_).dst.shape(), found = true) : false), ...);
    }
    (std::index_sequence_for<Outs...>{});
    return s;
  }

  template <bool Unit, bool Stream, class W, class R>
  static void run_range(W& w, R& r, const mask& active, const kiln::shape& ext, std::int64_t lo,
                        std::int64_t hi, std::int64_t inner) {
    const int outer = ext.size() - 1;
    std::int64_t idx[max_rank] = {};
    std::int64_t row = lo / inner, j = lo % inner;
    for (int d = outer - 1; d >= 0; --d) {
      idx[d] = row % ext[d];
      row /= ext[d];
    }
    for (std::int64_t e = lo; e < hi;) {
      std::apply([&](auto&... x) { (x.set_row(idx, outer), ...); }, w);
      std::apply([&](auto&... x) { (x.set_row(idx, outer), ...); }, r);
      const std::int64_t jend = std::min(inner, j + (hi - e));
      segment<Unit, Stream>(w, r, active, j, jend, std::index_sequence_for<Outs...>{});
      e += jend - j;
      j = 0;
      for (int d = outer - 1; d >= 0; --d) {
        if (++idx[d] < ext[d]) break;
        idx[d] = 0;
      }
    }
  }

  // Whether output I is filled: always in a one-output pass (no test in its loop).
  template <std::size_t I>
  static bool on(const mask& active) {
    if constexpr (n_outs == 1)
      return true;
    else
      return active[I];
  }

  template <bool Unit, bool Stream, class W, class R, std::size_t... I>
  static void segment(W& w, R& r, const mask& active, std::int64_t j, std::int64_t jend,
                      std::index_sequence<I...>) {
    constexpr std::size_t lb = all_lanes();
    if constexpr (lb != 0 && (simd_dst<I>() && ...)) {
      constexpr std::int64_t n =
          static_cast<std::int64_t>(batch<typename std::tuple_element_t<0, R>::value_type>::size);
      for (; j + n <= jend; j += n) {
        // All values of a position are computed before any is stored, so an output
        // that is also an input (same layout) is read before it is overwritten.
        const auto vals =
            std::make_tuple((on<I>(active) ? std::get<I>(r).template load<Unit>(j)
                                           : decltype(std::get<I>(r).template load<Unit>(j))())...);
        ((on<I>(active) ? std::get<I>(w).template store_batch<Unit, Stream>(j, std::get<I>(vals))
                        : void()),
         ...);
      }
      // The tail goes through the same SIMD arithmetic, one element per batch, so an
      // element's value does not depend on where a thread's range happened to end.
      for (; j < jend; ++j) {
        const auto vals =
            std::make_tuple((on<I>(active) ? first_lane(std::get<I>(r).splat(j))
                                           : decltype(first_lane(std::get<I>(r).splat(j)))())...);
        ((on<I>(active) ? std::get<I>(w).store(j, std::get<I>(vals)) : void()), ...);
      }
    } else { // where batches run they do the tail too: no third copy of a large tree to compile
      for (; j < jend; ++j) {
        const auto vals = std::make_tuple(
            (on<I>(active) ? std::get<I>(r).at(j) : decltype(std::get<I>(r).at(j))())...);
        ((on<I>(active) ? std::get<I>(w).store(j, std::get<I>(vals)) : void()), ...);
      }
    }
  }

  template <std::size_t I>
  static constexpr bool simd_dst() {
    using O = std::tuple_element_t<I, std::tuple<Outs...>>;
    using D = std::remove_cvref_t<decltype(std::declval<O>().dst.data()[0])>;
    return simd_element<D> && sizeof(D) == all_lanes();
  }

  std::tuple<Outs...> outs_;
};

template <element D, class E>
void check_target(const tensor<D>& dst, const E& e, const char* op) {
  if (dst.empty()) throw error(op, "the target tensor is empty", "it has no storage");
  const kiln::shape& s = shape_of(e);
  kiln::shape b = dst.shape();
  if (!broadcast_into(b, s) || b != dst.shape())
    throw error(op, "shapes cannot be broadcast together",
                "value of shape " + s.str() + " into a tensor of shape " + dst.shape().str());
  for (int d = 0; d < dst.rank() && dst.size() > 0; ++d) // an empty tensor has no overlap
    if (dst.strides()[d] == 0 && dst.shape()[d] > 1)
      throw error(op, "cannot write through a broadcast view",
                  "target shape " + dst.shape().str() + " has stride 0 on dim " +
                      std::to_string(d));
}

// The planner, one for the host and every device: which outputs may be computed in place
// and which need temporaries. Overlap is decided on memory, not storage objects: on the
// host on addresses (two handles made by view_of() over one container have separate
// storage objects over the same memory), on a device on the backend's buffer and byte
// offsets within it.

// The memory a storage lives in, for overlap tests: its address on the host, its buffer
// handle on a device (offsets then count from the buffer's start).
inline const void* memory_of(const storage& s) { return s.on_host() ? s.data() : s.handle(); }

// The bytes [first, second) a layout over t's storage touches, from the memory's start.
template <class T>
std::pair<std::uintptr_t, std::uintptr_t> byte_range(const tensor<T>& t, const layout& l) {
  const auto [lo, hi] = l.extent();
  const auto base = t.storage()->on_host() ? reinterpret_cast<std::uintptr_t>(t.storage()->data())
                                           : std::uintptr_t{0};
  return {base + static_cast<std::uintptr_t>(lo) * sizeof(T),
          base + static_cast<std::uintptr_t>(hi) * sizeof(T)};
}
inline bool intersect(std::pair<std::uintptr_t, std::uintptr_t> a,
                      std::pair<std::uintptr_t, std::uintptr_t> b) {
  return a.first < a.second && b.first < b.second && a.first < b.second && b.first < a.second;
}
// Whether a (through layout la) and b (through lb) share any byte.
template <class A, class B>
bool share_bytes(const tensor<A>& a, const layout& la, const tensor<B>& b, const layout& lb) {
  if (a.empty() || b.empty() || a.device() != b.device()) return false;
  if (!a.device().is_host() && memory_of(*a.storage()) != memory_of(*b.storage())) return false;
  return intersect(byte_range(a, la), byte_range(b, lb));
}

// Would writing dst while reading e's leaves read an element after it was overwritten?
// Reading the very elements being written, each at its own position, is safe.
template <element D, class E>
bool overlaps_differently(const tensor<D>& dst, const E& e) {
  bool bad = false;
  for_each_leaf(e, [&](const auto& t) {
    using T = typename std::remove_cvref_t<decltype(t)>::value_type;
    if (bad || t.empty() || t.size() == 0) return;
    const layout tl = views::broadcast_to(t.layout(), dst.shape(), "assign");
    if (sizeof(T) == sizeof(D) && memory_of(*t.storage()) == memory_of(*dst.storage()) &&
        tl == dst.layout())
      return;
    bad = share_bytes(dst, dst.layout(), t, tl);
  });
  return bad;
}

// Runs outputs that share a shape and need no temporaries, where they live.
template <class... O>
void execute(const O&... outs) {
  if (std::get<0>(std::forward_as_tuple(outs...)).dst.device().is_host())
    pass(outs...).run();
  else
    device_run(outs...);
}

template <element D, class E>
void assign(const tensor<D>& dst, const E& e) {
  if (!dst.empty()) check_devices(e, dst.device(), "assign");
  if constexpr (!is_materialized<E>) {
    assign(dst, materialize(e));
  } else {
    check_target(dst, e, "assign");
    if (overlaps_differently(dst, e)) {
      tensor<value_t<E>> tmp(shape_of(e), dst.device());
      execute(pass_output<value_t<E>, E>{tmp, &e});
      execute(pass_output<D, tensor<value_t<E>>>{dst, &tmp});
      return;
    }
    execute(pass_output<D, E>{dst, &e});
  }
}

template <class O, class Tup, std::size_t... J>
bool overlaps_any(const O& o, const Tup& outs, std::index_sequence<J...>) {
  auto targets_overlap = [&](const auto& other) {
    if (static_cast<const void*>(&o) == static_cast<const void*>(&other)) return false;
    return share_bytes(o.dst, o.dst.layout(), other.dst, other.dst.layout());
  };
  return ((overlaps_differently(o.dst, *std::get<J>(outs).expr) ||
           targets_overlap(std::get<J>(outs))) ||
          ...);
}

// Whether dst shares any byte with e's leaves (through any layout).
template <element D, class E>
bool reads_memory_of(const tensor<D>& dst, const E& e) {
  bool hit = false;
  for_each_leaf(e, [&](const auto& t) {
    if (!hit && t.size() > 0) hit = share_bytes(dst, dst.layout(), t, t.layout());
  });
  return hit;
}

// Outputs of several shapes run as one pass per shape (the same instantiated pass, with
// the others left idle). A later group would read what an earlier one wrote if a target
// shared memory with another output's inputs or target: then everything goes through
// temporaries, so every value is computed from the inputs as they were before kiln::eval.
template <class Tup, std::size_t... I>
bool groups_interfere(const Tup& outs, std::index_sequence<I...>) {
  bool hit = false;
  auto one = [&](const auto& o) {
    auto other = [&](const auto& p) {
      if (static_cast<const void*>(&o) == static_cast<const void*>(&p)) return false;
      return reads_memory_of(o.dst, *p.expr) ||
             share_bytes(o.dst, o.dst.layout(), p.dst, p.dst.layout());
    };
    hit = hit || overlaps_differently(o.dst, *o.expr) || (other(std::get<I>(outs)) || ...);
  };
  (one(std::get<I>(outs)), ...);
  return hit;
}

template <class P, std::size_t N>
void run_by_shape(P& p, const std::array<kiln::shape, N>& shapes) {
  std::array<bool, N> done{};
  for (std::size_t first = 0; first < N; ++first) {
    if (done[first]) continue;
    std::array<bool, N> group{};
    for (std::size_t i = first; i < N; ++i)
      if (!done[i] && shapes[i] == shapes[first]) group[i] = done[i] = true;
    p.run(group);
  }
}

template <class Tup, std::size_t... I>
void run_outputs(const Tup& outs, std::index_sequence<I...> seq);

// On a GPU device, outputs of several shapes: those that are a copy of a tensor (a
// reduction's result after materialize, as a rank-0 loss beside its gradients) are set
// apart, and the others run as one kernel (they must share a shape). The copies' values
// are taken before and written after it.
template <class Tup, std::size_t... I>
void device_split(const Tup& outs, std::index_sequence<I...>) {
  static constexpr bool copy[] = {is_tensor_v<typename std::tuple_element_t<I, Tup>::expr_type>...};
  static constexpr std::size_t n_fused = (std::size_t{!copy[I]} + ...);
  std::string shapes;
  ((shapes += (I ? ", " : "") + std::get<I>(outs).dst.shape().str()), ...);
  const auto mixed = [&] {
    return error("eval",
                 "on a GPU device, the outputs of one kiln::eval must have one shape (a "
                 "reduction's result excepted)",
                 "shapes " + shapes + " on " + std::get<0>(outs).dst.device().str());
  };
  if constexpr (n_fused == sizeof...(I)) {
    throw mixed();
  } else {
    static constexpr auto fused = [] {
      std::array<std::size_t, n_fused> a{};
      std::size_t k = 0;
      for (std::size_t i = 0; i < sizeof...(I); ++i)
        if (!copy[i]) a[k++] = i;
      return a;
    }();
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      if constexpr (sizeof...(K) > 0)
        if (!((std::get<fused[K]>(outs).dst.shape() == std::get<fused[0]>(outs).dst.shape()) &&
              ...))
          throw mixed();
    }
    (std::make_index_sequence<n_fused>{});
    const auto values = std::make_tuple([&] {
      if constexpr (copy[I])
        return std::get<I>(outs).expr->clone();
      else
        return 0;
    }()...);
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      if constexpr (sizeof...(K) > 0)
        run_outputs(std::make_tuple(std::get<fused[K]>(outs)...), std::index_sequence<K...>{});
    }
    (std::make_index_sequence<n_fused>{});
    (
        [&] {
          if constexpr (copy[I]) {
            using O = std::tuple_element_t<I, Tup>;
            const auto& v = std::get<I>(values);
            run_outputs(
                std::make_tuple(pass_output<typename O::dst_type, std::remove_cvref_t<decltype(v)>>{
                    std::get<I>(outs).dst, &v}),
                std::index_sequence<0>{});
          }
        }(),
        ...);
  }
}

// Runs outputs that need no temporaries: of one shape, as execute(); of several, on the
// host one pass per shape, on a device device_split.
template <class Tup, std::size_t... I>
void execute_outputs(const Tup& outs, std::index_sequence<I...> seq) {
  const kiln::shape& s = std::get<0>(outs).dst.shape();
  if (((std::get<I>(outs).dst.shape() == s) && ...)) {
    execute(std::get<I>(outs)...);
  } else if (std::get<0>(outs).dst.device().is_host()) {
    pass p(std::get<I>(outs)...);
    run_by_shape(p, std::array<kiln::shape, sizeof...(I)>{std::get<I>(outs).dst.shape()...});
  } else {
    if constexpr (sizeof...(I) > 1) device_split(outs, seq);
  }
}

// Every output of a kiln::eval is computed from the values before the call (numpy's
// semantics), on the host and on a device alike: where a target overlaps an input or
// another target through a different layout (one shape), or shares memory with another
// output's inputs or target (several shapes, computed in groups), every output is computed
// into a temporary first, then copied.
template <class Tup, std::size_t... I>
void run_outputs(const Tup& outs, std::index_sequence<I...> seq) {
  const kiln::shape s = std::get<0>(outs).dst.shape();
  const kiln::device where = std::get<0>(outs).dst.device();
  auto check = [&](const auto& o) {
    if (o.dst.device() != where)
      throw error("eval", "outputs live on different devices",
                  where.str() + " and " + o.dst.device().str());
    check_devices(*o.expr, where, "eval");
    check_target(o.dst, *o.expr, "eval");
  };
  (check(std::get<I>(outs)), ...);
  const bool one_shape = ((std::get<I>(outs).dst.shape() == s) && ...);
  if (one_shape ? !(overlaps_any(std::get<I>(outs), outs, seq) || ...)
                : !groups_interfere(outs, seq)) {
    execute_outputs(outs, seq);
    return;
  }
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

// Copies what materialize returned (a leaf reference or a new node) into a value.
template <class E>
std::remove_cvref_t<E> evaluate_leaf_copy(E&& e) {
  return std::forward<E>(e);
}

template <class E>
tensor<value_t<E>> evaluate(const E& e) {
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
std::vector<value_t<E>> to_vector(const E& e) {
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
      std::make_tuple(pass_output<D, std::tuple_element_t<I, Ms>>{p.target(), &std::get<I>(ms)}...);
  run_outputs(outs, seq);
}
} // namespace detail

// Several outputs in one pass: kiln::eval(r1 = e1, r2 = e2). All targets must have one
// shape. If a target overlaps an input or another target through a different layout,
// every output is computed into a temporary first.
template <element... D, class... E>
void eval(pending_assign<D, E>&&... p) {
  static_assert(sizeof...(D) >= 1, "kiln::eval needs at least one assignment");
  (p.mark_done(), ...);
  auto ms = std::make_tuple(detail::evaluate_leaf_copy(materialize(p.expr()))...);
  detail::eval_with(ms, std::index_sequence_for<D...>{}, p...);
}

} // namespace kiln

#include "kiln/eval/device_pass.hpp"
