#pragma once
// The host product kernel's untyped parts (declared in gemm_types.hpp; kiln/linkage.hpp says
// where they are compiled).
#include "kiln/contractions/gemm_types.hpp"

#include <algorithm>
#include <unistd.h>

namespace kiln::detail {

namespace gemm_detail {
inline std::int64_t cache_size(int name, std::int64_t fallback) {
  const long v = ::sysconf(name);
  return v > 0 ? v : fallback;
}
} // namespace gemm_detail

KILN_CORE_INLINE gemm_counts& host_gemm_counts() {
  static gemm_counts c;
  return c;
}

KILN_CORE_INLINE bool gemm_small_wide() {
#if defined(__x86_64__) || defined(__i386__)
  // (__builtin_cpu_init first: a product may run before libgcc's constructor has.)
  static const bool intel = (__builtin_cpu_init(), __builtin_cpu_is("intel"));
  return intel;
#else
  return false;
#endif
}

KILN_CORE_INLINE std::int64_t gemm_l2_bytes() {
  static const std::int64_t l2 = gemm_detail::cache_size(_SC_LEVEL2_CACHE_SIZE, 512 << 10);
  return l2;
}

KILN_CORE_INLINE gemm_blocking default_gemm_blocking(int elem_bytes, int nr) {
  static const std::int64_t l1 = gemm_detail::cache_size(_SC_LEVEL1_DCACHE_SIZE, 32 << 10),
                            l2 = gemm_l2_bytes(),
                            l3 = gemm_detail::cache_size(_SC_LEVEL3_CACHE_SIZE, 8 << 20);
  gemm_blocking b;
  // kc: a kc x NR panel of B twice the size of L1 (it streams through L1 ahead of the
  // kernel; measured on an AMD EPYC with 32 KiB L1: kc 128 gave 86 GFLOP/s, 384 93, 512 97).
  b.kc = std::clamp<std::int64_t>(l1 * 2 / (nr * elem_bytes) / 8 * 8, 64, 1024);
  // An mc x kc block of A in half of L2, an kc x nc block of B in a quarter of L3.
  b.mc = std::clamp<std::int64_t>(l2 / 2 / (b.kc * elem_bytes), 48, 960) / 24 * 24;
  b.nc = std::clamp<std::int64_t>(l3 / 4 / (b.kc * elem_bytes), 256, 4096) / nr * nr;
  return b;
}

} // namespace kiln::detail
