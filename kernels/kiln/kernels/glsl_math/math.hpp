#pragma once
// kiln's GLSL math library: kiln_<fn>(x) in float and double with C library semantics (C99
// Annex F special values: signed zeros, infinities, NaN, domain edges; round() half away
// from zero; rsqrt = 1/sqrt; fmod exact). The GLSL generator (glsl.hpp) emits, per float
// type a kernel computes in, the definitions its ops' spellings call (math_source).
// Sources: glsl_math_f32.hpp, glsl_math_f64.hpp and their _trig.hpp parts. Helpers are named
// kiln_<what>_f32/_f64 (glslang reserves, and warns on, identifiers with "__").
//
// Accuracy, measured on lavapipe (Mesa 22.3.6, LLVM 15.0.6, x86-64) against long double
// references: max ulp over about 10^6 random inputs per function and type (three seeds),
// on the domains of tests/float_ops.hpp (main, whole range, exp edges, subnormal inputs,
// special inputs) plus harder ones listed. ±0, ±inf, NaN, the extremes and the special-pair
// grids of float_ops.hpp all give the C99 result; a 0 or inf result is never off by an ulp.
//
//   fn        bound  f32  f64  domains (f32 / f64 where they differ), extra ones after ';'
//   exp         4     1    1   [-80,80]; up to overflow, gradual underflow; [-1e-5,1e-5]
//   exp2        4     1    1   [-100,100]; [-149,128) / [-1074,1024); [-1e-5,1e-5]
//   expm1       4     1    2   [-5,5], ±[2^-30,1), [-40,88.7/709.8]; ±[2^-30,89/709]
//   log         4     1    1   [1e-6,1e6], [min,max], subnormals; [0.5,2], 1±1e-6
//   log2        4     2    2   as log
//   log10       4     2    2   as log
//   log1p       4     2    2   [-0.9,10], [2^-30,max], (-1,-2^-30]; [-0.3,0.5], ±[2^-60,2^-20]
//   sqrt        0     0    0   [0,1e6], [min,max], subnormals
//   rsqrt       1     1    1   [1e-3,1e6], [min,max], subnormals
//   cbrt        4     1    1   [-1e6,1e6], ±[2^-30,max], subnormals; exact cubes
//   sin, cos    4     1    1   [-100,100], ±[2^-30,2^20]; ±[2^20,max], near k pi/2 (k<2^40)
//   tan         4     2    2   [-1.5,1.5], ±[2^-30,2^20]; ±[2^20,max], near k pi/2
//   asin        4     2    2   [-1,1]; near ±1 and ±0.5
//   acos        4     1    1   [-1,1]; near ±1 and ±0.5
//   atan        4     2    2   [-50,50], ±[2^-30,max], subnormals
//   atan2       4     2    2   [-5,5]^2; both ±[2^-60,2^60]; tiny and subnormal y
//   sinh, cosh  4     2    2   [-20,20], up to overflow (89.4 / 710.4); [-1,1] (cosh 1 ulp)
//   tanh        4     2    2   [-10,10], ±[2^-30,1); [-1,1]
//   asinh       8     2    2   [-1e3,1e3], ±[2^-30,max]
//   acosh       8     3    3   [1,1e3], [1,max]; [1,1.001]
//   atanh       8     3    3   [-0.99,0.99], ±[2^-30,1); (-1,1), [0.999,1)
//   erf         8     2    2   [-4,4], ±[2^-30,1); ±[2^-30,8], ±[0.4,1.1]
//   erfc        8     4    4   [-3,3], [-6,10/26]; into underflow (to 10.1 / 27.3)
//   sigmoid     4     2    2   [-30,30], [-103.9/-745.1, 40]
//   pow         4     1    1   [0.01,10]x[-8,8], [0.5,2]x[-100,100], [1e-3,1e3]x[-2,2],
//                              [-3,-0.3]x integers; |y log x| up to overflow and into the
//                              subnormals, subnormal x, [-10,10]x integers in [-30,30]
//   fmod        0     0    0   [-100,100]x[0.5,7]; both over the whole range, ratios 2^1000
//   floor etc.  0     0    0   floor ceil round trunc: [-1e4,1e4], ±[2^-30,max], exact
//                              halves and neighbours, around 2^(digits-1), subnormals
//
// Built-ins: only sqrt, floor, ceil and trunc (exact on lavapipe). lavapipe's others miss
// the bounds: exp 63 ulp, log 405 ulp near 1, exp2/log/log2 wrong on subnormals, sin, cos
// and tan off beyond ~1e4 (tan 6000 ulp at 5e4) and garbage for huge arguments, asin/acos
// 3800 ulp, atan 350, pow 180 (7000 for |y log x| ~ 80), sinh and tanh 10^7 near 0, acosh
// 195, cosh 61; round() rounds halves to even.
//
// Doubles: GLSL has no double exp/log/trig; all is range reduction (Cody-Waite, and
// Payne-Hanek in 32-bit integer words for huge trig arguments) plus minimax polynomials
// fitted for kiln. fma() is never used: lavapipe does not fuse it, on floats or doubles
// (measured), so exact products split their operands (Dekker) under `precise`. Float code
// uses no doubles, and no code needs 64-bit integers.
//
// Subnormals: lavapipe keeps f32 and f64 subnormals (inputs and results; measured), though
// its float-controls properties promise neither preservation nor flushing. On a device that
// flushes them, subnormal inputs act as ±0 and subnormal results become ±0.
//
// Cost: fmod loops once per binade between |x| and |y| (up to 280 in f32, 2100 in f64).
#include "kiln/error.hpp"
#include "kiln/kernels/glsl_math/math_f32.hpp"
#include "kiln/kernels/glsl_math/math_f32_trig.hpp"
#include "kiln/kernels/glsl_math/math_f64.hpp"
#include "kiln/kernels/glsl_math/math_f64_trig.hpp"
#include "kiln/kernels/glsl_math/math_function.hpp"

#include <algorithm>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::jit::glsl {

// Every function of the library, float ones first.
inline std::span<const math_function> math_library() {
  static const std::vector<math_function> all = [] {
    const std::span<const math_function> parts[] = {detail::f32_math, detail::f32_trig_math,
                                                    detail::f64_math, detail::f64_trig_math};
    std::vector<math_function> v;
    for (const auto part : parts)
      v.insert(v.end(), part.begin(), part.end());
    return v;
  }();
  return all;
}

namespace detail {

inline const math_function* find_math(std::span<const math_function> lib, std::string_view name,
                                      std::string_view type) {
  for (const auto& f : lib)
    if (name == f.name && type == f.type) return &f;
  return nullptr;
}

// Appends f's dependencies, then f, unless already there. `path` holds the functions being
// resolved, so a dependency cycle (a library bug) is an error, not endless recursion.
inline void add_math(std::span<const math_function> lib, const math_function& f,
                     std::vector<const math_function*>& out,
                     std::vector<const math_function*>& path) {
  if (std::find(out.begin(), out.end(), &f) != out.end()) return;
  if (std::find(path.begin(), path.end(), &f) != path.end())
    throw error("glsl math", "dependency cycle in the math library",
                std::string(f.name) + " (" + f.type + ") needs itself");
  path.push_back(&f);
  std::string_view deps = f.deps;
  for (auto start = deps.find_first_not_of(' '); start != std::string_view::npos;
       start = deps.find_first_not_of(' ')) {
    deps.remove_prefix(start);
    const std::string_view dep = deps.substr(0, deps.find(' '));
    deps.remove_prefix(dep.size());
    const auto* g = find_math(lib, dep, f.type);
    if (!g)
      throw error("glsl math", "a library function needs one the library does not have",
                  std::string(f.name) + " (" + f.type + ") needs " + std::string(dep));
    add_math(lib, *g, out, path);
  }
  path.pop_back();
  out.push_back(&f);
}

// math_source over any library (the tests give broken ones).
inline std::string math_source_in(std::span<const math_function> lib,
                                  std::span<const std::string_view> names, std::string_view type) {
  if (type != "float" && type != "double")
    throw error("glsl math", "no math library for this type",
                "type '" + std::string(type) + "' (float and double have one)");
  std::vector<const math_function*> out, path;
  for (const auto name : names) {
    const auto* f = find_math(lib, name, type);
    if (!f)
      throw error("glsl math", "unknown math function",
                  std::string(name) + " for " + std::string(type));
    add_math(lib, *f, out, path);
  }
  std::string s;
  for (const auto* f : out)
    s += f->source;
  return s;
}

} // namespace detail

// Whether `name` is a function of the library (for some type).
inline bool has_math(std::string_view name) {
  return detail::find_math(math_library(), name, "float") ||
         detail::find_math(math_library(), name, "double");
}

// The GLSL definitions needed by `names` (kiln_ function names) for `type` ("float" or
// "double"): dependencies first, each once, in the order `names` first needs them.
inline std::string math_source(std::span<const std::string_view> names, std::string_view type) {
  return detail::math_source_in(math_library(), names, type);
}

} // namespace kiln::jit::glsl
