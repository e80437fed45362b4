#pragma once
// Every environment variable kiln reads is an entry of one table (`variables`: name, kind,
// default, meaning), and every read names an entry: a settings::key is made from a name at
// compile time, so a misspelt name or a read of the wrong kind does not compile. README.md's
// "Settings" table is this table, row for row (tests/test_settings.cpp checks it, and that
// every "KILN_..." string in the sources is an entry). std::getenv is called here only.
//
// One set of rules for values: an unset or empty variable is "not set"; numbers are plain
// decimal digits (no sign, no spaces, no "0x"); flags are 0 or 1; a value of the wrong form
// is a kiln::error whose op is the variable's name (op "KILN_VK_WORKGROUP", not the
// operation that happened to read it first). A variable naming a folder, library or program
// is an explicit choice: one that does not work is reported naming the variable, never
// replaced by another.
#include "kiln/error.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

namespace kiln::settings {

enum class kind : std::uint8_t {
  integer,  // decimal digits in a range
  bytes,    // decimal digits with an optional K, M or G suffix (powers of 1024)
  flag,     // 0 or 1
  words,    // a comma list of the entry's `words`
  device,   // a device string (kiln::device parses it)
  folder,   // a directory
  file,     // a file (or a folder to hold it)
  library,  // a shared library, as dlopen takes it
  program,  // a program: a path, or a name looked up on PATH
  external, // not kiln's: a system variable kiln falls back on
};

struct variable {
  std::string_view name;
  settings::kind kind;
  std::string_view fallback; // what applies when it is not set (README's "default")
  std::string_view meaning;  // README's "meaning"
  std::string_view words{};  // kind::words: the accepted words, comma-separated
};

// README.md's "Settings" table has one row per entry, in this order:
// | `name` | fallback | meaning |
inline constexpr variable variables[] = {
    {"KILN_DEVICE", kind::device, "`host`",
     "where the creation functions (`zeros`, `from`, `arange`, ...) place a tensor when no "
     "device is given: `host`, `vulkan:N` or `cuda:N` (read at each call); a malformed, "
     "unknown or unusable device is an error"},
    {"KILN_NUM_THREADS", kind::integer, "all hardware threads",
     "host threads, an integer in [1, 1024]"},
    {"KILN_STREAM_BYTES", kind::integer, "3/8 of the last-level cache (64 MiB if unknown)",
     "bytes a contiguous host pass without math functions must write before it uses streaming "
     "stores; `0`: never"},
    {"KILN_CACHE_DIR", kind::folder, "`$XDG_CACHE_HOME/kiln`, else `$HOME/.cache/kiln`",
     "folder of the disk cache of compiled kernels; one that cannot be created or written is "
     "an error (a default one that cannot: memory only)"},
    {"KILN_CACHE_MAX_BYTES", kind::bytes, "`256M`",
     "bound of the disk cache, least recently used evicted first: bytes, or with a `K`, `M` or "
     "`G` suffix (powers of 1024); `0`: no disk cache"},
    {"KILN_LOG", kind::words, "nothing logged",
     "a comma list of what to log to stderr: `jit` (each compile and disk-cache hit, with its "
     "milliseconds, and each launch configuration chosen, with why), `all`",
     "jit,all"},
    {"KILN_DUMP_KERNELS", kind::folder, "no dumps",
     "folder where each generated kernel source is written, named by its hash; one that cannot "
     "be written is an error"},
    {"KILN_VALIDATE_SPIRV", kind::flag, "`0`",
     "`1`: run `spirv-val` on every generated SPIR-V module (the tests do)"},
    {"KILN_VK_VALIDATION", kind::flag, "`0`",
     "`1`: enable the Khronos validation layer; its messages are counted and printed"},
    {"KILN_VK_WORKGROUP", kind::integer, "`64`",
     "invocations per workgroup of elementwise Vulkan kernels, in [1, the device's limit]"},
    {"KILN_VK_MAX_GROUPS", kind::integer, "`65535` (`256` on a CPU device)",
     "workgroups of an elementwise Vulkan kernel, past which invocations loop over several "
     "elements, in [1, the device's limit]"},
    {"KILN_TUNE_DB", kind::file, "`tuning.kdb` in the kernel cache's folder",
     "the tuning database (a file, or a folder holding `tuning.kdb`) that evaluation reads and "
     "`kiln-tune` writes; a damaged or foreign file is read as empty, never written to"},
    {"KILN_TUNE", kind::words, "`on`",
     "`off`: evaluation ignores the tuning database and takes the default launch "
     "configurations (deterministic runs)",
     "on,off"},
    {"KILN_TUNE_RECORD", kind::file, "nothing recorded",
     "file to which a program appends each kernel and size it launches, once, for "
     "`kiln-tune run --from` to tune exactly those; one that cannot be written is an error"},
    {"KILN_SHADERC_LIBRARY", kind::library,
     "`libshaderc_shared.so`, `libshaderc_shared.so.1`, `libshaderc.so.1`, else `glslc`",
     "the libshaderc that compiles GLSL in process; one that does not load is an error"},
    {"KILN_GLSLC", kind::program, "`glslc` on `PATH`",
     "the `glslc` used when no libshaderc loads; one that is not found or not executable is an "
     "error"},
    {"KILN_SPIRV_VAL", kind::program, "`spirv-val` on `PATH`",
     "the `spirv-val` of `KILN_VALIDATE_SPIRV`; one that is not found or not executable is an "
     "error"},
    {"KILN_BLAS_LIBRARY", kind::library,
     "`libopenblas.so.0`, `libmkl_rt.so.2`, `libmkl_rt.so`, `libblis.so.4` (the first that "
     "loads), else none",
     "the CBLAS that host f32/f64 products may use as a provider (chosen per kernel and size: "
     "README, \"Contractions\"); `none`: kiln's own kernel only; one that does not load or has "
     "no `cblas_sgemm`/`cblas_dgemm` is an error at each product"},
    {"KILN_CUBLAS_LIBRARY", kind::library,
     "`libcublas.so.13`, `.12`, `.11` (the CUDA toolkit's, then by soname: the first that "
     "loads; one that cannot start on the device is none), else none",
     "the cuBLAS that plain f32/f64/f16/bf16 products on `cuda:N` use as a provider (README, "
     "\"Contractions\"); `none`: kiln's own kernel only; one that does not load or start is an "
     "error at each product that would use it"},
    {"KILN_CUDA_HOME", kind::folder, "`$CUDA_HOME`, else `/usr/local/cuda`",
     "the CUDA toolkit (NVRTC, `cuda_fp16.h`, `ptxas`); one that is not a directory makes "
     "`cuda:N` unavailable with that reason"},
    {"KILN_CUDA_GRAPHS", kind::flag, "`1`",
     "`0`: a captured plan's launches on `cuda:N` are issued one by one instead of as one CUDA "
     "graph per replay"},
    {"KILN_CUDA_DRIVER", kind::library, "`libcuda.so.1`",
     "the CUDA driver library; one that does not load makes `cuda:N` unavailable with that "
     "reason"},
    {"KILN_NVRTC_LIBRARY", kind::library,
     "`libnvrtc.so` of the CUDA toolkit, else by soname on the loader's path",
     "the NVRTC library; one that does not load makes `cuda:N` unavailable with that reason"},
    {"KILN_METAL_FRAMEWORK", kind::library,
     "Apple's `libobjc.A.dylib`, Foundation and Metal frameworks (Apple platforms only)",
     "one library standing in for the Objective-C runtime and the Metal framework together "
     "(the test suite's runs MSL on CPU threads); set, it makes `metal:0` listed on any "
     "platform, and one that does not load makes it unavailable with that reason"},
    {"KILN_PTXAS", kind::program, "`ptxas` of the CUDA toolkit, else on `PATH`",
     "the `ptxas` that checks NVRTC's PTX (the CUDA codegen tests); one that is not found "
     "or not executable is an error"},
    {"CUDA_HOME", kind::external, "unset", "the CUDA toolkit when `KILN_CUDA_HOME` is unset"},
    {"XDG_CACHE_HOME", kind::external, "unset",
     "parent of the default cache folder when absolute (a relative one is ignored, as the XDG "
     "specification says)"},
    {"HOME", kind::external, "unset", "`$HOME/.cache/kiln` is the last default cache folder"},
    {"PATH", kind::external, "`/usr/local/bin:/usr/bin:/bin`",
     "where `glslc`, `spirv-val` and `ptxas` are looked up (empty entries skipped)"},
    {"TMPDIR", kind::external, "`/tmp`", "where compiler inputs are written"},
};

namespace detail {
// Declared, never defined: a constant evaluation that reaches one fails to compile, and the
// compiler's message names it.
void not_a_setting_in_the_table(std::string_view name);
void a_setting_of_another_kind(std::string_view name);

consteval std::size_t index_of(std::string_view name) {
  for (std::size_t i = 0; i < std::size(variables); ++i)
    if (variables[i].name == name) return i;
  not_a_setting_in_the_table(name);
  return 0;
}

consteval bool names_are_unique() {
  for (std::size_t i = 0; i < std::size(variables); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (variables[i].name == variables[j].name) return false;
  return true;
}
static_assert(names_are_unique(), "kiln: a variable is twice in the settings table");
} // namespace detail

// An entry of the table, named by a string literal checked at compile time.
class key {
public:
  consteval key(const char* name) : index_(detail::index_of(name)) {}
  constexpr const variable& info() const { return variables[index_]; }
  // The names are string literals: data() ends in a '\0'.
  constexpr const char* name() const { return info().name.data(); }

private:
  std::size_t index_;
};

// A key whose entry has kind K: `flag("KILN_NUM_THREADS")` does not compile.
template <kind K>
class key_of : public key {
public:
  consteval key_of(const char* name) : key(name) {
    if (info().kind != K) detail::a_setting_of_another_kind(name);
  }
};

// The variable's text as the environment holds it; empty when unset. Valid until the
// environment changes (the hot path of default_device reads it without copying).
inline std::string_view raw(key k) {
  const char* v = std::getenv(k.name());
  return v ? std::string_view(v) : std::string_view();
}

// The variable's text, or nullopt when it is unset or empty.
inline std::optional<std::string> text(key k) {
  const std::string_view v = raw(k);
  if (v.empty()) return std::nullopt;
  return std::string(v);
}

[[noreturn]] inline void bad_value(key k, std::string_view text, std::string_view expected) {
  throw error(k.name(), "bad value, expected " + std::string(expected),
              std::string(k.name()) + "=\"" + std::string(text) + "\"");
}

// Decimal digits only, at most `max`; nullopt for anything else (overflow included).
inline std::optional<std::uint64_t> parse_decimal(std::string_view text, std::uint64_t max) {
  if (text.empty()) return std::nullopt;
  std::uint64_t v = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    const auto d = static_cast<std::uint64_t>(c - '0');
    if (v > (max - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

// An integer in [lo, hi]; with `byte_suffixes` a K, M or G suffix (any case) multiplies by
// 2^10, 2^20, 2^30. `expected` words the error ("a number of threads in [1, 1024]").
inline std::uint64_t parse_integer(key k, std::string_view text, std::uint64_t lo, std::uint64_t hi,
                                   const std::string& expected, bool byte_suffixes = false) {
  std::string_view digits = text;
  int shift = 0;
  if (byte_suffixes && !digits.empty()) {
    const char u = digits.back();
    shift = (u == 'k' || u == 'K')   ? 10
            : (u == 'm' || u == 'M') ? 20
            : (u == 'g' || u == 'G') ? 30
                                     : 0;
    if (shift) digits.remove_suffix(1);
  }
  const auto v = parse_decimal(digits, UINT64_MAX >> shift);
  if (!v || (*v << shift) < lo || (*v << shift) > hi) bad_value(k, text, expected);
  return *v << shift;
}

inline std::string range_words(std::uint64_t lo, std::uint64_t hi) {
  return "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
}

// The variable as an integer in [lo, hi], or `fallback` when it is not set.
inline std::uint64_t integer(key_of<kind::integer> k, std::uint64_t fallback, std::uint64_t lo,
                             std::uint64_t hi) {
  const auto t = text(k);
  return t ? parse_integer(k, *t, lo, hi, range_words(lo, hi)) : fallback;
}

// "268435456", "256M", "1G", "64k": a byte count with an optional binary K/M/G suffix.
inline std::uint64_t parse_bytes(key_of<kind::bytes> k, std::string_view text) {
  return parse_integer(k, text, 0, UINT64_MAX,
                       "a byte count such as 268435456 or 256M (suffixes K, M, G are powers "
                       "of 1024)",
                       true);
}
inline std::uint64_t bytes(key_of<kind::bytes> k, std::uint64_t fallback) {
  const auto t = text(k);
  return t ? parse_bytes(k, *t) : fallback;
}

// "1" is on, "0" off; not set: `fallback`.
inline bool flag(key_of<kind::flag> k, bool fallback = false) {
  const auto t = text(k);
  if (!t) return fallback;
  if (*t != "0" && *t != "1") bad_value(k, *t, "0 or 1");
  return *t == "1";
}

// A comma list of the entry's words (KILN_LOG=jit): whether it names `word` or "all". Not
// set: false; a word outside the entry's is an error (a typo would silently log nothing).
inline bool in_list(key_of<kind::words> k, std::string_view word) {
  const auto t = text(k);
  if (!t) return false;
  const std::string_view allowed = k.info().words;
  auto known = [&](std::string_view item) {
    for (std::size_t begin = 0; begin <= allowed.size();) {
      const std::size_t end = std::min(allowed.find(',', begin), allowed.size());
      if (allowed.substr(begin, end - begin) == item) return true;
      begin = end + 1;
    }
    return false;
  };
  bool found = false;
  std::string_view rest = *t;
  while (true) {
    const auto comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    if (!known(item)) bad_value(k, *t, "a comma list of " + std::string(allowed));
    found = found || item == word || item == "all";
    if (comma == std::string_view::npos) return found;
    rest.remove_prefix(comma + 1);
  }
}

} // namespace kiln::settings
