#pragma once
// The seam's non-template definitions (declared in executor.hpp; see kiln/linkage.hpp for
// where they are compiled).
#include "kiln/executor.hpp"

namespace kiln {

KILN_CORE_INLINE lowering_table::~lowering_table() = default;

} // namespace kiln
