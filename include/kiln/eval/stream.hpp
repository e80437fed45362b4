#pragma once
// Non-temporal ("streaming") stores for passes whose data cannot stay in the cache anyway.
// An ordinary store first reads the line it writes (read-for-ownership), so a pass that
// streams n bytes in and n out moves 3n over the memory bus; a streaming store skips that
// read and leaves the caches to the inputs. Measured on this project's 2-core Xeon: the
// triad on 2^24 f32 is ~15% faster with them, and no faster at 2^22 (64 MiB in all, which
// the last-level cache still serves). The cut-off follows the C library's own rule for
// memcpy: a footprint above 3/8 of the last-level cache (KILN_STREAM_BYTES overrides it;
// 0 turns streaming stores off). Only passes without math functions stream: a pass that
// computes exp, log, sin... is bound by arithmetic, not memory, and was measured ~20%
// slower with streaming stores (the heavy expression of bench/elementwise.cpp at 2^24).
#include "kiln/eval/readers.hpp"
#include "kiln/ops/rules.hpp"
#include "kiln/settings.hpp"

#include <cstdint>
#include <cstdlib>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <unistd.h>
#define KILN_HAS_STREAM_STORES 1
#endif

namespace kiln::detail {

// KILN_STREAM_BYTES: a whole number of bytes; 0 means never.
inline std::int64_t parse_stream_bytes(const char* text) {
  const auto v = settings::parse_integer("KILN_STREAM_BYTES", text, 0, INT64_MAX,
                                         "a whole number of bytes (0: never)");
  return v == 0 ? INT64_MAX : std::int64_t(v);
}

// How many math-function nodes (exp, log, pow...: the float-computing rule) a tree has; an
// op that states its `cost` counts where that is a math function's (20 adds or more).
template <class Op>
inline constexpr bool math_op = declared_cost<Op>() >= 0
                                    ? declared_cost<Op>() >= 20
                                    : std::is_same_v<typename Op::rule, rules::floating>;
template <class E>
inline constexpr int math_count = 0;
template <class Op, class... C>
inline constexpr int math_count<expr_node<Op, C...>> = int(math_op<Op>) + (math_count<C> + ...);

// Bytes a pass must touch before it uses streaming stores.
inline std::int64_t stream_threshold() {
  static const std::int64_t bytes = [] {
    if (const auto env = settings::text("KILN_STREAM_BYTES"))
      return parse_stream_bytes(env->c_str());
#ifdef _SC_LEVEL3_CACHE_SIZE
    const long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (llc > 0) return std::int64_t(llc) / 8 * 3;
#endif
    return std::int64_t(64) << 20; // last-level cache size unknown
  }();
  return bytes;
}

// Stores b at p with a streaming store when p is aligned to the vector width (true for a
// kiln-allocated contiguous output from each task's start on), otherwise ordinarily.
template <class T, class B>
inline void stream_store(T* p, const B& b) noexcept {
#ifdef KILN_HAS_STREAM_STORES
  using reg = typename B::register_type;
  constexpr std::uintptr_t width = sizeof(reg);
  if ((reinterpret_cast<std::uintptr_t>(p) & (width - 1)) == 0) {
    const reg v = b;
    if constexpr (width == 64 && std::is_same_v<T, float>)
      return _mm512_stream_ps(p, v);
    else if constexpr (width == 64 && std::is_same_v<T, double>)
      return _mm512_stream_pd(p, v);
    else if constexpr (width == 32 && std::is_same_v<T, float>)
      return _mm256_stream_ps(p, v);
    else if constexpr (width == 32 && std::is_same_v<T, double>)
      return _mm256_stream_pd(p, v);
    else if constexpr (width == 16 && std::is_same_v<T, float>)
      return _mm_stream_ps(p, v);
    else if constexpr (width == 16 && std::is_same_v<T, double>)
      return _mm_stream_pd(p, v);
  }
#endif
  b.store_unaligned(p);
}

// Elements of `elem` bytes from p to the next `width`-byte boundary; 0 where p is on one or
// no element ever lands on one. A streaming pass runs these apart, so that the stores of the
// rest of a row are aligned and stream (stream_store falls back on every misaligned one: a
// view one element into a row, as a stencil's interior, would never stream).
inline std::int64_t stream_head(const void* p, std::size_t elem, std::size_t width) noexcept {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t off = a & (width - 1);
  if (off == 0 || a % elem != 0) return 0;
  return std::int64_t((width - off) / elem);
}

// Streaming stores are weakly ordered: each task fences its own before it reports done.
inline void stream_fence() noexcept {
#ifdef KILN_HAS_STREAM_STORES
  _mm_sfence();
#endif
}

} // namespace kiln::detail
