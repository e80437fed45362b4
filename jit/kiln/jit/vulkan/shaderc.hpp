#pragma once
// kiln::jit::glsl_compiler: GLSL compute shaders -> SPIR-V words, by one of two compilers
// chosen once:
//  - in process, a shared libshaderc opened at run time (shaderc_library.hpp): glslang's
//    set-up is paid once per process, so a compile costs only the compile;
//  - the `glslc` executable (KILN_GLSLC, else PATH), started per compile with posix_spawn:
//    the source goes in a temp file and the module comes back on its stdout. Every start
//    pays glslang's set-up of its built-in symbol tables (about 60 ms on the 2-core CI
//    machine, for any shader), which is why the library is preferred where one loads.
// A compile error is kiln::error("shaderc", "GLSL compile failed", compiler message +
// numbered source). options() and version() go into kernel cache keys.
#include "kiln/error.hpp"
#include "kiln/jit/backend/subprocess.hpp"
#include "kiln/jit/vulkan/shaderc_library.hpp"
#include "kiln/settings.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::jit {

struct spirv_module {
  std::vector<std::uint32_t> words;
  double compile_ms = 0; // wall time of the compile, process start included
};

enum class shaderc_path { automatic, library, glslc };

struct glsl_compiler_config {
  shaderc_path path = shaderc_path::automatic; // automatic: a working library, else glslc
  std::string library; // a libshaderc tried first instead of KILN_SHADERC_LIBRARY's
  std::string glslc;   // the glslc to run instead of KILN_GLSLC's or PATH's
  std::string target_env = "vulkan1.1";            // vulkan1.0 ... vulkan1.3
  bool optimize = true;                            // -O, else -O0
  std::chrono::milliseconds glslc_timeout{120000}; // a glslc run past this is killed
};

namespace detail {

// The name compilers give the source in their messages ("kernel.comp:3: error: ...").
inline constexpr const char* glsl_source_name = "kernel.comp";

inline void replace_all(std::string& s, std::string_view from, std::string_view to) {
  if (from.empty()) return;
  for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

inline unsigned vulkan_minor_version(const std::string& target_env) {
  for (unsigned minor = 0; minor <= 3; ++minor)
    if (target_env == "vulkan1." + std::to_string(minor)) return minor;
  throw kiln::error("shaderc", "unsupported target environment",
                    "'" + target_env + "'; supported: vulkan1.0, vulkan1.1, vulkan1.2, vulkan1.3");
}

// The source with line numbers, for compile errors: all of it up to `max_lines` lines;
// beyond that the first max_lines and a few lines around each line the log names
// ("kernel.comp:<line>:").
inline std::string numbered_source(std::string_view src, std::string_view log,
                                   std::size_t max_lines = 200) {
  std::vector<std::string_view> lines;
  for (std::size_t begin = 0; begin < src.size();) {
    std::size_t end = src.find('\n', begin);
    if (end == std::string_view::npos) end = src.size();
    lines.push_back(src.substr(begin, end - begin));
    begin = end + 1;
  }
  std::vector<bool> shown(lines.size(), false);
  for (std::size_t i = 0; i < lines.size() && i < max_lines; ++i)
    shown[i] = true;
  const std::string tag = std::string(glsl_source_name) + ":";
  for (std::size_t at = log.find(tag); at != std::string_view::npos; at = log.find(tag, at + 1)) {
    const std::size_t line = std::strtoul(std::string(log.substr(at + tag.size(), 12)).c_str(),
                                          nullptr, 10); // 1-based; 0 when no number follows
    for (std::size_t i = line > 3 ? line - 3 : 1; line > 0 && i <= line + 3 && i <= lines.size();
         ++i)
      shown[i - 1] = true;
  }
  std::string out;
  char number[32];
  bool gap = false;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (!shown[i]) {
      if (!gap) out += "  ...\n";
      gap = true;
      continue;
    }
    gap = false;
    std::snprintf(number, sizeof number, "%5zu | ", i + 1);
    out += number;
    out += lines[i];
    out += '\n';
  }
  if (lines.size() > max_lines) out += "(" + std::to_string(lines.size()) + " lines in all)\n";
  return out;
}

// The module's words, after checking it is one: whole words, a header, the magic number.
inline std::vector<std::uint32_t> spirv_words(const std::string& bytes,
                                              const std::string& compiler) {
  constexpr std::uint32_t magic = 0x07230203u;
  std::vector<std::uint32_t> words(bytes.size() / 4);
  if (!words.empty()) std::memcpy(words.data(), bytes.data(), words.size() * 4);
  if (bytes.size() % 4 != 0 || words.size() < 5 || words[0] != magic) {
    char first[16] = "none";
    if (!words.empty()) std::snprintf(first, sizeof first, "0x%08x", words[0]);
    throw kiln::error("shaderc", "the compiler produced no valid SPIR-V module",
                      compiler + ": " + std::to_string(bytes.size()) + " bytes, first word " +
                          first);
  }
  return words;
}

// The names of the module's OpEntryPoint instructions.
inline std::vector<std::string> entry_point_names(std::span<const std::uint32_t> words) {
  constexpr std::uint32_t op_entry_point = 15;
  std::vector<std::string> names;
  for (std::size_t at = 5; at < words.size();) {
    const std::uint32_t count = words[at] >> 16, opcode = words[at] & 0xffffu;
    if (count == 0 || at + count > words.size()) break; // malformed: stop, never overrun
    if (opcode == op_entry_point && count > 3) {
      // A literal string: UTF-8 bytes packed little-endian into words, NUL-terminated.
      std::string name;
      bool ended = false;
      for (std::size_t w = at + 3; w < at + count && !ended; ++w) {
        for (int b = 0; b < 4 && !ended; ++b) {
          const char c = static_cast<char>((words[w] >> (8 * b)) & 0xffu);
          if (c == '\0')
            ended = true;
          else
            name += c;
        }
      }
      names.push_back(std::move(name));
    }
    at += count;
  }
  return names;
}

inline std::string trim_trailing_space(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r'))
    s.pop_back();
  return s;
}

} // namespace detail

class glsl_compiler {
public:
  // Chooses the compiler now: with path automatic, the first libshaderc that works (the
  // config's library, else KILN_SHADERC_LIBRARY, then libshaderc_shared.so,
  // libshaderc_shared.so.1, libshaderc.so.1), else glslc. Throws kiln::error("shaderc", "no
  // GLSL compiler", what was tried and why) when the chosen kind is not there, and one named
  // after the variable when KILN_SHADERC_LIBRARY or KILN_GLSLC names one that does not work.
  explicit glsl_compiler(glsl_compiler_config config = {})
      : target_env_(config.target_env), optimize_(config.optimize),
        glslc_timeout_(config.glslc_timeout) {
    const unsigned minor = detail::vulkan_minor_version(target_env_);
    options_ = "-fshader-stage=compute --target-env=" + target_env_ + (optimize_ ? " -O" : " -O0");
    std::string tried;
    if (config.path == shaderc_path::glslc) {
      rejection_ = "not tried: glslc was asked for";
    } else {
      library_ = shaderc_library::open_first(library_candidates(config.library), minor, optimize_,
                                             rejection_);
      if (library_) {
        path_name_ = "libshaderc (" + library_->path() + ")";
        version_ = library_->version();
        return;
      }
      if (config.library.empty() && settings::text("KILN_SHADERC_LIBRARY"))
        throw kiln::error("KILN_SHADERC_LIBRARY", "the library does not load", rejection_);
      tried = "libshaderc: " + rejection_;
    }
    if (config.path != shaderc_path::library) {
      std::string why;
      if (use_glslc(config.glslc, why)) return;
      tried += (tried.empty() ? "" : "; ") + std::string("glslc: ") + why;
    }
    throw kiln::error("shaderc", "no GLSL compiler", tried);
  }

  // The compiler kiln uses, chosen on first use (C++ makes that thread-safe); a failed
  // choice throws and is retried on the next call.
  static glsl_compiler& instance() {
    static glsl_compiler compiler;
    return compiler;
  }

  // Compiles a compute shader; safe to call from many threads at once (nothing here is
  // mutated). `entry` must name an entry point of the result (GLSL's is always "main").
  spirv_module compile(std::string_view glsl, std::string_view entry = "main") const {
    const auto start = std::chrono::steady_clock::now();
    const std::string entry_name(entry);
    glsl_compile_output out = library_
                                  ? library_->compile(glsl, entry_name, detail::glsl_source_name)
                                  : run_glslc(glsl, entry_name);
    if (!out.ok) {
      const std::string log = detail::trim_trailing_space(out.log);
      throw kiln::error("shaderc", "GLSL compile failed",
                        path_name_ + ":\n" + log + "\n" + detail::numbered_source(glsl, log));
    }
    spirv_module m{detail::spirv_words(out.spirv, path_name_), 0};
    const std::vector<std::string> names = detail::entry_point_names(m.words);
    if (std::find(names.begin(), names.end(), entry_name) == names.end()) {
      std::string found;
      for (const std::string& n : names)
        found += (found.empty() ? "" : ", ") + n;
      throw kiln::error("shaderc", "entry point not in the module",
                        "asked for '" + entry_name + "', the module has: " + found +
                            " (GLSL shaders are entered at main)");
    }
    m.compile_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return m;
  }

  shaderc_path chosen_path() const noexcept {
    return library_ ? shaderc_path::library : shaderc_path::glslc;
  }
  // "libshaderc (<file>)" or "glslc (<file>)".
  const std::string& path_name() const noexcept { return path_name_; }
  // The compiler's identity for cache keys: `glslc --version`'s lines, or the library's
  // file and SPIR-V version.
  const std::string& version() const noexcept { return version_; }
  // The options every compile uses, spelled as glslc flags, for cache keys.
  const std::string& options() const noexcept { return options_; }
  // Why no library is used: each candidate passed over with its reason (dlerror's text
  // where dlopen failed); when a library is used, the ones tried before it (often empty).
  const std::string& inprocess_rejection() const noexcept { return rejection_; }

private:
  static std::vector<shaderc_library::candidate> library_candidates(const std::string& explicit_) {
    std::vector<shaderc_library::candidate> candidates;
    if (!explicit_.empty()) {
      candidates.push_back({"", explicit_});
    } else if (const auto v = settings::text("KILN_SHADERC_LIBRARY")) {
      // An explicit choice: one that does not load is reported, not replaced.
      return {{"KILN_SHADERC_LIBRARY", *v}};
    }
    // The Vulkan SDK's names, then Debian's (whose 2023.2 build does not load).
    for (const char* name : {"libshaderc_shared.so", "libshaderc_shared.so.1", "libshaderc.so.1"})
      candidates.push_back({"", name});
    return candidates;
  }

  bool use_glslc(const std::string& explicit_, std::string& why) {
    const program_location where =
        explicit_.empty() ? find_program("glslc", "KILN_GLSLC") : locate_program(explicit_);
    if (where.path.empty()) {
      why = where.why_not;
      return false;
    }
    program_result r;
    try {
      r = run_program(where.path, {"--version"}, std::chrono::seconds(30), "shaderc");
    } catch (const kiln::error& e) {
      why = e.what();
      return false;
    }
    if (!r.succeeded()) {
      why = where.path + " --version: " + r.ending() + " " + detail::trim_trailing_space(r.err);
      return false;
    }
    std::string lines; // its non-empty lines, "; "-joined
    for (std::size_t begin = 0; begin < r.out.size();) {
      std::size_t end = r.out.find('\n', begin);
      if (end == std::string::npos) end = r.out.size();
      if (end > begin) lines += (lines.empty() ? "" : "; ") + r.out.substr(begin, end - begin);
      begin = end + 1;
    }
    version_ = "glslc " + lines;
    glslc_ = where.path;
    path_name_ = "glslc (" + glslc_ + ")";
    return true;
  }

  glsl_compile_output run_glslc(std::string_view glsl, const std::string& entry) const {
    temp_file source(".comp", "shaderc");
    source.write_and_close(std::as_bytes(std::span(glsl.data(), glsl.size())), "shaderc");
    std::vector<std::string> args = {"-fshader-stage=compute", "--target-env=" + target_env_,
                                     optimize_ ? "-O" : "-O0"};
    if (entry != "main") args.push_back("-fentry-point=" + entry);
    args.insert(args.end(), {source.path(), "-o", "-"});
    program_result r = run_program(glslc_, args, glslc_timeout_, "shaderc");
    if (r.timed_out || r.signal != 0)
      throw kiln::error("shaderc", "glslc did not finish",
                        glslc_ + " " + r.ending() + "; its messages: " + r.err);
    glsl_compile_output out;
    out.ok = r.exit_code == 0;
    out.spirv = std::move(r.out);
    out.log = std::move(r.err);
    detail::replace_all(out.log, source.path(), detail::glsl_source_name);
    if (!out.ok && out.log.empty()) out.log = "glslc ended with " + r.ending() + " and no message";
    return out;
  }

  std::string target_env_;
  bool optimize_;
  std::chrono::milliseconds glslc_timeout_;
  std::unique_ptr<shaderc_library> library_;
  std::string glslc_;
  std::string path_name_, version_, options_, rejection_;
};

// Runs spirv-val (KILN_SPIRV_VAL, else PATH) on a module: {true, ""} when valid, {false,
// its messages} when not, {false, "spirv-val not found"} when there is no spirv-val (a
// KILN_SPIRV_VAL naming no program is a kiln::error).
inline std::pair<bool, std::string> validate_spirv(std::span<const std::uint32_t> words,
                                                   std::string_view target_env = "vulkan1.1") {
  const program_location where = find_program("spirv-val", "KILN_SPIRV_VAL");
  if (where.path.empty()) return {false, "spirv-val not found"};
  temp_file module(".spv", "validate_spirv");
  module.write_and_close(std::as_bytes(words), "validate_spirv");
  program_result r =
      run_program(where.path, {"--target-env", std::string(target_env), module.path()},
                  std::chrono::seconds(60), "validate_spirv");
  std::string message = detail::trim_trailing_space(r.err + r.out);
  detail::replace_all(message, module.path(), "module.spv");
  if (!r.succeeded() && message.empty()) message = "spirv-val " + r.ending();
  return {r.succeeded(), message};
}

} // namespace kiln::jit
