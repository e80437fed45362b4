// kiln's GLSL math library (jit/kiln/kernels/glsl_math/math.hpp) without a GPU: every function of
// each type compiles alone (so its dependency list is complete) with glslc and passes
// spirv-val, all of them compile together in one shader (float and double overloads side
// by side, no helper defined twice), and math_source emits exactly the definitions needed,
// dependencies first, each once. Accuracy is measured through the Vulkan runtime elsewhere.
#include "kiln/kernels/glsl_math/math.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

namespace glsl = kiln::jit::glsl;
namespace fs = std::filesystem;

namespace {

// What the op catalog calls (include/kiln/ops/math.hpp), with its arity.
const std::map<std::string, int> public_functions = {
    {"kiln_exp", 1},   {"kiln_exp2", 1},  {"kiln_expm1", 1}, {"kiln_log", 1},   {"kiln_log2", 1},
    {"kiln_log10", 1}, {"kiln_log1p", 1}, {"kiln_sqrt", 1},  {"kiln_rsqrt", 1}, {"kiln_cbrt", 1},
    {"kiln_sin", 1},   {"kiln_cos", 1},   {"kiln_tan", 1},   {"kiln_asin", 1},  {"kiln_acos", 1},
    {"kiln_atan", 1},  {"kiln_sinh", 1},  {"kiln_cosh", 1},  {"kiln_tanh", 1},  {"kiln_asinh", 1},
    {"kiln_acosh", 1}, {"kiln_atanh", 1}, {"kiln_erf", 1},   {"kiln_erfc", 1},  {"kiln_sigmoid", 1},
    {"kiln_floor", 1}, {"kiln_ceil", 1},  {"kiln_round", 1}, {"kiln_trunc", 1}, {"kiln_atan2", 2},
    {"kiln_fmod", 2},  {"kiln_pow", 2}};
const char* const types[] = {"float", "double"};

std::mt19937_64& rng() {
  static std::mt19937_64 g(Catch::rngSeed());
  return g;
}

std::vector<std::string> split_deps(const char* deps) {
  std::istringstream in(deps);
  std::vector<std::string> v;
  for (std::string d; in >> d;)
    v.push_back(d);
  return v;
}

const glsl::math_function* find_entry(const std::string& name, const std::string& type) {
  for (const auto& f : glsl::math_library())
    if (name == f.name && type == f.type) return &f;
  return nullptr;
}
const glsl::math_function& entry(const std::string& name, const std::string& type) {
  const auto* f = find_entry(name, type);
  if (!f) throw std::runtime_error("no library entry " + name + " for " + type);
  return *f;
}

std::vector<std::string> public_names() {
  std::vector<std::string> v;
  for (const auto& p : public_functions)
    v.push_back(p.first);
  return v;
}

// The entries `names` need, found independently of math_source: a breadth-first closure.
std::set<std::string> closure(const std::vector<std::string>& names, const std::string& type) {
  std::set<std::string> seen(names.begin(), names.end());
  std::vector<std::string> todo = names;
  while (!todo.empty()) {
    const std::string n = todo.back();
    todo.pop_back();
    for (const auto& d : split_deps(entry(n, type).deps))
      if (seen.insert(d).second) todo.push_back(d);
  }
  return seen;
}

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1))
    ++n;
  return n;
}

std::string source_of(const std::vector<std::string>& names, const std::string& type) {
  const std::vector<std::string_view> v(names.begin(), names.end());
  return glsl::math_source(v, type);
}

// math_source(names) holds exactly the closure's sources, each once, each after those of
// its dependencies.
void check_source(const std::vector<std::string>& names, const std::string& type) {
  const std::string s = source_of(names, type);
  const auto need = closure(names, type);
  std::size_t total = 0;
  for (const auto& f : glsl::math_library()) {
    if (type != f.type) continue;
    const auto n = count(s, f.source);
    INFO(f.name << " for " << type);
    CHECK(n == (need.count(f.name) ? 1u : 0u));
    if (!n) continue;
    total += std::string(f.source).size();
    for (const auto& d : split_deps(f.deps))
      CHECK(s.find(entry(d, type).source) < s.find(f.source));
  }
  CHECK(total == s.size()); // nothing else in it
}

std::string program_on_path(const char* name) {
  const char* path = std::getenv("PATH");
  std::istringstream in(path ? path : "");
  for (std::string dir; std::getline(in, dir, ':');)
    if (!dir.empty() && ::access((fs::path(dir) / name).c_str(), X_OK) == 0)
      return (fs::path(dir) / name).string();
  return {};
}

// A private temp dir, removed with everything in it.
struct temp_dir {
  fs::path path;
  temp_dir() {
    std::string t = (fs::temp_directory_path() / "kiln-test-glsl-math-XXXXXX").string();
    if (!::mkdtemp(t.data())) throw std::runtime_error("mkdtemp failed for " + t);
    path = t;
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), {}};
}

// Runs `command`, its output to `log`; returns the exit status and the output.
std::pair<int, std::string> run(const std::string& command, const fs::path& log) {
  const int rc = std::system((command + " > '" + log.string() + "' 2>&1").c_str());
  return {rc, read_file(log)};
}

// A compute shader calling each of `names` (unary or binary) in `type`, as the generator
// would: the same version and extension, the library definitions before main().
std::string wrapper(const std::vector<std::string>& names, const std::string& type,
                    const std::string& library) {
  std::string s = "#version 450\n#extension GL_EXT_shader_explicit_arithmetic_types : require\n"
                  "layout(local_size_x = 64) in;\n"
                  "layout(std430, binding = 0) buffer B { " +
                  type + " d[]; } b;\n" + library +
                  "void main() {\n  uint i = gl_GlobalInvocationID.x;\n  " + type +
                  " x = b.d[2u * i], y = b.d[2u * i + 1u], r = " + type + "(0);\n";
  for (const auto& n : names)
    s += "  r += " + n + (public_functions.at(n) == 1 ? "(x);\n" : "(x, y);\n");
  return s + "  b.d[2u * i] = r;\n}\n";
}

// Compiles `src` with glslc and validates it with spirv-val; both must be silent (glslang
// warnings, such as on reserved "__" names, fail too).
void compile_and_validate(const std::string& src, const std::string& what, const std::string& glslc,
                          const std::string& spirv_val, const temp_dir& dir) {
  const fs::path comp = dir.path / "shader.comp", spv = dir.path / "shader.spv";
  std::ofstream(comp) << src;
  fs::remove(spv);
  const auto [rc, out] = run("'" + glslc + "' --target-env=vulkan1.2 -o '" + spv.string() + "' '" +
                                 comp.string() + "'",
                             dir.path / "glslc.log");
  INFO(what << ": glslc says:\n" << out);
  CHECK(rc == 0);
  CHECK(out.empty());
  if (rc != 0 || !fs::exists(spv)) return;
  if (spirv_val.empty()) return;
  const auto [vrc, vout] = run("'" + spirv_val + "' --target-env vulkan1.2 '" + spv.string() + "'",
                               dir.path / "val.log");
  INFO("spirv-val says:\n" << vout);
  CHECK(vrc == 0);
}

} // namespace

TEST_CASE("the math library has every function of the op catalog in float and double",
          "[glsl_math]") {
  std::set<std::pair<std::string, std::string>> seen;
  for (const auto& f : glsl::math_library()) {
    INFO(f.name << " for " << f.type);
    CHECK(seen.insert({f.name, f.type}).second); // no entry twice
    const std::string type = f.type, name = f.name;
    REQUIRE((type == "float" || type == "double"));
    if (public_functions.count(name)) {
      // The entry defines the overload it is named after.
      CHECK(std::string(f.source).find(type + " " + name + "(") != std::string::npos);
    } else {
      // A helper: kiln_<what>_f32 or _f64, matching its type; no reserved "__" names.
      CHECK(name.rfind("kiln_", 0) == 0);
      CHECK(name.substr(name.size() - 4) == (type == "float" ? "_f32" : "_f64"));
    }
    CHECK(std::string(f.source).find("__") == std::string::npos);
    for (const auto& d : split_deps(f.deps)) { // every dependency exists for the same type
      INFO("dependency " << d);
      CHECK(find_entry(d, type));
    }
  }
  for (const auto& name : public_names())
    for (const char* type : types) {
      INFO(name << " for " << type);
      CHECK(seen.count({name, type}) == 1);
    }
}

TEST_CASE("math_source gives exactly the definitions needed, dependencies first, each once",
          "[glsl_math]") {
  const auto all = public_names();
  for (const char* type : types) {
    for (const auto& n : all) // each function alone
      check_source({n}, type);
    check_source(all, type);
    // Random subsets in random order, with repeats: the same definitions, whatever the order.
    for (int k = 0; k < 50; ++k) {
      std::vector<std::string> names;
      const auto m = std::uniform_int_distribution<std::size_t>(1, 8)(rng());
      for (std::size_t i = 0; i < m; ++i)
        names.push_back(all[std::uniform_int_distribution<std::size_t>(0, all.size() - 1)(rng())]);
      INFO("names: " << [&] {
        std::string s;
        for (const auto& n : names)
          s += n + " ";
        return s;
      }());
      check_source(names, type);
      auto twice = names;
      twice.insert(twice.end(), names.begin(), names.end());
      CHECK(source_of(twice, type) == source_of(names, type));
    }
  }
  // Shared helpers come once: sinh and cosh both need kiln_exp_core_f64.
  const auto s = source_of({"kiln_sinh", "kiln_cosh"}, "double");
  CHECK(count(s, "double kiln_exp_core_f64(") == 1);
  CHECK(s.find("double kiln_exp_core_f64(") < s.find("double kiln_expm1("));
  CHECK(s.find("double kiln_expm1(") < s.find("double kiln_sinh("));
  CHECK(source_of({}, "float").empty());
}

TEST_CASE("math_source rejects unknown functions and types, and broken libraries", "[glsl_math]") {
  auto fails = [](std::vector<std::string> names, const std::string& type, const char* reason,
                  const std::string& detail) {
    try {
      source_of(names, type);
      FAIL("no error for " << type);
    } catch (const kiln::error& e) {
      CHECK(e.op() == "glsl math");
      CHECK(e.reason() == reason);
      CHECK(e.details().find(detail) != std::string::npos);
    }
  };
  fails({"kiln_gamma"}, "float", "unknown math function", "kiln_gamma for float");
  fails({"kiln_exp", "kiln_nope"}, "double", "unknown math function", "kiln_nope for double");
  fails({"exp"}, "float", "unknown math function", "exp for float");
  fails({"kiln_exp_core_f64"}, "float", "unknown math function", "kiln_exp_core_f64 for float");
  fails({"kiln_exp"}, "half", "no math library for this type", "half");
  fails({}, "int", "no math library for this type", "int");

  // The library itself is checked for cycles and missing dependencies when resolving.
  const glsl::math_function cyclic[] = {{"kiln_a", "float", "A\n", "kiln_b"},
                                        {"kiln_b", "float", "B\n", "kiln_c"},
                                        {"kiln_c", "float", "C\n", "kiln_a"}};
  const std::string_view a[] = {"kiln_a"};
  try {
    glsl::detail::math_source_in(cyclic, a, "float");
    FAIL("no error for a cycle");
  } catch (const kiln::error& e) {
    CHECK(e.reason() == "dependency cycle in the math library");
    CHECK(e.details().find("kiln_a (float)") != std::string::npos);
  }
  const glsl::math_function missing[] = {{"kiln_a", "float", "A\n", " kiln_b  kiln_x "},
                                         {"kiln_b", "float", "B\n", ""},
                                         {"kiln_x", "double", "X\n", ""}};
  try {
    glsl::detail::math_source_in(missing, a, "float");
    FAIL("no error for a missing dependency");
  } catch (const kiln::error& e) {
    CHECK(e.reason() == "a library function needs one the library does not have");
    CHECK(e.details() == "kiln_a (float) needs kiln_x");
  }
  // Extra spaces in a dependency list are fine; a diamond resolves each entry once.
  const glsl::math_function diamond[] = {{"kiln_a", "float", "A\n", " kiln_b  kiln_c "},
                                         {"kiln_b", "float", "B\n", "kiln_d"},
                                         {"kiln_c", "float", "C\n", "kiln_d"},
                                         {"kiln_d", "float", "D\n", ""}};
  CHECK(glsl::detail::math_source_in(diamond, a, "float") == "D\nB\nC\nA\n");
}

TEST_CASE("every math function compiles with glslc and passes spirv-val", "[glsl_math]") {
  const std::string glslc = program_on_path("glslc");
  if (glslc.empty()) {
    WARN("glslc is not on PATH: the GLSL math library is not compiled");
    return;
  }
  const std::string spirv_val = program_on_path("spirv-val");
  if (spirv_val.empty()) WARN("spirv-val is not on PATH: SPIR-V is not validated");
  temp_dir dir;
  const auto all = public_names();
  std::string both;
  for (const char* type : types) {
    for (const auto& n : all) // alone: its dependency list must be complete
      compile_and_validate(wrapper({n}, type, source_of({n}, type)), n + " for " + type, glslc,
                           spirv_val, dir);
    both += source_of(all, type);
  }
  // Everything in one shader, as a kernel using both float types gets it.
  compile_and_validate(wrapper(all, "float", both), "all float and double functions together",
                       glslc, spirv_val, dir);
  compile_and_validate(wrapper(all, "double", both), "all, called on doubles", glslc, spirv_val,
                       dir);
}
