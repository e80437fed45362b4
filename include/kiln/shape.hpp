#pragma once
// kiln::shape: the extents of a tensor (at most max_rank dims, stored inline so shape
// arithmetic never allocates), and numpy broadcasting of shapes.
#include "kiln/error.hpp"
#include "kiln/linkage.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <type_traits>

namespace kiln {

inline constexpr int max_rank = 8;

template <class T>
class small_dims {
public:
  constexpr small_dims() = default;
  // A call where a shape is written as {2, 3}.
  KILN_STATEMENT small_dims(std::initializer_list<T> il) { assign(il.begin(), il.end()); }
  template <class It>
  requires(!std::is_integral_v<It>) small_dims(It first, It last) { assign(first, last); }
  explicit small_dims(int n, T v = T{}) {
    check_rank(n);
    n_ = n;
    std::fill(d_.begin(), d_.begin() + n, v);
  }

  int size() const noexcept { return n_; }
  bool empty() const noexcept { return n_ == 0; }
  T& operator[](int i) noexcept { return d_[static_cast<std::size_t>(i)]; }
  const T& operator[](int i) const noexcept { return d_[static_cast<std::size_t>(i)]; }
  T* begin() noexcept { return d_.data(); }
  T* end() noexcept { return d_.data() + n_; }
  const T* begin() const noexcept { return d_.data(); }
  const T* end() const noexcept { return d_.data() + n_; }
  T* data() noexcept { return d_.data(); }
  const T* data() const noexcept { return d_.data(); }
  T& back() noexcept { return d_[static_cast<std::size_t>(n_ - 1)]; }

  void push_back(T v) {
    check_rank(n_ + 1);
    d_[static_cast<std::size_t>(n_++)] = v;
  }
  void insert(int pos, T v) {
    check_rank(n_ + 1);
    for (int i = n_; i > pos; --i)
      d_[i] = d_[i - 1];
    d_[pos] = v;
    ++n_;
  }
  void erase(int pos) {
    for (int i = pos; i + 1 < n_; ++i)
      d_[i] = d_[i + 1];
    --n_;
  }
  void resize(int n, T v = T{}) {
    check_rank(n);
    for (int i = n_; i < n; ++i)
      d_[i] = v;
    n_ = n;
  }

  // A loop, not std::equal: that calls memcmp, whose call costs more than a short shape.
  friend bool operator==(const small_dims& a, const small_dims& b) noexcept {
    if (a.n_ != b.n_) return false;
    for (int i = 0; i < a.n_; ++i)
      if (a.d_[std::size_t(i)] != b.d_[std::size_t(i)]) return false;
    return true;
  }

  std::string str() const {
    std::string s = "[";
    for (int i = 0; i < n_; ++i)
      s += (i ? ", " : "") + std::to_string(d_[i]);
    return s + "]";
  }

private:
  static void check_rank(int n) {
    if (n > max_rank || n < 0)
      throw error("shape", "rank " + std::to_string(n) + " is not supported",
                  "kiln tensors have at most " + std::to_string(max_rank) + " dims");
  }
  template <class It>
  void assign(It first, It last) {
    const auto n = static_cast<int>(std::distance(first, last));
    check_rank(n);
    n_ = n;
    std::copy(first, last, d_.begin());
  }
  std::array<T, max_rank> d_{};
  int n_ = 0;
  int pad_ = 0; // no hole at the end (kiln/linkage.hpp)
};

using shape = small_dims<std::int64_t>;
using strides = small_dims<std::int64_t>;

// Unchecked: every shape held by a tensor or layout went through checked_numel first.
inline std::int64_t numel(const shape& s) noexcept {
  std::uint64_t n = 1; // unsigned: no undefined behaviour even for a shape not yet checked
  for (auto e : s)
    n *= static_cast<std::uint64_t>(e);
  return static_cast<std::int64_t>(n);
}

// The element count of a shape about to be used for a tensor or view, or a kiln::error
// naming `op`: a negative extent, or a count (or its size in bytes, for `elem_bytes`) that
// does not fit in int64, would otherwise wrap into a small or negative size.
KILN_CORE_INLINE std::int64_t checked_numel(const shape& s, const char* op,
                                            std::int64_t elem_bytes = 1);

namespace detail {
KILN_CORE_INLINE bool broadcast_general(shape& acc, const shape& s);
}

// numpy broadcasting: align on the right; a dim of 1 stretches. The common cases inline:
// equal shapes (an operand of its node's shape, a value of its target's) and a rank-0 acc
// (a node's first operand), which takes s as it is.
inline bool broadcast_into(shape& acc, const shape& s) {
  if (acc == s) return true;
  if (acc.empty()) {
    acc = s;
    return true;
  }
  return detail::broadcast_general(acc, s);
}

KILN_CORE_INLINE shape broadcast_shapes(const shape& a, const shape& b,
                                        const char* op = "broadcast");

// Normalizes a possibly negative axis against a rank, or throws naming the op.
KILN_CORE_INLINE int normalize_axis(std::int64_t axis, int rank, const char* op);

} // namespace kiln

#ifdef KILN_COMPILED_CORE
// The dims of shapes and strides, compiled once with the core (kiln/instances_impl.hpp).
extern template class kiln::small_dims<std::int64_t>;
#endif

#if KILN_CORE_DEFINITIONS
#include "kiln/shape_impl.hpp"
#endif
