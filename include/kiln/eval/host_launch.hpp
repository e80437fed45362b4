#pragma once
// The host evaluator's launch settings for one pass — threads, the fewest elements a task
// takes, when to use streaming stores — and the seam through which a tuned choice reaches
// it: the device runtime installs a chooser (jit/kiln/jit/tune/host.hpp) that reads the
// tuning database; a host-only program, or a pass with nothing tuned, takes the defaults.
#include <atomic>
#include <cstdint>

namespace kiln::detail {

struct host_kernel_ref;

struct host_launch {
  int threads = 0;            // threads at most, the caller included (0: all of the pool's)
  std::int64_t grain = 0;     // fewest elements per task (0: by the tree's cost, pass_grain)
  int stream = 0;             // 0: streaming stores past the cut-off (KILN_STREAM_BYTES);
                              // 1: never; 2: wherever the outputs allow
  std::int64_t prefetch = -1; // bytes a load of a pass computing math functions asks for
                              // ahead (-1: kernel.hpp's prefetch_bytes)
};

using host_chooser = host_launch (*)(const host_kernel_ref&, std::int64_t elements);

inline std::atomic<host_chooser>& host_chooser_slot() {
  static std::atomic<host_chooser> f{nullptr};
  return f;
}

// Whether a host pass asks the chooser: set when the chooser is installed (its first call
// reads the tuning database), while a tuner listens, where launches are recorded, and when
// the database holds a choice for this host; cleared by the chooser when none of these
// holds, so that passes then ask nothing (one relaxed load each).
inline std::atomic<bool>& host_chooser_wanted() {
  static std::atomic<bool> b{false};
  return b;
}

// Tuners listening now, on any thread (kiln::tune's hook scopes).
inline std::atomic<int>& active_tuners() {
  static std::atomic<int> n{0};
  return n;
}

inline host_launch host_launch_for(const host_kernel_ref& k, std::int64_t elements) {
  if (!host_chooser_wanted().load(std::memory_order_relaxed)) return {};
  if (const host_chooser f = host_chooser_slot().load(std::memory_order_acquire))
    return f(k, elements);
  return {};
}

} // namespace kiln::detail
