#pragma once
// The host family: the host evaluator's passes (eval/host_launch.hpp), tuned as the device
// families are, keyed by the host's identity (CPU model, hardware threads), the pass type
// and log2 of its elements. The runtime installs host_choice as the evaluator's chooser;
// it returns the defaults at once unless a tuner listens on this thread or the database
// holds a choice for this host.
#include "kiln/eval/host_launch.hpp"
#include "kiln/eval/kernel.hpp"
#include "kiln/eval/thread_pool.hpp"
#include "kiln/jit/tune/launch_choice.hpp"
#include "kiln/jit/tune/record.hpp"

namespace kiln::jit::tune {

namespace hp {
enum : std::size_t { threads, grain, stream, prefetch };
} // namespace hp

inline space host_space(int pool_threads) {
  std::vector<std::int64_t> threads;
  for (std::int64_t t = 1; t < pool_threads; t *= 2)
    threads.push_back(t);
  threads.push_back(pool_threads);
  return space("host",
               {{"threads", "threads at most, the caller included", threads, pool_threads},
                {"grain",
                 "fewest elements per task (0: by the tree's cost)",
                 {0, 4096, 16384, 65536, 262144, 1048576},
                 0},
                {"stream",
                 "streaming stores: 0 past the cut-off (KILN_STREAM_BYTES), 1 never, 2 wherever "
                 "the outputs allow",
                 {0, 1, 2},
                 0},
                {"prefetch",
                 "bytes ahead a load asks for, in passes computing math functions (0: the line "
                 "it loads)",
                 {0, 256, 1024, 4096, 16384},
                 kiln::detail::prefetch_bytes}});
}

namespace detail {

// The pass types' ids (a hash of the kernel's type as the compiler spells it, stable from
// run to run of one build) and memoized choices.
struct host_kernel_state {
  std::string id;
  choice_memo choices;
};

inline host_kernel_state& host_state(const kiln::detail::host_kernel_ref& k) {
  static std::mutex m;
  static std::map<const void*, std::unique_ptr<host_kernel_state>> states;
  std::lock_guard lock(m);
  auto& s = states[reinterpret_cast<const void*>(k.run)];
  if (!s) {
    s = std::make_unique<host_kernel_state>();
    s->id = hash_of(std::string_view(k.type_name())).hex();
  }
  return *s;
}

} // namespace detail

inline const space& host_tuning_space() {
  static const space sp = host_space(num_threads());
  return sp;
}

// Whether a host pass or product looks its choice up: a tuner listens, launches are
// recorded, or the database holds a choice for this host.
inline bool host_lookup_wanted() {
  if (current_hook() || recording()) return true;
  // The database read where it was not yet: a host-only program has no device launch to.
  (void)selector::instance().generation_after_open();
  if (host_tuned().load(std::memory_order_relaxed)) return true;
  // Nothing to ask for this host: passes stop calling until something changes. A tuner
  // starting meanwhile counts itself before it sets the flag, so it is never lost.
  auto& wanted = kiln::detail::host_chooser_wanted();
  wanted.store(false);
  if (kiln::detail::active_tuners().load() > 0 || host_tuned().load() || recording())
    wanted.store(true);
  return false;
}

inline kiln::detail::host_launch host_choice(const kiln::detail::host_kernel_ref& k,
                                             std::int64_t elements) {
  if (!host_lookup_wanted()) return {};
  const bool rec = recording();
  auto& st = detail::host_state(k);
  const space& sp = host_tuning_space();
  const size_bucket bucket{log2_floor(std::max<std::int64_t>(elements, 1))};
  if (rec) record_host(host_identity(), st.id, bucket);
  const config c =
      st.choices.get(nullptr, host_identity(), sp, st.id, bucket, [](const config&) {});
  return {static_cast<int>(c[hp::threads]), c[hp::grain], static_cast<int>(c[hp::stream]),
          c[hp::prefetch]};
}

// Installed by the runtime (src.hpp) at static initialization.
inline bool install_host_chooser() {
  kiln::detail::host_chooser_slot().store(&host_choice, std::memory_order_release);
  kiln::detail::host_chooser_wanted().store(true); // the first pass reads the database
  (void)recording(); // KILN_TUNE_RECORD read now: a host-only program records too
  return true;
}

} // namespace kiln::jit::tune
