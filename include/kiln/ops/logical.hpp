#pragma once
// Logical ops (any value converts to bool: non-zero is true) and bitwise ops (integers
// and bool). && and || evaluate both sides: they build expressions, they do not branch.
#include "kiln/ops/define.hpp"
#include "kiln/ops/rules.hpp"

namespace kiln::ops {

struct logical_and : op_base {
  static constexpr const char* name = "logical_and";
  static constexpr spelling glsl{.any = "($0 && $1)"};
  static constexpr spelling cuda = glsl;
  static constexpr spelling msl = glsl;
  static constexpr int arity = 2;
  using rule = rules::logical;
  static bool host(bool a, bool b) { return a && b; }
  using derivative = zero_gradient; // bool and integer values
};
struct logical_or : op_base {
  static constexpr const char* name = "logical_or";
  static constexpr spelling glsl{.any = "($0 || $1)"};
  static constexpr spelling cuda = glsl;
  static constexpr spelling msl = glsl;
  static constexpr int arity = 2;
  using rule = rules::logical;
  static bool host(bool a, bool b) { return a || b; }
  using derivative = zero_gradient; // bool and integer values
};
struct logical_xor : op_base {
  static constexpr const char* name = "logical_xor";
  static constexpr spelling glsl{.any = "($0 != $1)"};
  static constexpr spelling cuda = glsl;
  static constexpr spelling msl = glsl;
  static constexpr int arity = 2;
  using rule = rules::logical;
  static bool host(bool a, bool b) { return a != b; }
  using derivative = zero_gradient; // bool and integer values
};
struct logical_not : op_base {
  static constexpr const char* name = "logical_not";
  static constexpr spelling glsl{.any = "(!$0)"};
  static constexpr spelling cuda = glsl;
  static constexpr spelling msl = glsl;
  static constexpr int arity = 1;
  using rule = rules::logical;
  static bool host(bool a) { return !a; }
  using derivative = zero_gradient; // bool and integer values
};

struct bit_and : op_base {
  static constexpr const char* name = "bit_and";
  static constexpr spelling glsl{.boolean = "($0 && $1)", .integer = "($0 & $1)"};
  static constexpr spelling cuda = glsl;
  static constexpr spelling msl = glsl;
  static constexpr int arity = 2;
  using rule = rules::bitwise;
  template <class T>
  static T host(T a, T b) {
    return static_cast<T>(a & b);
  }
  template <class T>
  static constexpr bool simd_for = detail::is_simd_int<T>;
  template <class B>
  static B simd(const B& a, const B& b) {
    return a & b;
  }
  using derivative = zero_gradient; // bool and integer values
};
struct bit_or : op_base {
  static constexpr const char* name = "bit_or";
  static constexpr spelling glsl{.boolean = "($0 || $1)", .integer = "($0 | $1)"};
  static constexpr spelling cuda = glsl;
  static constexpr spelling msl = glsl;
  static constexpr int arity = 2;
  using rule = rules::bitwise;
  template <class T>
  static T host(T a, T b) {
    return static_cast<T>(a | b);
  }
  template <class T>
  static constexpr bool simd_for = detail::is_simd_int<T>;
  template <class B>
  static B simd(const B& a, const B& b) {
    return a | b;
  }
  using derivative = zero_gradient; // bool and integer values
};
struct bit_xor : op_base {
  static constexpr const char* name = "bit_xor";
  static constexpr spelling glsl{.boolean = "($0 != $1)", .integer = "($0 ^ $1)"};
  static constexpr spelling cuda = glsl;
  static constexpr spelling msl = glsl;
  static constexpr int arity = 2;
  using rule = rules::bitwise;
  template <class T>
  static T host(T a, T b) {
    return static_cast<T>(a ^ b);
  }
  template <class T>
  static constexpr bool simd_for = detail::is_simd_int<T>;
  template <class B>
  static B simd(const B& a, const B& b) {
    return a ^ b;
  }
  using derivative = zero_gradient; // bool and integer values
};
struct bit_not : op_base {
  static constexpr const char* name = "bit_not";
  static constexpr spelling glsl{.boolean = "(!$0)", .integer = "(~$0)"};
  static constexpr spelling cuda = glsl;
  static constexpr spelling msl = glsl;
  static constexpr int arity = 1;
  using rule = rules::bitwise;
  template <class T>
  static T host(T a) {
    if constexpr (std::is_same_v<T, bool>)
      return !a; // ~ on bool is logical not, as in numpy
    else
      return static_cast<T>(~a);
  }
  template <class T>
  static constexpr bool simd_for = detail::is_simd_int<T>;
  template <class B>
  static B simd(const B& a) {
    return ~a;
  }
  using derivative = zero_gradient; // bool and integer values
};

} // namespace kiln::ops

namespace kiln {
KILN_BINARY_FUNCTION(operator&&, ops::logical_and)
KILN_BINARY_FUNCTION(operator||, ops::logical_or)
KILN_UNARY_FUNCTION(operator!, ops::logical_not)
KILN_BINARY_FUNCTION(logical_and, ops::logical_and)
KILN_BINARY_FUNCTION(logical_or, ops::logical_or)
KILN_BINARY_FUNCTION(logical_xor, ops::logical_xor)
KILN_UNARY_FUNCTION(logical_not, ops::logical_not)
KILN_BINARY_FUNCTION(operator&, ops::bit_and)
KILN_BINARY_FUNCTION(operator|, ops::bit_or)
KILN_BINARY_FUNCTION(operator^, ops::bit_xor)
KILN_UNARY_FUNCTION(operator~, ops::bit_not)
} // namespace kiln
