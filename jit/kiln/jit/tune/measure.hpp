#pragma once
// Timing one configuration honestly: warm-up runs first; then runs until the interquartile
// range is within `spread` of the median (nvbench's stopping rule) or the time limit is
// reached; an optional cache flush before each run. A run's time is the device's own clock
// where the backend has one (Vulkan timestamps, CUDA events), else the wall clock around
// the run and a wait for the device.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <unistd.h>
#include <vector>

namespace kiln::jit::tune {

struct timing_options {
  int warmup = 2;
  int min_runs = 7;
  int max_runs = 500;
  double spread = 0.02;     // stop when IQR / median is below this
  double max_seconds = 0.5; // per configuration, runs and flushes together
  bool flush = false;       // evict the caches before each run (flush_caches)
};

struct timing {
  double median_ns = 0;
  double iqr_ns = 0;
  int runs = 0;
  std::vector<double> samples;
  double spread() const { return median_ns > 0 ? iqr_ns / median_ns : 0; }
};

// The q-quantile of sorted samples, interpolated linearly.
inline double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double at = q * double(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(at);
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (at - double(lo));
}

inline timing summarize(std::vector<double> samples) {
  timing t;
  t.samples = samples;
  std::sort(samples.begin(), samples.end());
  t.runs = static_cast<int>(samples.size());
  t.median_ns = quantile(samples, 0.5);
  t.iqr_ns = quantile(samples, 0.75) - quantile(samples, 0.25);
  return t;
}

// Writes a buffer four times the last-level cache (at least 64 MiB): the data a run reads
// next comes from memory, as in a program that does other work between launches. Host
// memory, so on the host and on CPU devices (lavapipe); a GPU's own caches need the
// backend's flush.
inline void flush_caches() {
  static std::vector<std::uint64_t> junk = [] {
    long llc = 0;
#ifdef _SC_LEVEL3_CACHE_SIZE
    llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
    const std::size_t bytes = std::max<std::size_t>(std::size_t(64) << 20, std::size_t(llc) * 4);
    return std::vector<std::uint64_t>(bytes / 8);
  }();
  for (std::size_t i = 0; i < junk.size(); i += 8)
    junk[i] += 1;
}

// run() performs one run and returns its time in ns.
inline timing measure(const std::function<double()>& run, const timing_options& o,
                      const std::function<void()>& flush = flush_caches) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(clock::now() - t0).count(); };
  for (int i = 0; i < o.warmup; ++i)
    run();
  std::vector<double> samples;
  while (static_cast<int>(samples.size()) < o.max_runs) {
    if (o.flush && flush) flush();
    samples.push_back(run());
    if (static_cast<int>(samples.size()) < o.min_runs) continue;
    if (elapsed() > o.max_seconds) break;
    if (samples.size() % 4 == 0 || static_cast<int>(samples.size()) == o.min_runs) {
      const timing t = summarize(samples);
      if (t.spread() <= o.spread) break;
    }
  }
  return summarize(std::move(samples));
}

} // namespace kiln::jit::tune
