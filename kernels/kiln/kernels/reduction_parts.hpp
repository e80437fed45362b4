#pragma once
// What the JIT splices into a reduction kernel template (reduce_template.hpp): the
// accumulator type, identity, combine, merge and finish of one reduction, and the
// statements storing a result or a partial and loading a partial. Every dialect reads the
// same parts.
#include <string>

namespace kiln::kernels {

struct reduction_parts {
  std::string value;             // register type of the reduced expression's values
  std::string result;            // register type of the result
  std::string acc;               // accumulator type
  std::string init;              // its identity, an expression
  std::string index_init = "-1"; // the initial `ai` (no index yet; a product's exponent: 0)
  std::string init2;             // the initial `a2`, of type acc; empty: the state has no a2
  std::string combine; // statements folding value `v` at reduced index `r` into (a, ai, a2)
  std::string merge;   // statements folding (b, bi, b2) into (a, ai, a2); in any order
  std::string finish;  // expression of the result (register type) from (a, ai, a2)
  std::string store;   // statement storing the result `res` to output o
  std::string partial; // statements storing (a, ai, a2) as partial w (first pass of two)
  std::string load;    // statements defining b, bi, b2 from partial k (second pass)
};

} // namespace kiln::kernels
