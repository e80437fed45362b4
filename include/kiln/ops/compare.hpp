#pragma once
// Comparisons: == != < <= > >=, elementwise, giving bool. Operands meet in their common
// type first (so an i32 compared with an f32 compares as f32).
#include "kiln/ops/define.hpp"
#include "kiln/ops/rules.hpp"

namespace kiln::ops {

#define KILN_COMPARISON(Name, sym)                                                                 \
  struct Name : op_base {                                                                          \
    static constexpr const char* name = #Name;                                                     \
    static constexpr int arity = 2;                                                                \
    /* GLSL orders no bools: compare them as 0 and 1, as C++ does */                               \
    static constexpr spelling glsl{.boolean = "(int($0) " #sym " int($1))",                        \
                                   .any = "($0 " #sym " $1)"};                                     \
    static constexpr spelling cuda = glsl; /* valid C++, the same meaning */                       \
    static constexpr spelling msl = glsl;                                                          \
    using rule = rules::comparison;                                                                \
    template <class T>                                                                             \
    static bool host(T a, T b) {                                                                   \
      return a sym b;                                                                              \
    }                                                                                              \
    using derivative = zero_gradient; /* a bool: no gradient flows through it */                   \
  };

KILN_COMPARISON(equal, ==)
KILN_COMPARISON(not_equal, !=)
KILN_COMPARISON(less, <)
KILN_COMPARISON(less_equal, <=)
KILN_COMPARISON(greater, >)
KILN_COMPARISON(greater_equal, >=)
#undef KILN_COMPARISON

} // namespace kiln::ops

namespace kiln {
KILN_BINARY_FUNCTION(operator==, ops::equal)
KILN_BINARY_FUNCTION(operator!=, ops::not_equal)
KILN_BINARY_FUNCTION(operator<, ops::less)
KILN_BINARY_FUNCTION(operator<=, ops::less_equal)
KILN_BINARY_FUNCTION(operator>, ops::greater)
KILN_BINARY_FUNCTION(operator>=, ops::greater_equal)
} // namespace kiln
