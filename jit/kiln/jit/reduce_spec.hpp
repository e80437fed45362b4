#pragma once
// What a reduction kernel computes, for the code generators: which reduction, the dtypes
// of its values, accumulator and result, and which kernel template (see kernels/).
#include "kiln/dtype.hpp"

namespace kiln::jit {

enum class reduce_kind : std::uint8_t { sum, prod, mean, max, min, argmax, argmin, all, any };

struct reduce_spec {
  reduce_kind kind;
  bool group;   // a workgroup per output (long reductions), else an invocation per output
  dtype value;  // the reduced expression's dtype
  dtype acc;    // accumulator dtype
  dtype result; // the output's dtype
};

} // namespace kiln::jit
