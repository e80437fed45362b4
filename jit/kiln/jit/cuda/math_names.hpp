#pragma once
// kiln's device math names (kernels/glsl_math: kiln_exp, kiln_pow...) in CUDA C++, so that one
// device body serves GLSL and CUDA: GLSL has no double exp, log or trig, so a shared body
// calls kiln_<fn>; in CUDA each becomes an overload pair over libdevice (and the preamble's
// sigmoidf/sigmoid), emitted only for the names a kernel calls.
#include "kiln/error.hpp"
#include "kiln/jit/codegen/ir_walk.hpp"

#include <set>
#include <string>
#include <string_view>

namespace kiln::jit::cuda {

struct math_name {
  std::string_view name; // kiln_<fn>
  int arity;
  const char* f32; // the libdevice function for float
  const char* f64; // ... for double
};

inline constexpr math_name math_names[] = {
    {"kiln_exp", 1, "expf", "exp"},
    {"kiln_exp2", 1, "exp2f", "exp2"},
    {"kiln_expm1", 1, "expm1f", "expm1"},
    {"kiln_log", 1, "logf", "log"},
    {"kiln_log2", 1, "log2f", "log2"},
    {"kiln_log10", 1, "log10f", "log10"},
    {"kiln_log1p", 1, "log1pf", "log1p"},
    {"kiln_sqrt", 1, "sqrtf", "sqrt"},
    {"kiln_rsqrt", 1, "rsqrtf", "rsqrt"},
    {"kiln_cbrt", 1, "cbrtf", "cbrt"},
    {"kiln_sigmoid", 1, "sigmoidf", "sigmoid"},
    {"kiln_pow", 2, "powf", "pow"},
    {"kiln_fmod", 2, "fmodf", "fmod"},
    {"kiln_floor", 1, "floorf", "floor"},
    {"kiln_ceil", 1, "ceilf", "ceil"},
    {"kiln_trunc", 1, "truncf", "trunc"},
    {"kiln_round", 1, "roundf", "round"},
    {"kiln_sin", 1, "sinf", "sin"},
    {"kiln_cos", 1, "cosf", "cos"},
    {"kiln_tan", 1, "tanf", "tan"},
    {"kiln_asin", 1, "asinf", "asin"},
    {"kiln_acos", 1, "acosf", "acos"},
    {"kiln_atan", 1, "atanf", "atan"},
    {"kiln_atan2", 2, "atan2f", "atan2"},
    {"kiln_sinh", 1, "sinhf", "sinh"},
    {"kiln_cosh", 1, "coshf", "cosh"},
    {"kiln_tanh", 1, "tanhf", "tanh"},
    {"kiln_asinh", 1, "asinhf", "asinh"},
    {"kiln_acosh", 1, "acoshf", "acosh"},
    {"kiln_atanh", 1, "atanhf", "atanh"},
    {"kiln_erf", 1, "erff", "erf"},
    {"kiln_erfc", 1, "erfcf", "erfc"},
};

inline const math_name* find_math_name(std::string_view name) {
  for (const auto& e : math_names)
    if (e.name == name) return &e;
  return nullptr;
}

// The float and double overloads of the (library) names.
inline std::string math_overloads(const std::set<std::string>& names) {
  std::string s;
  for (const auto& n : names) {
    const math_name* m = find_math_name(n);
    for (const auto& [type, fn] : {std::pair{"float", m->f32}, std::pair{"double", m->f64}}) {
      const std::string t = type;
      s += "inline " + t + " " + n + "(" + t + " a" + (m->arity == 2 ? ", " + t + " b" : "") +
           ") { return " + fn + "(a" + (m->arity == 2 ? ", b" : "") + "); }\n";
    }
  }
  return s;
}

} // namespace kiln::jit::cuda
