#pragma once
// Shared test helpers: per-run random draws (seeded from Catch's --rng-seed, printed on
// failure) and distances in units in the last place.
#include <kiln/kiln.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
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

// Cases a randomized test draws: all of them, or a third under AddressSanitizer, where each
// costs several times more and the plain builds (release, clang) draw the full count.
constexpr int cases(int n) {
#if defined(__SANITIZE_ADDRESS__)
  return (n + 2) / 3;
#else
  return n;
#endif
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

// Same value and same kind: equal with the same sign of zero, or both NaN.
template <class T>
bool same_value(T a, T b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

// A random shape of rank lo..hi with extents 1..max_extent.
inline kiln::shape random_shape(int lo_rank, int hi_rank, int max_extent) {
  kiln::shape s;
  const int r = draw(lo_rank, hi_rank);
  for (int d = 0; d < r; ++d)
    s.push_back(draw(1, max_extent));
  return s;
}

// Steps a row-major multi-index through shape s; false after the last one.
inline bool next_index(std::vector<std::int64_t>& idx, const kiln::shape& s) {
  for (int d = s.size() - 1; d >= 0; --d) {
    if (++idx[d] < s[d]) return true;
    idx[d] = 0;
  }
  return false;
}

// Offset of a multi-index in a row-major array of shape s, broadcasting s against the
// (right-aligned, possibly longer) multi-index numpy-style: extents of 1 repeat.
inline std::int64_t broadcast_offset(const kiln::shape& s, const std::vector<std::int64_t>& idx) {
  std::int64_t off = 0;
  const int lead = int(idx.size()) - s.size();
  for (int d = 0; d < s.size(); ++d)
    off = off * s[d] + (s[d] == 1 ? 0 : idx[lead + d]);
  return off;
}

// numpy's slice bounds (CPython's PySlice_AdjustIndices), written out independently of
// kiln: the indices a[start:stop:step] selects from a dim of extent n.
inline std::vector<std::int64_t> slice_indices(std::int64_t n, std::int64_t start,
                                               std::int64_t stop, std::int64_t step) {
  auto adjust = [&](std::int64_t v) {
    if (v < 0) {
      v += n;
      if (v < 0) v = step < 0 ? -1 : 0;
    } else if (v >= n) {
      v = step < 0 ? n - 1 : n;
    }
    return v;
  };
  start = adjust(start);
  stop = adjust(stop);
  std::vector<std::int64_t> out;
  for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
    out.push_back(i);
  return out;
}

} // namespace test
