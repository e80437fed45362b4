#pragma once
// The in-process GLSL compiler: a shared libshaderc opened at run time with dlopen and used
// through its C API, so kiln neither needs shaderc's headers to build nor links it.
//
// A library is used only when it loads with RTLD_NOW (every symbol resolved at once: a
// broken build, like Debian 12's libshaderc.so.1 with its undefined glslang symbols, fails
// here with dlerror's reason instead of crashing at the first call), has every function we
// call, and compiles a trivial compute shader.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <dlfcn.h>

namespace kiln::jit {

// The few parts of shaderc's C API we call, declared from libshaderc/include/shaderc/
// {shaderc,env,status}.h. C enums are passed as int (the same registers and size).
namespace shaderc_c {
struct compiler;
struct compile_options;
struct compilation_result;
using compiler_t = compiler*;
using options_t = compile_options*;
using result_t = compilation_result*;

inline constexpr int compute_shader = 2;    // shaderc_shader_kind: vertex, fragment, compute, ...
inline constexpr int target_env_vulkan = 0; // shaderc_target_env
inline constexpr int optimization_level_zero = 0; // shaderc_optimization_level
inline constexpr int optimization_level_performance = 2;
inline constexpr int status_success = 0; // shaderc_compilation_status
// shaderc_env_version_vulkan_1_x: Vulkan's own version encoding, (1 << 22) | (x << 12).
constexpr std::uint32_t vulkan_env_version(unsigned minor) { return (1u << 22) | (minor << 12); }

inline const char* status_name(int status) {
  static const char* const names[] = {
      "success",          "invalid stage",        "compilation error",
      "internal error",   "null result object",   "invalid assembly",
      "validation error", "transformation error", "configuration error"};
  return status >= 0 && status < 9 ? names[status] : "unknown status";
}

struct api {
  compiler_t (*compiler_initialize)() = nullptr;
  void (*compiler_release)(compiler_t) = nullptr;
  options_t (*compile_options_initialize)() = nullptr;
  void (*compile_options_release)(options_t) = nullptr;
  void (*compile_options_set_target_env)(options_t, int, std::uint32_t) = nullptr;
  void (*compile_options_set_optimization_level)(options_t, int) = nullptr;
  result_t (*compile_into_spv)(compiler_t, const char*, std::size_t, int, const char*, const char*,
                               options_t) = nullptr;
  void (*result_release)(result_t) = nullptr;
  std::size_t (*result_get_length)(result_t) = nullptr;
  const char* (*result_get_bytes)(result_t) = nullptr;
  const char* (*result_get_error_message)(result_t) = nullptr;
  int (*result_get_compilation_status)(result_t) = nullptr;
  void (*get_spv_version)(unsigned*, unsigned*) = nullptr;

  // Resolves every function; returns the name of the first one missing, or "".
  std::string resolve(void* library) {
    std::string missing;
    auto get = [&](auto& fn, const char* name) {
      void* p = ::dlsym(library, name);
      if (!p && missing.empty()) missing = name;
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
    };
    get(compiler_initialize, "shaderc_compiler_initialize");
    get(compiler_release, "shaderc_compiler_release");
    get(compile_options_initialize, "shaderc_compile_options_initialize");
    get(compile_options_release, "shaderc_compile_options_release");
    get(compile_options_set_target_env, "shaderc_compile_options_set_target_env");
    get(compile_options_set_optimization_level, "shaderc_compile_options_set_optimization_level");
    get(compile_into_spv, "shaderc_compile_into_spv");
    get(result_release, "shaderc_result_release");
    get(result_get_length, "shaderc_result_get_length");
    get(result_get_bytes, "shaderc_result_get_bytes");
    get(result_get_error_message, "shaderc_result_get_error_message");
    get(result_get_compilation_status, "shaderc_result_get_compilation_status");
    get(get_spv_version, "shaderc_get_spv_version");
    return missing;
  }
};
} // namespace shaderc_c

// What one compile produced, whichever compiler ran it.
struct glsl_compile_output {
  bool ok = false;
  std::string spirv; // the module's bytes when ok
  std::string log;   // the compiler's messages (errors when !ok, maybe warnings when ok)
};

class shaderc_library {
public:
  // One library to try: `label` (may be empty) says where the name came from, e.g.
  // "KILN_SHADERC_LIBRARY".
  struct candidate {
    std::string label, name;
  };

  // The first candidate that works, or null with one reason per candidate (each naming the
  // file; dlerror's text where dlopen failed) appended to `rejections`, "; "-separated.
  static std::unique_ptr<shaderc_library> open_first(const std::vector<candidate>& candidates,
                                                     unsigned vulkan_minor, bool optimize,
                                                     std::string& rejections) {
    for (const candidate& c : candidates) {
      std::string why;
      if (auto lib = open(c.name, vulkan_minor, optimize, why)) return lib;
      if (!rejections.empty()) rejections += "; ";
      rejections += c.label.empty() ? why : c.label + ": " + why;
    }
    return nullptr;
  }

  shaderc_library(const shaderc_library&) = delete;
  shaderc_library& operator=(const shaderc_library&) = delete;
  // Releases the compiler but keeps the library mapped: glslang keeps process-wide state
  // that is not safe to unload, and dlopen counts references anyway.
  ~shaderc_library() {
    if (options_) api_.compile_options_release(options_);
    if (compiler_) api_.compiler_release(compiler_);
  }

  // Thread-safe: shaderc documents compile_into_spv as callable from many threads on one
  // compiler, and the options object is only read.
  glsl_compile_output compile(std::string_view glsl, const std::string& entry,
                              const char* input_name) const {
    glsl_compile_output out;
    shaderc_c::result_t r =
        api_.compile_into_spv(compiler_, glsl.data(), glsl.size(), shaderc_c::compute_shader,
                              input_name, entry.c_str(), options_);
    if (!r) {
      out.log = "libshaderc returned no result (out of memory?)";
      return out;
    }
    const int status = api_.result_get_compilation_status(r);
    if (const char* m = api_.result_get_error_message(r)) out.log = m;
    out.ok = status == shaderc_c::status_success;
    if (out.ok) {
      const char* bytes = api_.result_get_bytes(r);
      out.spirv.assign(bytes ? bytes : "", bytes ? api_.result_get_length(r) : 0);
    } else if (out.log.empty()) {
      out.log = std::string("libshaderc: ") + shaderc_c::status_name(status);
    }
    api_.result_release(r);
    return out;
  }

  const std::string& path() const noexcept { return path_; }
  // The library's file and the SPIR-V version it emits by default, e.g.
  // "libshaderc /usr/lib/libshaderc_shared.so.1 (SPIR-V 1.6 rev 1)".
  const std::string& version() const noexcept { return version_; }

private:
  shaderc_library() = default;

  static std::unique_ptr<shaderc_library> open(const std::string& name, unsigned vulkan_minor,
                                               bool optimize, std::string& why) {
    void* handle = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* e = ::dlerror();
      why = e ? e : "dlopen failed";
      return nullptr;
    }
    std::unique_ptr<shaderc_library> lib(new shaderc_library());
    if (std::string missing = lib->api_.resolve(handle); !missing.empty()) {
      why = name + ": loaded, but has no function " + missing;
      ::dlclose(handle); // nothing of it ran: safe to unload
      return nullptr;
    }
    lib->compiler_ = lib->api_.compiler_initialize();
    lib->options_ = lib->api_.compile_options_initialize();
    if (!lib->compiler_ || !lib->options_) {
      why = name + ": loaded, but shaderc_compiler_initialize or "
                   "shaderc_compile_options_initialize returned null";
      return nullptr;
    }
    lib->api_.compile_options_set_target_env(lib->options_, shaderc_c::target_env_vulkan,
                                             shaderc_c::vulkan_env_version(vulkan_minor));
    lib->api_.compile_options_set_optimization_level(
        lib->options_,
        optimize ? shaderc_c::optimization_level_performance : shaderc_c::optimization_level_zero);
    const glsl_compile_output probe = lib->compile(
        "#version 450\nlayout(local_size_x = 1) in;\nvoid main() {}\n", "main", "probe.comp");
    if (!probe.ok || probe.spirv.size() < 20) {
      why = name + ": loaded, but cannot compile a trivial compute shader: " + probe.log;
      return nullptr;
    }
    lib->path_ = file_of(reinterpret_cast<void*>(lib->api_.compile_into_spv), name);
    unsigned spv = 0, revision = 0;
    lib->api_.get_spv_version(&spv, &revision);
    lib->version_ = "libshaderc " + lib->path_ + " (SPIR-V " + std::to_string((spv >> 16) & 0xff) +
                    "." + std::to_string((spv >> 8) & 0xff) + " rev " + std::to_string(revision) +
                    ")";
    return lib;
  }

  // The real file a symbol lives in (symlinks resolved), so version() tells builds apart.
  static std::string file_of(void* symbol, const std::string& fallback) {
    Dl_info info{};
    if (::dladdr(symbol, &info) == 0 || !info.dli_fname) return fallback;
    std::unique_ptr<char, decltype(&std::free)> real(::realpath(info.dli_fname, nullptr),
                                                     &std::free);
    return real ? real.get() : info.dli_fname;
  }

  shaderc_c::api api_;
  shaderc_c::compiler_t compiler_ = nullptr;
  shaderc_c::options_t options_ = nullptr;
  std::string path_, version_;
};

} // namespace kiln::jit
