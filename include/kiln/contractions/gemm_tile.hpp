#pragma once
// The host micro-kernel's register tile for each accumulator type: NR is two SIMD registers
// of B's cols, MR as many rows of A as leave the accumulators (MR x 2 registers), two B
// registers and an A broadcast within the register file (32 registers with AVX-512, 16
// with AVX2 or NEON).
#include <xsimd/xsimd.hpp>

#include <cstdint>
#include <type_traits>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace kiln::detail {

template <class T>
struct gemm_tile {
  using simd = xsimd::batch<T, xsimd::default_arch>;
  static constexpr int lanes = int(simd::size);
  static constexpr int nv = 2; // registers of B per k
  static constexpr int nr = nv * lanes;
  static constexpr int mr = xsimd::default_arch::alignment() >= 64 ? 12 : 6;
};

// a b + c, fused. xsimd 8 has no AVX-512 fused multiply-add: its fma there is a multiply and an
// add, which clang does not contract (the micro-kernel ran at half its throughput), so the
// instruction is named here.
template <class B>
[[gnu::always_inline]] inline B fused_madd(const B& a, const B& b, const B& c) {
#if defined(__AVX512F__)
  if constexpr (sizeof(typename B::register_type) == 64) {
    if constexpr (std::is_same_v<typename B::value_type, float>)
      return B(_mm512_fmadd_ps(a, b, c));
    else if constexpr (std::is_same_v<typename B::value_type, double>)
      return B(_mm512_fmadd_pd(a, b, c));
  }
#endif
  return xsimd::fma(a, b, c);
}

} // namespace kiln::detail
