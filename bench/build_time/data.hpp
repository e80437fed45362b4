#pragma once
// What every build-time input shares, kept small (it is compiled in every program): the same
// inputs for every library (a fixed-seed generator, not a library's random module, so kiln,
// xtensor and Eigen get identical data) and a checksum of a result, printed so that the work
// is real and the script can compare the libraries' answers.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

namespace build_time {

inline constexpr std::size_t n = 100003; // not a multiple of any SIMD width: tails are compiled

// Uniform in [lo, hi) from a 64-bit LCG (Knuth's MMIX constants), 24 bits per value.
inline std::vector<float> uniform(float lo, float hi, std::uint64_t seed) {
  std::vector<float> v(n);
  std::uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = lo + (hi - lo) * static_cast<float>(s >> 40) * 0x1p-24f;
  }
  return v;
}

// Sum of |x|: no cancellation, so a relative tolerance is meaningful; NaN stays NaN.
inline double checksum(const float* p, std::size_t count) {
  double s = 0;
  for (std::size_t i = 0; i < count; ++i)
    s += std::fabs(static_cast<double>(p[i]));
  return s;
}

inline void print(double sum) { std::printf("checksum %.9g\n", sum); }

} // namespace build_time
