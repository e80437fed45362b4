#pragma once
// The few lines every op file uses to give its op a user-facing function. A function is
// found only when one argument is a kiln expression; a bad other argument stops the build
// with one sentence rather than a page of candidates.
#include "kiln/expr.hpp"

#include <xsimd/xsimd.hpp>

#include <cmath>

namespace kiln::detail {

template <class... X>
constexpr void check_operands() {
  static_assert((operand<X> && ...), "kiln: each operand must be a kiln tensor or expression, "
                                     "or an arithmetic scalar");
}

template <class... X>
concept any_expression = (expression<X> || ...);

template <class T>
inline constexpr bool is_simd_float = std::is_same_v<T, float> || std::is_same_v<T, double>;
template <class T>
inline constexpr bool is_simd_int =
    std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::uint32_t> ||
    std::is_same_v<T, std::int64_t>;

// Recomputes the lanes selected by `redo` with the scalar function f (the C library).
// xsimd's kernels are fast and accurate on the main domain but wrong at some edges
// (gradual underflow, subnormal inputs, special pairs); those lanes are rare, so a batch
// that has none pays one compare and one branch.
// The rare path, kept out of line so that the hot loop around an op keeps its registers.
template <class F, class B, class... Bs>
[[gnu::noinline, gnu::cold]] B scalar_lanes_slow(B r, typename B::batch_bool_type redo, F f, B x,
                                                 Bs... xs) {
  static_assert(sizeof...(Bs) <= 1, "unary and binary ops only");
  using T = typename B::value_type;
  constexpr std::size_t n = B::size, align = B::arch_type::alignment();
  alignas(align) T out[n], a[n], b[n];
  alignas(align) bool lane[n];
  r.store_aligned(out);
  redo.store_aligned(lane);
  x.store_aligned(a);
  (xs.store_aligned(b), ...);
  for (std::size_t i = 0; i < n; ++i)
    if (lane[i]) {
      if constexpr (sizeof...(Bs) == 0)
        out[i] = f(a[i]);
      else
        out[i] = f(a[i], b[i]);
    }
  return B::load_aligned(out);
}
template <class F, class B, class... Bs>
B scalar_lanes(const B& r, const typename B::batch_bool_type& redo, F f, const B& x,
               const Bs&... xs) {
  if (xsimd::any(redo)) [[unlikely]]
    return scalar_lanes_slow(r, redo, f, x, xs...);
  return r;
}

// Every lane of x through the scalar function f: for an op whose only accurate version is
// the C library's, so that it does not turn a whole pass scalar (the other ops of the pass
// stay vectorized; the op's values are those of its host()).
template <class F, class B>
B each_lane(const B& x, F f) {
  using T = typename B::value_type;
  alignas(B::arch_type::alignment()) T v[B::size];
  x.store_aligned(v);
  for (auto& e : v)
    e = f(e);
  return B::load_aligned(v);
}

} // namespace kiln::detail

// erf's and erfc's simd(), inlined wherever a pass calls them: in a small translation unit
// g++'s unit-growth limit left xsimd's f32 erf a call per batch in a loop of a dozen ops
// (Black-Scholes 9% slower once the device runtime moved to its own unit). Not for every
// math op: forcing exp, log and sin inline made bench/elementwise.cpp's heavy 3% slower.
#define KILN_SIMD_INLINE [[gnu::always_inline]] static
// kiln's own f64 erf and erfc (erf_f64.hpp): xsimd's kernels inlined into them whatever the
// translation unit's size (the same limit made the f64 Black-Scholes price of
// bench/greeks.cpp 15% slower: xsimd's exp became a call inside erfc).
#define KILN_MATH_FLATTEN [[gnu::flatten]]

#define KILN_UNARY_FUNCTION(fn, Op)                                                                \
  template <class X>                                                                               \
  requires ::kiln::detail::any_expression<X>                                                       \
  auto fn(X&& x) { return ::kiln::make_node<Op>(std::forward<X>(x)); }

#define KILN_BINARY_FUNCTION(fn, Op)                                                               \
  template <class X, class Y>                                                                      \
  requires ::kiln::detail::any_expression<X, Y>                                                    \
  auto fn(X&& x, Y&& y) {                                                                          \
    ::kiln::detail::check_operands<X, Y>();                                                        \
    return ::kiln::make_node<Op>(std::forward<X>(x), std::forward<Y>(y));                          \
  }

#define KILN_TERNARY_FUNCTION(fn, Op)                                                              \
  template <class X, class Y, class Z>                                                             \
  requires ::kiln::detail::any_expression<X, Y, Z>                                                 \
  auto fn(X&& x, Y&& y, Z&& z) {                                                                   \
    ::kiln::detail::check_operands<X, Y, Z>();                                                     \
    return ::kiln::make_node<Op>(std::forward<X>(x), std::forward<Y>(y), std::forward<Z>(z));      \
  }
