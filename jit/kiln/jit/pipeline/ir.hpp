#pragma once
// The kernel IR, lowering's output, lives with the planner (include/kiln/ir/): the JIT
// reads it under its own names.
#include "kiln/executor.hpp"
#include "kiln/ir/ir.hpp"

namespace kiln::jit {
using namespace kiln::ir;
using kiln::lowering_count;
} // namespace kiln::jit
