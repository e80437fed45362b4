#pragma once
// Shared test helpers: per-run random draws (seeded from Catch's --rng-seed, printed on
// failure) and distances in units in the last place.
#include <kiln/kiln.hpp>

#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace test {

inline std::mt19937_64& rng() {
  static std::mt19937_64 g(Catch::rngSeed());
  return g;
}

template <class T>
std::vector<T> uniform(std::size_t n, double lo, double hi) {
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<T> v(n);
  for (auto& x : v)
    x = static_cast<T>(d(rng()));
  return v;
}

template <class T>
std::vector<T> integers(std::size_t n, std::int64_t lo, std::int64_t hi) {
  std::uniform_int_distribution<std::int64_t> d(lo, hi);
  std::vector<T> v(n);
  for (auto& x : v)
    x = static_cast<T>(d(rng()));
  return v;
}

inline int draw(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng()); }

// Ulps between two floats of one type (0 if both NaN or equal, huge if one is NaN).
template <class T>
std::uint64_t ulp_distance(T a, T b) {
  if (std::isnan(a) && std::isnan(b)) return 0;
  if (std::isnan(a) || std::isnan(b)) return UINT64_MAX;
  if (a == b) return 0;
  using U = std::conditional_t<sizeof(T) == 4, std::int32_t, std::int64_t>;
  auto key = [](T x) {
    const U i = std::bit_cast<U>(x);
    return i < 0 ? static_cast<std::int64_t>(std::numeric_limits<U>::min()) - i
                 : static_cast<std::int64_t>(i);
  };
  const std::int64_t d = key(a) - key(b);
  return static_cast<std::uint64_t>(d < 0 ? -d : d);
}

} // namespace test
