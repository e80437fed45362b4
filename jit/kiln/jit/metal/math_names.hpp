#pragma once
// kiln's device math names (kiln_exp, kiln_pow...: the spellings GLSL and MSL share, see
// ops/math.hpp) defined in MSL, float only (Metal has no double; 16-bit floats compute in
// float). Emitted only for the names a kernel calls.
// - Where MSL has the function, metal::<fn>: with fast math off (MTLMathModeSafe, which
//   the Metal backend must ask for) these are the precise versions, whose bounds the MSL
//   specification lists ("Numerical Compliance", precise math, single precision):
//   exp, exp2, log, log2, log10, sin, cos, sinh, cosh, asin, acos, asinh, acosh 4 ulp;
//   atan, atanh, tanh 5; tan, atan2 6; pow 16; rsqrt 2; sqrt, floor, ceil, trunc, round
//   exact. (From the spec's table as the OpenCL-derived bounds it keeps; check them
//   against the Metal version the backend targets.) metal::round rounds halves away from
//   zero, as std::round.
// - What MSL lacks (expm1, log1p, cbrt, erf, erfc) and fmod (MSL's is x - y trunc(x/y),
//   not exact) come from kiln's GLSL library (kernels/glsl_math, float half: within 4 ulp,
//   fmod exact, as measured there), its GLSL text turned into MSL by msl_from_glsl.
// - sigmoid: the host's formulation over metal::exp (as CUDA's), within exp's bound + 2.
#include "kiln/error.hpp"
#include "kiln/jit/codegen/expand.hpp"
#include "kiln/kernels/glsl_math/math.hpp"

#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::jit::metal {

struct math_name {
  std::string_view name; // kiln_<fn>
  int arity;
  const char* metal; // metal::<fn>, or null: from the GLSL library (or own, for sigmoid)
};

inline constexpr math_name math_names[] = {
    {"kiln_exp", 1, "exp"},     {"kiln_exp2", 1, "exp2"},     {"kiln_expm1", 1, nullptr},
    {"kiln_log", 1, "log"},     {"kiln_log2", 1, "log2"},     {"kiln_log10", 1, "log10"},
    {"kiln_log1p", 1, nullptr}, {"kiln_sqrt", 1, "sqrt"},     {"kiln_rsqrt", 1, "rsqrt"},
    {"kiln_cbrt", 1, nullptr},  {"kiln_sigmoid", 1, nullptr}, {"kiln_pow", 2, "pow"},
    {"kiln_fmod", 2, nullptr},  {"kiln_floor", 1, "floor"},   {"kiln_ceil", 1, "ceil"},
    {"kiln_trunc", 1, "trunc"}, {"kiln_round", 1, "round"},   {"kiln_sin", 1, "sin"},
    {"kiln_cos", 1, "cos"},     {"kiln_tan", 1, "tan"},       {"kiln_asin", 1, "asin"},
    {"kiln_acos", 1, "acos"},   {"kiln_atan", 1, "atan"},     {"kiln_atan2", 2, "atan2"},
    {"kiln_sinh", 1, "sinh"},   {"kiln_cosh", 1, "cosh"},     {"kiln_tanh", 1, "tanh"},
    {"kiln_asinh", 1, "asinh"}, {"kiln_acosh", 1, "acosh"},   {"kiln_atanh", 1, "atanh"},
    {"kiln_erf", 1, nullptr},   {"kiln_erfc", 1, nullptr},
};

inline const math_name* find_math_name(std::string_view name) {
  for (const auto& e : math_names)
    if (e.name == name) return &e;
  return nullptr;
}

// GLSL library text as MSL: `precise` dropped (Metal's safe math does not reassociate; a
// contracted product in the compensated steps only makes them more exact), vec2 as float2,
// and constant arrays (`const float a[N] = float[N](...);`) in the constant address space
// with a brace initializer, as MSL wants file-scope constants.
inline std::string msl_from_glsl(std::string s) {
  auto replace_all = [&](std::string_view from, std::string_view to) {
    for (auto at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
      s.replace(at, from.size(), to);
  };
  replace_all("precise ", "");
  replace_all("vec2", "float2");
  for (auto at = s.find("\nconst "); at != std::string::npos; at = s.find("\nconst ", at + 1)) {
    const auto eq = s.find("] = ", at), line_end = s.find('\n', at + 1);
    if (eq == std::string::npos || eq > line_end) continue; // a scalar constant: valid as is
    const auto open = s.find('(', eq), close = s.find(");", open);
    s.replace(close, 2, "};");
    s.replace(eq + 4, open + 1 - (eq + 4), "{");
    s.replace(at + 1, 5, "constant");
  }
  return s;
}

// The MSL definitions of `names` (kiln_ names a kernel calls).
inline std::string math_source(const std::set<std::string>& names) {
  std::string s;
  std::vector<std::string_view> from_glsl;
  for (const auto& n : names) {
    const math_name* m = find_math_name(n);
    if (!m) throw error("jit", "no MSL definition of a kiln math function", n);
    if (n == "kiln_sigmoid") {
      // e = e^-|x| never overflows (the host's formulation).
      s += "inline float kiln_sigmoid(float x) { const float e = metal::exp(-metal::abs(x)); "
           "return (x >= 0.0f ? 1.0f : e) / (1.0f + e); }\n";
    } else if (m->metal) {
      s += std::string("inline float ") + n + (m->arity == 2 ? "(float a, float b)" : "(float a)") +
           " { return metal::" + m->metal + (m->arity == 2 ? "(a, b); }\n" : "(a); }\n");
    } else {
      from_glsl.push_back(m->name);
    }
  }
  if (!from_glsl.empty()) s += msl_from_glsl(glsl::math_source(from_glsl, "float"));
  return s;
}

} // namespace kiln::jit::metal
