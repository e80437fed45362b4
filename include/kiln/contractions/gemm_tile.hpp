#pragma once
// The host micro-kernel's register tile for each accumulator type: NR is two SIMD registers
// of B's cols, MR as many rows of A as leave the accumulators (MR x 2 registers), two B
// registers and an A broadcast within the register file (32 registers with AVX-512, 16
// with AVX2 or NEON).
#include <xsimd/xsimd.hpp>

#include <cstdint>

namespace kiln::detail {

template <class T>
struct gemm_tile {
  using simd = xsimd::batch<T, xsimd::default_arch>;
  static constexpr int lanes = int(simd::size);
  static constexpr int nv = 2; // registers of B per k
  static constexpr int nr = nv * lanes;
  static constexpr int mr = xsimd::default_arch::alignment() >= 64 ? 12 : 6;
};

} // namespace kiln::detail
