// kiln::jit::glsl_compiler: GLSL -> SPIR-V through libshaderc or glslc. Modules are checked
// against the SPIR-V spec's encoding (magic, header version, capabilities, decorations, a
// random constant that must come through) and by spirv-val; every failure is a kiln::error
// that says why; temp files never stay behind.
#include "kiln/jit/vulkan/shaderc.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <sys/stat.h>

using kiln::jit::glsl_compiler;
using kiln::jit::glsl_compiler_config;
using kiln::jit::shaderc_path;

namespace {

std::mt19937_64& rng() {
  static std::mt19937_64 g(Catch::rngSeed());
  return g;
}
std::uint32_t draw(std::uint32_t lo, std::uint32_t hi) {
  return std::uniform_int_distribution<std::uint32_t>(lo, hi)(rng());
}

// Sets an environment variable for one scope, restoring what was there.
class scoped_env {
public:
  scoped_env(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    ::setenv(name, value.c_str(), 1);
  }
  ~scoped_env() {
    if (had_)
      ::setenv(name_, old_.c_str(), 1);
    else
      ::unsetenv(name_);
  }

private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

// A private TMPDIR, so the test sees exactly the temp files the compiler leaves.
std::filesystem::path make_temp_dir() {
  std::string t = (std::filesystem::temp_directory_path() / "kiln-test-shaderc-XXXXXX").string();
  if (!::mkdtemp(t.data())) throw std::runtime_error("mkdtemp failed for " + t);
  return t;
}
struct scoped_tmpdir {
  std::filesystem::path path = make_temp_dir();
  scoped_env env{"TMPDIR", path.string()};
  ~scoped_tmpdir() { std::filesystem::remove_all(path); }

  std::size_t files() const {
    return static_cast<std::size_t>(std::distance(std::filesystem::directory_iterator(path),
                                                  std::filesystem::directory_iterator()));
  }
  // An executable shell script, standing in for glslc.
  std::string script(const std::string& name, const std::string& body) const {
    const std::string p = (path / name).string();
    std::ofstream(p) << "#!/bin/sh\n" << body << "\n";
    ::chmod(p.c_str(), 0755);
    return p;
  }
};

// The SPIR-V instructions of a module (after the 5-word header): opcode and operands.
struct instruction {
  std::uint32_t opcode;
  std::vector<std::uint32_t> operands;
};
std::vector<instruction> instructions(const std::vector<std::uint32_t>& words) {
  std::vector<instruction> out;
  for (std::size_t at = 5; at < words.size();) {
    const std::uint32_t count = words[at] >> 16;
    if (count == 0 || at + count > words.size())
      throw std::runtime_error("malformed SPIR-V at word " + std::to_string(at));
    out.push_back({words[at] & 0xffffu, {words.begin() + at + 1, words.begin() + at + count}});
    at += count;
  }
  return out;
}
// Opcodes and enumerants from the SPIR-V specification.
constexpr std::uint32_t op_capability = 17, op_constant = 43, op_decorate = 71;
constexpr std::uint32_t cap_float16 = 9, cap_float64 = 10, cap_int64 = 11, decoration_spec_id = 1;

bool has(const std::vector<instruction>& code, std::uint32_t opcode,
         const std::vector<std::uint32_t>& operands_end) {
  return std::any_of(code.begin(), code.end(), [&](const instruction& i) {
    return i.opcode == opcode && i.operands.size() >= operands_end.size() &&
           std::equal(operands_end.rbegin(), operands_end.rend(), i.operands.rbegin());
  });
}

// Uses every feature kiln's generated kernels use: a specialization constant for the
// workgroup size, push constants, storage buffers, 64-bit ints and floats, 16-bit floats.
// `k` is a constant that must appear in the module.
std::string feature_shader(std::uint32_t k) {
  return R"(#version 450
#extension GL_EXT_shader_explicit_arithmetic_types : require
layout(local_size_x_id = 0) in;
layout(push_constant) uniform Params { uint64_t n; double scale; } params;
layout(std430, set = 0, binding = 0) readonly buffer In { double x[]; };
layout(std430, set = 0, binding = 1) readonly buffer Ints { int64_t k[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Out { float y[]; };
layout(std430, set = 0, binding = 3) writeonly buffer Bits { uint z[]; };
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (uint64_t(i) >= params.n) return;
  double v = x[i] * params.scale + double(k[i]);
  float16_t h = float16_t(v) * float16_t(0.5);
  y[i] = float(h);
  z[i] = i ^ )" +
         std::to_string(k) + "u;\n}\n";
}

std::string syntax_error_shader(std::uint32_t error_line) {
  std::string s = "#version 450\nlayout(local_size_x = 1) in;\n";
  for (std::uint32_t line = 3; line < error_line; ++line)
    s += "// filler\n";
  return s + "void main() { int x = ; }\n";
}

// The module is SPIR-V for `env`, valid, and made from feature_shader(k).
void check_feature_module(const kiln::jit::spirv_module& m, std::uint32_t k,
                          const std::string& env = "vulkan1.1") {
  REQUIRE(m.words.size() > 5);
  CHECK(m.words[0] == 0x07230203u);
  // Vulkan 1.0, 1.1, 1.2, 1.3 consume SPIR-V 1.0, 1.3, 1.5, 1.6 (the header's word 1).
  const std::uint32_t expected_version = env == "vulkan1.0"   ? 0x10000u
                                         : env == "vulkan1.1" ? 0x10300u
                                         : env == "vulkan1.2" ? 0x10500u
                                                              : 0x10600u;
  CHECK(m.words[1] == expected_version);
  CHECK(m.compile_ms > 0);
  const auto code = instructions(m.words);
  CHECK(has(code, op_capability, {cap_int64}));
  CHECK(has(code, op_capability, {cap_float64}));
  CHECK(has(code, op_capability, {cap_float16}));
  CHECK(has(code, op_decorate, {decoration_spec_id, 0})); // local_size_x_id = 0
  CHECK(has(code, op_constant, {k}));
  CHECK(kiln::jit::detail::entry_point_names(m.words) == std::vector<std::string>{"main"});
  const auto [valid, message] = kiln::jit::validate_spirv(m.words, env);
  INFO(message);
  if (message == "spirv-val not found")
    WARN("spirv-val not found: modules are not validated");
  else
    CHECK((valid && message.empty()));
}

// A config (designated initializers would trip GCC 12's -Wmissing-field-initializers).
glsl_compiler_config config(shaderc_path path, std::string glslc = {}) {
  glsl_compiler_config c;
  c.path = path;
  c.glslc = std::move(glslc);
  return c;
}

glsl_compiler& forced_glslc() {
  static glsl_compiler compiler(config(shaderc_path::glslc));
  return compiler;
}

} // namespace

TEST_CASE("shaderc: a compute shader with every feature compiles to valid SPIR-V", "[shaderc]") {
  const std::uint32_t k = draw(1u << 20, 1u << 30);
  INFO("constant " << k);
  glsl_compiler& compiler = glsl_compiler::instance();
  INFO(compiler.path_name() << "; passed over: " << compiler.inprocess_rejection());
  CHECK(compiler.options() == "-fshader-stage=compute --target-env=vulkan1.1 -O");
  CHECK(!compiler.version().empty());
  check_feature_module(compiler.compile(feature_shader(k)), k);

  SECTION("through glslc, forced") {
    CHECK(forced_glslc().chosen_path() == shaderc_path::glslc);
    CHECK(forced_glslc().path_name().rfind("glslc (/", 0) == 0);
    CHECK(forced_glslc().version().rfind("glslc shaderc ", 0) == 0);
    check_feature_module(forced_glslc().compile(feature_shader(k)), k);
  }
  SECTION("for a random Vulkan version, optimized or not") {
    const std::string env = "vulkan1." + std::to_string(draw(0, 3));
    const bool optimize = draw(0, 1) == 1;
    INFO(env << (optimize ? " -O" : " -O0"));
    glsl_compiler_config cfg;
    cfg.target_env = env;
    cfg.optimize = optimize;
    glsl_compiler c(cfg);
    CHECK(c.options() ==
          "-fshader-stage=compute --target-env=" + env + (optimize ? " -O" : " -O0"));
    check_feature_module(c.compile(feature_shader(k)), k, env);
  }
}

TEST_CASE("shaderc: a syntax error names the line, with the numbered source", "[shaderc]") {
  scoped_tmpdir tmp;
  const std::uint32_t line = draw(3, 40);
  const std::string bad = syntax_error_shader(line);
  for (glsl_compiler* c : {&glsl_compiler::instance(), &forced_glslc()}) {
    INFO(c->path_name() << ", error on line " << line);
    try {
      c->compile(bad);
      FAIL("no error");
    } catch (const kiln::error& e) {
      CHECK(e.op() == "shaderc");
      CHECK(e.reason() == "GLSL compile failed");
      const std::string& d = e.details();
      INFO(d);
      CHECK(d.find("kernel.comp:" + std::to_string(line) + ": error") != std::string::npos);
      CHECK(d.find("syntax error") != std::string::npos);
      CHECK(d.find(std::to_string(line) + " | void main() { int x = ; }") != std::string::npos);
      CHECK(d.find(tmp.path.string()) == std::string::npos); // the temp file is not named
    }
    CHECK(tmp.files() == 0);
  }
  forced_glslc().compile(feature_shader(7));
  CHECK(tmp.files() == 0);
}

TEST_CASE("shaderc: a long source shows its first lines and those around the error", "[shaderc]") {
  const std::uint32_t total = draw(300, 500), line = draw(260, total - 10);
  std::string src;
  for (std::uint32_t i = 1; i <= total; ++i)
    src += "line" + std::to_string(i) + "\n";
  const std::string shown =
      kiln::jit::detail::numbered_source(src, "kernel.comp:" + std::to_string(line) + ": error");
  INFO(total << " lines, error on " << line);
  auto contains = [&](const std::string& s) { return shown.find(s) != std::string::npos; };
  CHECK(contains("    1 | line1\n"));
  CHECK(contains("  200 | line200\n"));
  CHECK(!contains("| line201\n"));
  CHECK(contains(std::to_string(line) + " | line" + std::to_string(line) + "\n"));
  CHECK(contains(std::to_string(line + 3) + " | line" + std::to_string(line + 3) + "\n"));
  CHECK(!contains("| line" + std::to_string(line + 4) + "\n"));
  CHECK(contains("  ...\n"));
  CHECK(contains("(" + std::to_string(total) + " lines in all)"));
}

TEST_CASE("shaderc: the in-process library, where one works here", "[shaderc]") {
  try {
    glsl_compiler lib(config(shaderc_path::library));
    CHECK(lib.chosen_path() == shaderc_path::library);
    CHECK(lib.path_name().rfind("libshaderc (", 0) == 0);
    CHECK(lib.version().rfind("libshaderc ", 0) == 0);
    const std::uint32_t k = draw(1u << 20, 1u << 30);
    check_feature_module(lib.compile(feature_shader(k)), k);
    CHECK_THROWS_WITH(lib.compile(syntax_error_shader(5)), Catch::Contains("kernel.comp:5: error"));
  } catch (const kiln::error& e) {
    WARN("no working libshaderc on this machine, so the in-process path is NOT exercised: "
         << e.details());
    CHECK(e.reason() == "no GLSL compiler");
    // Every candidate was tried, each with a reason.
    for (const char* name :
         {"libshaderc_shared.so:", "libshaderc_shared.so.1:", "libshaderc.so.1:"})
      CHECK(e.details().find(name) != std::string::npos);
    CHECK(e.details().find("glslc") == std::string::npos); // the library alone was asked for
  }
}

TEST_CASE("shaderc: Debian 12's libshaderc.so.1 is rejected with dlopen's reason", "[shaderc]") {
  const std::string debian = "/usr/lib/x86_64-linux-gnu/libshaderc.so.1";
  if (!std::filesystem::exists(debian)) {
    WARN(debian << " is not on this machine: nothing to check");
    return;
  }
  std::string why;
  CHECK(kiln::jit::shaderc_library::open_first({{"", debian}}, 1, true, why) == nullptr);
  INFO(why);
  CHECK(why.find("undefined symbol") != std::string::npos);
  // Tried first by a compiler told to use it: its reason stays in inprocess_rejection().
  glsl_compiler_config cfg;
  cfg.library = debian;
  glsl_compiler c(cfg);
  CHECK(c.inprocess_rejection().rfind(why, 0) == 0);
}

// KILN_SHADERC_LIBRARY naming no file is an error (test_settings.cpp); the library the config
// names is tried first, and its reason kept, before the usual names.
TEST_CASE("shaderc: a library naming no file is rejected with a reason", "[shaderc]") {
  const std::string missing = "/nonexistent/kiln-" + std::to_string(draw(0, 1u << 30)) + ".so";
  glsl_compiler_config cfg;
  cfg.library = missing;
  glsl_compiler c(cfg); // falls through to the usual names, then glslc
  INFO(c.inprocess_rejection());
  CHECK(c.inprocess_rejection().rfind(missing + ": cannot open shared object file", 0) == 0);
  std::string why;
  CHECK(kiln::jit::shaderc_library::open_first({{"", missing}}, 1, true, why) == nullptr);
  CHECK(why.find(missing) != std::string::npos);
}

TEST_CASE("shaderc: a glslc that is not there or not glslc is a clear error", "[shaderc]") {
  scoped_tmpdir tmp;
  auto no_compiler = [](glsl_compiler_config config, const std::string& expected) {
    try {
      glsl_compiler c(std::move(config));
      FAIL("accepted: " << c.path_name());
    } catch (const kiln::error& e) {
      CHECK(e.op() == "shaderc");
      CHECK(e.reason() == "no GLSL compiler");
      CHECK_THAT(e.details(), Catch::StartsWith("glslc: ") && Catch::Contains(expected));
    }
  };
  // KILN_GLSLC naming no usable program is an error under its name: test_settings.cpp.
  SECTION("a glslc naming no file") {
    no_compiler(config(shaderc_path::glslc, "/nonexistent/glslc"),
                "/nonexistent/glslc: No such file or directory");
  }
  SECTION("a glslc not on PATH") {
    no_compiler(config(shaderc_path::glslc, "kiln-no-such-glslc"),
                "kiln-no-such-glslc not found on PATH");
  }
  SECTION("a file that is not executable") {
    const std::string p = tmp.script("glslc", "exit 0");
    ::chmod(p.c_str(), 0644);
    no_compiler(config(shaderc_path::glslc, p), p + ": not executable");
  }
  SECTION("a program whose --version fails") {
    no_compiler(config(shaderc_path::glslc, tmp.script("glslc", "echo broken >&2; exit 3")),
                "--version: exit code 3 broken");
  }
  SECTION("an unsupported target environment") {
    glsl_compiler_config cfg;
    cfg.target_env = "vulkan9.9";
    CHECK_THROWS_WITH(glsl_compiler(cfg), Catch::Contains("unsupported target environment") &&
                                              Catch::Contains("'vulkan9.9'"));
  }
}

TEST_CASE("shaderc: with no compiler at all, the error lists what was tried", "[shaderc]") {
  glsl_compiler_config cfg = config(shaderc_path::automatic, "/nonexistent/glslc");
  try {
    glsl_compiler c(cfg);
    // Only possible where a libshaderc works: then it must be the one chosen.
    CHECK(c.chosen_path() == shaderc_path::library);
  } catch (const kiln::error& e) {
    CHECK(e.reason() == "no GLSL compiler");
    CHECK_THAT(e.details(), Catch::StartsWith("libshaderc: ") &&
                                Catch::Contains("libshaderc.so.1") &&
                                Catch::Contains("; glslc: /nonexistent/glslc: No such file"));
  }
}

TEST_CASE("shaderc: an unusable TMPDIR is a clear error", "[shaderc]") {
  scoped_env env("TMPDIR", "/nonexistent/tmp");
  CHECK_THROWS_WITH(forced_glslc().compile(feature_shader(1)),
                    Catch::Contains("cannot create a temporary file") &&
                        Catch::Contains("/nonexistent/tmp/kiln-"));
  CHECK_THROWS_WITH(kiln::jit::validate_spirv(std::vector<std::uint32_t>{0x07230203u}),
                    Catch::Contains("cannot create a temporary file"));
}

TEST_CASE("shaderc: a glslc that hangs, crashes or prints junk is a clear error", "[shaderc]") {
  scoped_tmpdir tmp;
  const std::string version = "if [ \"$1\" = --version ]; then echo fake 1.0; exit 0; fi\n";
  auto compiler = [&](const std::string& body) {
    glsl_compiler_config cfg = config(shaderc_path::glslc, tmp.script("glslc", version + body));
    cfg.glslc_timeout = std::chrono::milliseconds(300);
    return glsl_compiler(cfg);
  };
  const std::string src = feature_shader(1);
  SECTION("hangs: killed at the deadline") {
    const glsl_compiler c = compiler("exec sleep 20");
    CHECK(c.version() == "glslc fake 1.0");
    const auto start = std::chrono::steady_clock::now();
    CHECK_THROWS_WITH(c.compile(src),
                      Catch::Contains("glslc did not finish") && Catch::Contains("timed out"));
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  }
  SECTION("crashes") {
    CHECK_THROWS_WITH(compiler("kill -SEGV $$").compile(src),
                      Catch::Contains("killed by signal 11"));
  }
  SECTION("succeeds without a module") {
    CHECK_THROWS_WITH(compiler("echo not-spirv; exit 0").compile(src),
                      Catch::Contains("no valid SPIR-V module") && Catch::Contains("10 bytes"));
  }
  SECTION("fails without saying why") {
    CHECK_THROWS_WITH(compiler("exit 1").compile(src),
                      Catch::Contains("GLSL compile failed") &&
                          Catch::Contains("glslc ended with exit code 1 and no message") &&
                          Catch::Contains("    1 | #version"));
  }
  CHECK(tmp.files() == 1); // only the fake glslc: its temp sources are gone
}

TEST_CASE("shaderc: modules are checked: SPIR-V words and the entry point", "[shaderc]") {
  using kiln::jit::detail::spirv_words;
  const std::vector<std::uint32_t> good =
      glsl_compiler::instance().compile(feature_shader(3)).words;
  std::string bytes(reinterpret_cast<const char*>(good.data()), good.size() * 4);
  CHECK(spirv_words(bytes, "test") == good);
  CHECK_THROWS_WITH(spirv_words(bytes.substr(0, bytes.size() - draw(1, 3)), "test"),
                    Catch::Contains("no valid SPIR-V module"));
  CHECK_THROWS_WITH(spirv_words(bytes.substr(0, 16), "test"),
                    Catch::Contains("no valid SPIR-V module"));
  bytes[draw(0, 3)] ^= static_cast<char>(draw(1, 255)); // a wrong magic number
  CHECK_THROWS_WITH(spirv_words(bytes, "test"), Catch::Contains("no valid SPIR-V module"));

  CHECK_THROWS_WITH(glsl_compiler::instance().compile(feature_shader(3), "kernel_main"),
                    Catch::Contains("entry point not in the module") &&
                        Catch::Contains("'kernel_main'") && Catch::Contains("has: main"));
}

TEST_CASE("shaderc: validate_spirv rejects a broken module, and says when it cannot run",
          "[shaderc]") {
  std::vector<std::uint32_t> words = glsl_compiler::instance().compile(feature_shader(5)).words;
  REQUIRE(kiln::jit::validate_spirv(words).first);
  // The id bound (header word 3) below the ids in use: invalid, whatever the content.
  words[3] = 2;
  const auto [valid, message] = kiln::jit::validate_spirv(words);
  INFO(message);
  CHECK(!valid);
  CHECK(message.find("error") != std::string::npos);
  // No spirv-val on PATH (KILN_SPIRV_VAL naming none is an error: test_settings.cpp).
  scoped_env env("PATH", "/nonexistent");
  CHECK(kiln::jit::validate_spirv(words) ==
        std::pair<bool, std::string>{false, "spirv-val not found"});
}

TEST_CASE("shaderc: a program that cannot start is a kiln::error", "[shaderc]") {
  CHECK_THROWS_WITH(
      kiln::jit::run_program("/nonexistent/program", {}, std::chrono::seconds(1), "test"),
      Catch::Contains("cannot start a program") &&
          Catch::Contains("/nonexistent/program: No such file or directory"));
}

TEST_CASE("shaderc: 8 threads compiling at once all get their own module", "[shaderc]") {
  glsl_compiler& compiler = glsl_compiler::instance();
  std::vector<std::uint32_t> constants(8);
  for (auto& k : constants)
    k = draw(1u << 20, 1u << 30);
  std::vector<kiln::jit::spirv_module> modules(8);
  std::vector<std::string> errors(8);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      try {
        modules[t] = compiler.compile(feature_shader(constants[t]));
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  }
  for (auto& th : threads)
    th.join();
  for (std::size_t t = 0; t < 8; ++t) {
    INFO("thread " << t << ": " << errors[t]);
    CHECK(errors[t].empty());
    REQUIRE(modules[t].words.size() > 5);
    CHECK(has(instructions(modules[t].words), op_constant, {constants[t]}));
  }
}
