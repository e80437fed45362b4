#pragma once
// One GLSL math function of kiln's library (see glsl_math.hpp).
namespace kiln::jit::glsl {

struct math_function {
  const char* name;   // "kiln_exp", or a private helper "kiln__<what>_f32" / "_f64"
  const char* type;   // "float" or "double"
  const char* source; // the full GLSL definition(s) of that overload
  const char* deps;   // space-separated names of the library functions it calls ("" if none)
};

} // namespace kiln::jit::glsl
