#pragma once
// Result-type rules shared by the op catalog. A rule says, for the value types of an
// op's children, whether the op accepts them (check() stops the build with one sentence
// if not), the type each child is converted to before the op runs, and the result type.
#include "kiln/dtype.hpp"

#include <cstddef>
#include <type_traits>

namespace kiln::rules {

template <class... T>
struct common;
template <class T>
struct common<T> {
  using type = T;
};
template <class T, class U, class... R>
struct common<T, U, R...> {
  using type = typename common<promote_t<T, U>, R...>::type;
};
template <class... T>
using common_t = typename common<T...>::type;

template <class... T>
inline constexpr bool any_bool = (std::is_same_v<T, bool> || ...);
template <class... T>
inline constexpr bool any_float = (is_floating(dtype_of<T>()) || ...);

// + - * / % maximum minimum clamp, unary minus, abs, sign: numbers, not bool.
struct arithmetic {
  template <class... A>
  static constexpr void check() {
    static_assert(!any_bool<A...>, "kiln: arithmetic on tensor<bool> makes no sense; use logical "
                                   "ops, or cast<int32_t>() first");
  }
  template <std::size_t, class... A>
  using operand = common_t<A...>;
  template <class... A>
  using result = common_t<A...>;
};

// exp, log, sin, pow, ...: computed in a float type (integers promote, see float_of_t).
struct floating {
  template <class... A>
  static constexpr void check() {}
  template <std::size_t, class... A>
  using operand = float_of_t<common_t<A...>>;
  template <class... A>
  using result = float_of_t<common_t<A...>>;
};

// floor, ceil, round, trunc: identity on integers, rounding on floats.
struct rounding {
  template <class... A>
  static constexpr void check() {
    static_assert(!any_bool<A...>, "kiln: rounding a tensor<bool> makes no sense");
  }
  template <std::size_t, class... A>
  using operand = common_t<A...>;
  template <class... A>
  using result = common_t<A...>;
};

// == != < <= > >=: compare in the common type, give bool.
struct comparison {
  template <class... A>
  static constexpr void check() {}
  template <std::size_t, class... A>
  using operand = common_t<A...>;
  template <class... A>
  using result = bool;
};

// && || ! logical_xor: anything converts to bool (non-zero is true).
struct logical {
  template <class... A>
  static constexpr void check() {}
  template <std::size_t, class... A>
  using operand = bool;
  template <class... A>
  using result = bool;
};

// & | ^ ~: integers and bool only.
struct bitwise {
  template <class... A>
  static constexpr void check() {
    static_assert(!any_float<A...>, "kiln: bitwise ops need integer or bool tensors, not floating "
                                    "ones");
  }
  template <std::size_t, class... A>
  using operand = common_t<A...>;
  template <class... A>
  using result = common_t<A...>;
};

// isnan, isinf, isfinite: look at the value as it is, give bool.
struct predicate {
  template <class... A>
  static constexpr void check() {}
  template <std::size_t, class A>
  using operand = A;
  template <class A>
  using result = bool;
};

// where(cond, a, b): cond is bool, a and b meet in their common type.
struct select {
  template <class C, class A, class B>
  static constexpr void check() {}
  template <std::size_t I, class C, class A, class B>
  using operand = std::conditional_t<I == 0, bool, common_t<A, B>>;
  template <class C, class A, class B>
  using result = common_t<A, B>;
};

// cast<T>: the child as it is, converted on the way out.
template <class To>
struct conversion {
  template <class A>
  static constexpr void check() {}
  template <std::size_t, class A>
  using operand = A;
  template <class A>
  using result = To;
};

} // namespace kiln::rules
