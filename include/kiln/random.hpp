#pragma once
// Random tensors from a counter-based generator (Philox-4x32-10, Salmon et al. 2011).
// Element i of a tensor drawn with seed s is a pure function of (s, i): it does not
// depend on the thread count or on the order of evaluation, and a GPU kernel computing
// the same function reproduces uniform values bit for bit. (normal() also goes through
// log/sqrt/cos, which other math libraries may round differently in the last bit.)
#include "kiln/creation.hpp"

#include <array>
#include <numbers>

namespace kiln::random {

// One Philox-4x32-10 block: 4 random words for a 128-bit counter and a 64-bit key.
inline std::array<std::uint32_t, 4> philox4x32(std::array<std::uint32_t, 4> c, std::uint64_t key) {
  std::uint32_t k0 = static_cast<std::uint32_t>(key), k1 = static_cast<std::uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = std::uint64_t{0xD2511F53u} * c[0];
    const std::uint64_t p1 = std::uint64_t{0xCD9E8D57u} * c[2];
    c = {static_cast<std::uint32_t>(p1 >> 32) ^ c[1] ^ k0, static_cast<std::uint32_t>(p1),
         static_cast<std::uint32_t>(p0 >> 32) ^ c[3] ^ k1, static_cast<std::uint32_t>(p0)};
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return c;
}

// The 4 words for element `index` of stream `stream` (uniform and normal use their own).
inline std::array<std::uint32_t, 4> words(std::uint64_t seed, std::uint64_t index,
                                          std::uint32_t stream) {
  return philox4x32(
      {static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32), stream, 0u},
      seed);
}

// Uniform in [0, 1): 24 random bits for float and narrower, 53 for double.
template <class T>
double unit(const std::array<std::uint32_t, 4>& w) {
  if constexpr (std::is_same_v<T, double>)
    return static_cast<double>(((std::uint64_t{w[0]} << 32) | w[1]) >> 11) * 0x1p-53;
  else
    return static_cast<double>(w[0] >> 8) * 0x1p-24;
}

namespace detail {
template <class T, class F>
tensor<T> generate(const shape& s, const device& dev, const char* op, F&& f) {
  static_assert(is_floating(dtype_of<T>()),
                "kiln: random tensors are floating (f16, bf16, f32, f64)");
  kiln::detail::refuse_if_capturing(
      op, "a draw is host data a replay would not draw again (draw outside the captured "
          "function and pass the tensor as an argument)");
  tensor<T> t(s, device{}, op); // drawn on the host (a function of seed and index), then moved
  T* p = t.data();
  const std::int64_t n = t.size();
  const int tasks = static_cast<int>(std::clamp<std::int64_t>(n / 65536, 1, num_threads()));
  thread_pool::instance().parallel_for(tasks, [&](int k) {
    for (std::int64_t i = n * k / tasks; i < n * (k + 1) / tasks; ++i)
      p[i] = f(static_cast<std::uint64_t>(i));
  });
  return kiln::detail::moved(t, dev, op);
}
} // namespace detail

// Uniform in [low, high).
template <element T>
tensor<T> uniform(const shape& s, std::uint64_t seed, double low = 0, double high = 1,
                  const device& dev = default_device()) {
  if (!(low < high) || !std::isfinite(high - low))
    throw error("random::uniform", "need finite low < high",
                "low " + std::to_string(low) + ", high " + std::to_string(high));
  return detail::generate<T>(s, dev, "random::uniform", [&](std::uint64_t i) {
    T v = convert<T>(low + (high - low) * unit<T>(words(seed, i, 0)));
    if (!(compute_t<T>(v) < compute_t<T>(convert<T>(high))))
      v = convert<T>(low); // rounding hit high
    return v;
  });
}

// Normal with the given mean and standard deviation (Box-Muller on one Philox block).
template <element T>
tensor<T> normal(const shape& s, std::uint64_t seed, double mean = 0, double stddev = 1,
                 const device& dev = default_device()) {
  if (!(stddev >= 0) || !std::isfinite(stddev))
    throw error("random::normal", "standard deviation must be finite and >= 0",
                "stddev " + std::to_string(stddev));
  return detail::generate<T>(s, dev, "random::normal", [&](std::uint64_t i) {
    const auto w = words(seed, i, 1);
    const double u1 =
        (static_cast<double>(((std::uint64_t{w[0]} << 32) | w[1]) >> 11) + 1) * 0x1p-53;
    const double u2 = static_cast<double>(((std::uint64_t{w[2]} << 32) | w[3]) >> 11) * 0x1p-53;
    const double z = std::sqrt(-2 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2);
    return convert<T>(mean + stddev * z);
  });
}

} // namespace kiln::random
