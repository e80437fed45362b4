// Issue 12 point 4: every environment variable kiln reads is an entry of settings.hpp's
// table, every "KILN_..." string in the sources names an entry, README.md's "Settings"
// table is that table row for row, and a bad value of each variable is a kiln::error whose
// op is the variable's name. Values cached in a function-local static are tested through
// the parser that reads them (settings::flag, parse_stream_bytes, find_cuda_home).
#include "error_support.hpp"
#include "support.hpp"

#include "kiln/jit/cuda/nvrtc.hpp"
#include "kiln/jit/vulkan/backend.hpp"
#include "kiln/jit/vulkan/shaderc.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <typeinfo>

#ifndef KILN_TEST_SOURCE_DIR
#error "tests/CMakeLists.txt passes the source tree's root as KILN_TEST_SOURCE_DIR"
#endif

namespace {

namespace fs = std::filesystem;
namespace settings = kiln::settings;

// A fresh directory, removed at the end of the scope.
struct temp_dir {
  fs::path path;
  temp_dir() {
    std::string t = (fs::temp_directory_path() / "kiln-test-settings-XXXXXX").string();
    REQUIRE(::mkdtemp(t.data()));
    path = t;
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  // A regular file in it: a path "under" it is no folder and cannot become one.
  std::string file(const std::string& name) const {
    std::ofstream(path / name) << "not a folder\n";
    return (path / name).string();
  }
};

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  REQUIRE(in);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool ident_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// The contents of a C++ file's string literals, comments skipped: ordinary ones (escapes
// kept as written; a variable's name has none) and raw ones whole.
std::vector<std::string> string_literals(const std::string& s) {
  std::vector<std::string> out;
  const auto npos = std::string::npos;
  std::size_t i = 0;
  while (i < s.size()) {
    const char c = s[i], next = i + 1 < s.size() ? s[i + 1] : '\0';
    const char prev = i > 0 ? s[i - 1] : '\0';
    if (c == '/' && next == '/') {
      i = s.find('\n', i);
    } else if (c == '/' && next == '*') {
      i = s.find("*/", i + 2);
      i = i == npos ? npos : i + 2;
    } else if (c == 'R' && next == '"' &&
               (!ident_char(prev) || std::string("8LuU").find(prev) != npos)) {
      const std::size_t open = s.find('(', i + 2);
      REQUIRE(open != npos);
      const std::string close = ")" + s.substr(i + 2, open - i - 2) + "\"";
      const std::size_t end = s.find(close, open);
      REQUIRE(end != npos);
      out.push_back(s.substr(open + 1, end - open - 1));
      i = end + close.size();
    } else if (c == '\'' && ident_char(prev)) {
      ++i; // a digit separator (1'000), or the closing quote of u8'x'-style prefixes
    } else if (c == '"' || c == '\'') {
      std::size_t j = i + 1;
      while (j < s.size() && s[j] != c && s[j] != '\n')
        j += s[j] == '\\' ? 2 : 1;
      if (c == '"') out.push_back(s.substr(i + 1, j - i - 1));
      i = j + 1;
    } else {
      ++i;
    }
    if (i == npos) break;
  }
  return out;
}

// Every string literal of the library's and the examples' sources, with where it is.
std::multimap<std::string, std::string> source_literals() {
  std::multimap<std::string, std::string> out;
  const fs::path root = KILN_TEST_SOURCE_DIR;
  for (const char* dir : {"include", "jit", "kernels", "autodiff", "examples"})
    for (const auto& f : fs::recursive_directory_iterator(root / dir)) {
      const auto ext = f.path().extension();
      if (!f.is_regular_file() || (ext != ".hpp" && ext != ".cpp" && ext != ".h")) continue;
      for (auto& lit : string_literals(read_file(f.path())))
        out.emplace(std::move(lit), fs::relative(f.path(), root).string());
    }
  return out;
}

bool in_table(std::string_view name) {
  for (const auto& v : settings::variables)
    if (v.name == name) return true;
  return false;
}

} // namespace

TEST_CASE("settings: the literal scanner finds what it should", "[settings]") {
  const std::string code = "// \"KILN_A\" in a comment\n"
                           "f(\"KILN_B\", 'x', '\"', 1'000); /* \"KILN_C\" */\n"
                           "g(R\"d(raw \"KILN_D\" text)d\", \"esc \\\" KILN_E\");\n";
  CHECK(string_literals(code) ==
        std::vector<std::string>{"KILN_B", "raw \"KILN_D\" text", "esc \\\" KILN_E"});
}

TEST_CASE("settings: every KILN_ name in the sources is in the table, and every entry is read",
          "[settings]") {
  const auto literals = source_literals();
  REQUIRE(literals.size() > 1000); // the scan saw the sources
  const std::regex kiln_name("KILN_[A-Z0-9_]+");
  for (const auto& [text, file] : literals)
    for (std::sregex_iterator m(text.begin(), text.end(), kiln_name), end; m != end; ++m) {
      INFO(file << ": \"" << text << "\"");
      CHECK(in_table(m->str()));
    }
  // An entry no source names as a whole literal (outside the table) is stale.
  for (const auto& v : settings::variables) {
    INFO(v.name);
    bool read = false;
    const auto [first, last] = literals.equal_range(std::string(v.name));
    for (auto it = first; it != last; ++it)
      read = read || it->second != "include/kiln/settings.hpp";
    CHECK(read);
    CHECK_FALSE(v.fallback.empty());
    CHECK_FALSE(v.meaning.empty());
    CHECK(v.words.empty() == (v.kind != settings::kind::words));
  }
}

TEST_CASE("settings: README.md's Settings table is the table, row for row", "[settings]") {
  std::istringstream readme(read_file(fs::path(KILN_TEST_SOURCE_DIR) / "README.md"));
  std::vector<std::string> rows;
  std::string line;
  bool in_section = false;
  int headings = 0;
  while (std::getline(readme, line)) {
    if (line.starts_with("#")) {
      in_section = line == "### Settings";
      headings += in_section;
    } else if (in_section && line.starts_with("| `")) {
      rows.push_back(line);
    }
  }
  REQUIRE(headings == 1);
  std::vector<std::string> want;
  for (const auto& v : settings::variables)
    want.push_back("| `" + std::string(v.name) + "` | " + std::string(v.fallback) + " | " +
                   std::string(v.meaning) + " |");
  CHECK(rows.size() == want.size());
  for (std::size_t i = 0; i < std::max(rows.size(), want.size()); ++i) {
    INFO("row " << i);
    CHECK((i < rows.size() ? rows[i] : "(missing)") == (i < want.size() ? want[i] : "(extra)"));
  }
}

TEST_CASE("settings: KILN_DEVICE names a device kind, an index and a usable device", "[settings]") {
  for (const char* bad : {"nonsense", "gpu:0", "Vulkan:0", " host"}) {
    env_override e("KILN_DEVICE", bad);
    expect_error([] { kiln::default_device(); }, "KILN_DEVICE", {"unknown device", bad});
  }
  for (const char* bad : {"vulkan: 0", "vulkan", "cuda:-1", "vulkan:4294967296"}) {
    env_override e("KILN_DEVICE", bad);
    expect_error([] { kiln::default_device(); }, "KILN_DEVICE", {"malformed", bad});
  }
  {
    env_override e("KILN_DEVICE", "metal:0"); // never usable off Apple platforms
    expect_error([] { kiln::default_device(); }, "KILN_DEVICE", {"not available"});
  }
  for (const char* host : {"host", "cpu", ""}) {
    env_override e("KILN_DEVICE", host);
    CHECK(kiln::default_device().is_host());
  }
}

TEST_CASE("settings: integers are plain decimal digits within their range", "[settings]") {
  for (const char* bad :
       {"abc", "12x", "-5", "+5", " 5", "5 ", "0x10", "1.5", "1e3", "99999999999999999999"}) {
    INFO("bad integer \"" << bad << "\"");
    env_override e("KILN_NUM_THREADS", bad);
    expect_error([] { kiln::thread_pool::default_threads(); }, "KILN_NUM_THREADS",
                 {"bad value", bad});
    env_override w("KILN_VK_WORKGROUP", bad);
    expect_error([] { kiln::jit::vk::env_number("KILN_VK_WORKGROUP", 64, 1, 1024); },
                 "KILN_VK_WORKGROUP", {"bad value", bad});
    env_override g("KILN_VK_MAX_GROUPS", bad);
    expect_error([] { kiln::jit::vk::env_number("KILN_VK_MAX_GROUPS", 64, 1, 65535); },
                 "KILN_VK_MAX_GROUPS", {"bad value", bad});
    expect_error([&] { kiln::detail::parse_stream_bytes(bad); }, "KILN_STREAM_BYTES",
                 {"whole number", bad});
  }
  for (const char* out : {"0", "1025", "4294967297"}) {
    INFO("out of range \"" << out << "\"");
    env_override e("KILN_NUM_THREADS", out);
    expect_error([] { kiln::thread_pool::default_threads(); }, "KILN_NUM_THREADS",
                 {"[1, 1024]", out});
    env_override g("KILN_VK_MAX_GROUPS", out);
    expect_error([] { kiln::jit::vk::env_number("KILN_VK_MAX_GROUPS", 64, 1, 1024); },
                 "KILN_VK_MAX_GROUPS", {"[1, 1024]"});
  }
  // A K/M/G suffix is for byte counts only.
  expect_error([] { kiln::detail::parse_stream_bytes("12k"); }, "KILN_STREAM_BYTES",
               {"whole number", "12k"});
  const int n = test::draw(1, 1024);
  {
    env_override e("KILN_NUM_THREADS", std::to_string(n));
    CHECK(kiln::thread_pool::default_threads() == n);
    env_override w("KILN_VK_WORKGROUP", std::to_string(n));
    CHECK(kiln::jit::vk::env_number("KILN_VK_WORKGROUP", 64, 1, 1024) == std::uint32_t(n));
  }
  {
    env_override e("KILN_NUM_THREADS", "");
    CHECK(kiln::thread_pool::default_threads() >= 1); // empty is "not set"
    env_override w("KILN_VK_WORKGROUP", nullptr);
    CHECK(kiln::jit::vk::env_number("KILN_VK_WORKGROUP", 64, 1, 1024) == 64);
  }
  const std::int64_t bytes = std::int64_t(test::rng()() >> 2);
  CHECK(kiln::detail::parse_stream_bytes(std::to_string(bytes).c_str()) ==
        (bytes ? bytes : INT64_MAX));
  CHECK(kiln::detail::parse_stream_bytes("0") == INT64_MAX); // 0: never stream
}

TEST_CASE("settings: KILN_CACHE_MAX_BYTES is a byte count with an optional K/M/G", "[settings]") {
  temp_dir dir;
  env_override d("KILN_CACHE_DIR", dir.path.string());
  for (const char* bad : {"12X", "1MB", "1.5M", "M", "-1", "17179869184G"}) {
    env_override e("KILN_CACHE_MAX_BYTES", bad);
    expect_error([] { (void)kiln::jit::disk_cache::from_environment(); }, "KILN_CACHE_MAX_BYTES",
                 {"bad value", bad});
  }
  const std::uint64_t n = test::rng()() >> 40;
  for (const auto& [text, want] :
       std::vector<std::pair<std::string, std::uint64_t>>{{std::to_string(n), n},
                                                          {std::to_string(n) + "k", n << 10},
                                                          {std::to_string(n) + "M", n << 20},
                                                          {std::to_string(n) + "G", n << 30}}) {
    CHECK(settings::parse_bytes("KILN_CACHE_MAX_BYTES", text) == want);
  }
}

TEST_CASE("settings: a KILN_CACHE_DIR that cannot be used is an error", "[settings]") {
  temp_dir dir;
  const std::string file = dir.file("plain");
  for (const std::string& bad : {file, file + "/sub"}) {
    INFO(bad);
    env_override e("KILN_CACHE_DIR", bad);
    expect_error([] { (void)kiln::jit::disk_cache::from_environment(); }, "KILN_CACHE_DIR",
                 {"cannot use the cache folder", bad});
  }
  // A bound of 0 turns the disk cache off on purpose: no error, whatever the folder.
  env_override z("KILN_CACHE_MAX_BYTES", "0"), e("KILN_CACHE_DIR", file);
  CHECK_FALSE(kiln::jit::disk_cache::from_environment().enabled());
  const std::string good = (dir.path / "a" / "b").string();
  env_override g("KILN_CACHE_DIR", good), m("KILN_CACHE_MAX_BYTES", nullptr);
  const auto cache = kiln::jit::disk_cache::from_environment();
  CHECK(cache.enabled());
  CHECK(cache.dir() == good);
}

TEST_CASE("settings: flags are 0 or 1", "[settings]") {
  for (const char* bad : {"yes", "2", "on", " 1", "1 ", "true", "01"}) {
    INFO(bad);
    env_override a("KILN_VK_VALIDATION", bad), b("KILN_VALIDATE_SPIRV", bad);
    expect_error([] { settings::flag("KILN_VK_VALIDATION"); }, "KILN_VK_VALIDATION",
                 {"0 or 1", bad});
    expect_error([] { settings::flag("KILN_VALIDATE_SPIRV"); }, "KILN_VALIDATE_SPIRV",
                 {"0 or 1", bad});
  }
  env_override a("KILN_VK_VALIDATION", "0"), b("KILN_VALIDATE_SPIRV", "1");
  CHECK_FALSE(settings::flag("KILN_VK_VALIDATION", true));
  CHECK(settings::flag("KILN_VALIDATE_SPIRV"));
  env_override c("KILN_VK_VALIDATION", ""), d("KILN_VALIDATE_SPIRV", nullptr);
  CHECK(settings::flag("KILN_VK_VALIDATION", true)); // not set: the fallback
  CHECK_FALSE(settings::flag("KILN_VALIDATE_SPIRV"));
}

TEST_CASE("settings: KILN_LOG is a comma list of known words", "[settings]") {
  auto log_jit = [] { return settings::in_list("KILN_LOG", "jit"); };
  for (const char* bad : {"maybe", "jti", "jit,", ",jit", "jit, all", "JIT", "1"}) {
    env_override l("KILN_LOG", bad);
    expect_error(log_jit, "KILN_LOG", {"comma list of jit,all", bad});
  }
  for (const char* good : {"jit", "all", "all,jit", "jit,jit"}) {
    env_override l("KILN_LOG", good);
    CHECK(log_jit());
  }
  env_override l("KILN_LOG", nullptr);
  CHECK_FALSE(log_jit());
}

TEST_CASE("settings: a KILN_DUMP_KERNELS that cannot be written is an error", "[settings]") {
  temp_dir dir;
  const std::string source = "void main() { /* " + std::to_string(test::rng()()) + " */ }";
  {
    const std::string bad = dir.file("plain") + "/dump";
    env_override e("KILN_DUMP_KERNELS", bad);
    expect_error([&] { kiln::jit::dump_kernel(source, "comp"); }, "KILN_DUMP_KERNELS",
                 {"cannot write", bad});
  }
  const fs::path good = dir.path / "dump";
  env_override e("KILN_DUMP_KERNELS", good.string());
  kiln::jit::dump_kernel(source, "comp");
  CHECK(read_file(good / (kiln::jit::hash_of(source).hex() + ".comp")) == source);
}

TEST_CASE("settings: a library or program named by a variable must work", "[settings]") {
  temp_dir dir;
  const std::string missing = (dir.path / "missing").string();
  {
    env_override e("KILN_SHADERC_LIBRARY", missing + ".so");
    expect_error([] { kiln::jit::glsl_compiler c; }, "KILN_SHADERC_LIBRARY",
                 {"does not load", missing + ".so", "cannot open shared object file"});
  }
  {
    env_override e("KILN_GLSLC", missing);
    kiln::jit::glsl_compiler_config glslc;
    glslc.path = kiln::jit::shaderc_path::glslc;
    expect_error([&] { kiln::jit::glsl_compiler c(glslc); }, "KILN_GLSLC",
                 {"KILN_GLSLC=" + missing, "No such file or directory"});
    env_override n("KILN_GLSLC", "kiln-no-such-glslc");
    expect_error([&] { kiln::jit::glsl_compiler c(glslc); }, "KILN_GLSLC",
                 {"kiln-no-such-glslc not found on PATH"});
    env_override x("KILN_GLSLC", dir.file("not-executable"));
    expect_error([&] { kiln::jit::glsl_compiler c(glslc); }, "KILN_GLSLC", {"not executable"});
  }
  {
    env_override e("KILN_SPIRV_VAL", missing);
    expect_error([] { kiln::jit::validate_spirv({}); }, "KILN_SPIRV_VAL",
                 {"KILN_SPIRV_VAL=" + missing});
  }
  {
    env_override e("KILN_PTXAS", missing);
    expect_error([] { kiln::jit::cuda::find_ptxas(); }, "KILN_PTXAS", {"KILN_PTXAS=" + missing});
  }
}

TEST_CASE("settings: a KILN_CUDA_HOME that is not a directory is the reason CUDA is off",
          "[settings]") {
  // cuda_home_from_environment() keeps its first answer; find_cuda_home is what it runs.
  temp_dir dir;
  const std::string file = dir.file("plain");
  const auto bad = kiln::jit::cuda::find_cuda_home(file.c_str(), dir.path.c_str());
  CHECK(bad.path.empty()); // not replaced by CUDA_HOME
  CHECK(bad.why_not == "KILN_CUDA_HOME=" + file + " is not a directory");
  CHECK(kiln::jit::cuda::find_cuda_home(dir.path.c_str(), nullptr).path == dir.path.string());
  CHECK(kiln::jit::cuda::find_cuda_home("", dir.path.c_str()).path == dir.path.string());
}
