#pragma once
// The expression nodes' non-template definitions (declared in expr.hpp; see
// kiln/linkage.hpp for where they are compiled).
#include "kiln/shape.hpp"

namespace kiln::detail {

[[gnu::noinline]] KILN_CORE_INLINE void broadcast_operand(kiln::shape& acc, const kiln::shape& s,
                                                          const char* op) {
  if (!broadcast_into(acc, s))
    throw error(op, "shapes cannot be broadcast together",
                "shapes " + acc.str() + " and " + s.str());
}

} // namespace kiln::detail
