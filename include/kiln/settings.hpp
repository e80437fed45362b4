#pragma once
// KILN_* environment settings go through this one parser, so that every variable accepts
// the same spellings and a bad value is a kiln::error under the variable's own name (op
// "KILN_VK_WORKGROUP", not the operation that happened to read it first). Numbers are
// plain decimal digits: no sign, no spaces, no "0x"; an unset or empty variable is "not set".
#include "kiln/error.hpp"

#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace kiln::settings {

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

// The variable's text, or nullopt when it is unset or empty.
inline std::optional<std::string> text(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

[[noreturn]] inline void bad_value(std::string_view name, std::string_view text,
                                   std::string_view expected) {
  throw error(std::string(name), "bad value, expected " + std::string(expected),
              std::string(name) + "=\"" + std::string(text) + "\"");
}

// An integer in [lo, hi]; with `byte_suffixes` a K, M or G suffix (any case) multiplies by
// 2^10, 2^20, 2^30. `expected` words the error ("a number of threads in [1, 1024]").
inline std::uint64_t parse_integer(std::string_view name, std::string_view text, std::uint64_t lo,
                                   std::uint64_t hi, const std::string& expected,
                                   bool byte_suffixes = false) {
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
  if (!v || (*v << shift) < lo || (*v << shift) > hi) bad_value(name, text, expected);
  return *v << shift;
}

inline std::string range_words(std::uint64_t lo, std::uint64_t hi) {
  return "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
}

// The variable as an integer in [lo, hi], or `fallback` when it is not set.
inline std::uint64_t integer(const char* name, std::uint64_t fallback, std::uint64_t lo,
                             std::uint64_t hi) {
  const auto t = text(name);
  return t ? parse_integer(name, *t, lo, hi, range_words(lo, hi)) : fallback;
}

// "1" is on, "0" off; not set: `fallback`.
inline bool flag(const char* name, bool fallback = false) {
  const auto t = text(name);
  if (!t) return fallback;
  if (*t != "0" && *t != "1") bad_value(name, *t, "0 or 1");
  return *t == "1";
}

// A comma list of words from `allowed` (KILN_LOG=jit): whether it names `word` or "all".
// Not set: false; a word outside `allowed` is an error (a typo would silently log nothing).
inline bool in_list(const char* name, std::string_view word,
                    std::initializer_list<std::string_view> allowed) {
  const auto t = text(name);
  if (!t) return false;
  std::string expected = "a comma list of";
  for (const auto a : allowed)
    expected += " " + std::string(a);
  bool found = false;
  std::string_view rest = *t;
  while (true) {
    const auto comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    bool known = false;
    for (const auto a : allowed)
      known = known || item == a;
    if (!known) bad_value(name, *t, expected);
    found = found || item == word || item == "all";
    if (comma == std::string_view::npos) return found;
    rest.remove_prefix(comma + 1);
  }
}

} // namespace kiln::settings
