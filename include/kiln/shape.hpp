#pragma once
// kiln::shape: the extents of a tensor (at most max_rank dims, stored inline so shape
// arithmetic never allocates), and numpy broadcasting of shapes.
#include "kiln/error.hpp"

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
  small_dims(std::initializer_list<T> il) { assign(il.begin(), il.end()); }
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

  friend bool operator==(const small_dims& a, const small_dims& b) noexcept {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
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
inline std::int64_t checked_numel(const shape& s, const char* op, std::int64_t elem_bytes = 1) {
  std::int64_t n = 1;
  bool wrapped = false;
  for (auto e : s) {
    if (e < 0) throw error(op, "negative extent", "shape " + s.str());
    wrapped = wrapped || __builtin_mul_overflow(n, e, &n);
  }
  std::int64_t bytes = 0;
  if (!wrapped && !__builtin_mul_overflow(n, elem_bytes, &bytes)) return n;
  // A zero extent makes the count 0 however large the others are.
  if (std::find(s.begin(), s.end(), std::int64_t{0}) != s.end()) return 0;
  throw error(op, "shape too large",
              "shape " + s.str() + " has more than 2^63 " +
                  (elem_bytes > 1 ? "bytes" : "elements"));
}

// numpy broadcasting: align on the right; a dim of 1 stretches.
inline bool broadcast_into(shape& acc, const shape& s) {
  const int r = std::max(acc.size(), s.size());
  shape out(r, 1);
  for (int i = 0; i < r; ++i) {
    const int ia = i - (r - acc.size()), is = i - (r - s.size());
    const std::int64_t a = ia >= 0 ? acc[ia] : 1, b = is >= 0 ? s[is] : 1;
    if (a != b && a != 1 && b != 1) return false;
    out[i] = a == 1 ? b : a;
  }
  acc = out;
  return true;
}

inline shape broadcast_shapes(const shape& a, const shape& b, const char* op = "broadcast") {
  shape r = a;
  if (!broadcast_into(r, b))
    throw error(op, "shapes cannot be broadcast together", "shapes " + a.str() + " and " + b.str());
  checked_numel(r, op);
  return r;
}

// Normalizes a possibly negative axis against a rank, or throws naming the op.
inline int normalize_axis(std::int64_t axis, int rank, const char* op) {
  if (axis < -rank || axis >= rank)
    throw error(op, "axis " + std::to_string(axis) + " is out of range",
                "tensor of rank " + std::to_string(rank));
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

} // namespace kiln
