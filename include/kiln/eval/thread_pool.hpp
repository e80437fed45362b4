#pragma once
// The host evaluator's persistent thread pool. Workers are started once, so an evaluation
// never creates a thread. Between passes a worker first spins for a short while (passes
// often come back to back: the steps of a stencil, the statements of a loop), then sleeps
// on a condition variable; a pass wakes sleepers only where there are some, since a
// wake-up (a futex call, then the scheduler) costs ~10-15 us on the machines measured,
// as much as a pass of 2^16 simple elements takes. The calling thread takes part in the
// work. A pass that arrives while another runs (from a second user thread) or from inside
// a worker runs on the calling thread alone.
#include "kiln/linkage.hpp"
#include "kiln/settings.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>

namespace kiln {

class thread_pool {
public:
  KILN_CORE_INLINE static thread_pool& instance();

  // Threads used by a pass, the caller included (>= 1).
  int threads() const noexcept { return active_.load(std::memory_order_relaxed); }
  // Use fewer threads than were started (or more, up to the started count).
  KILN_CORE_INLINE void set_threads(int n);

  // Runs fn(task) for task in [0, tasks), spread over the active threads (at most
  // max_threads of them where that is given: a tuned pass). Only the one-thread case is
  // compiled for each F; the rest is compiled once (kiln/linkage.hpp). `work` (> 0: the
  // work of all tasks in any unit the caller keeps to, a host pass's elements times its
  // kernel's cost) lets the pool run the tasks on the calling thread alone where helpers
  // are asleep and the work would be done before a woken one could take part (both times
  // learnt from earlier passes).
  template <class F>
  void parallel_for(int tasks, F&& fn, int max_threads = 0, double work = 0) {
    const int n = std::min({tasks, threads(), max_threads > 0 ? max_threads : tasks});
    if (n <= 1) {
      for (int t = 0; t < tasks; ++t)
        fn(t);
      return;
    }
    using Fn = std::remove_reference_t<F>;
    run(
        tasks, n, [](const void* f, int t) { (*static_cast<Fn*>(const_cast<void*>(f)))(t); },
        std::addressof(fn), work);
  }

  KILN_CORE_INLINE ~thread_pool();

  // Sends helpers that spin after a pass to sleep now: before another library's threads (a
  // BLAS provider's) take the cores, which they would otherwise share with the spinning.
  KILN_CORE_INLINE void quiesce();

  // Passes that woke workers since start (small passes run on the caller and don't count).
  KILN_CORE_INLINE std::uint64_t parallel_passes() const noexcept;
  // What the pool learnt: nanoseconds from waking a sleeping helper to its taking part, and
  // per unit of work (parallel_for's `work`) on the calling thread; 0 before any such pass.
  KILN_CORE_INLINE double wake_ns() const noexcept;
  KILN_CORE_INLINE double ns_per_work() const noexcept;

  // KILN_NUM_THREADS (an integer in [1, 1024]; anything else is a kiln::error naming it),
  // else the hardware's thread count.
  KILN_CORE_INLINE static int default_threads();

  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

private:
  using job = void (*)(const void* fn, int task);
  // The workers and what they synchronize on (thread_pool_impl.hpp): kept out of this
  // header, which every file that includes kiln parses (<thread> and <condition_variable>
  // bring in <chrono>).
  struct state;
  KILN_CORE_INLINE explicit thread_pool(int n);
  // parallel_for's body: `tasks` calls of call(fn, t) over n > 1 threads.
  KILN_CORE_INLINE void run(int tasks, int n, job call, const void* fn, double work);

  std::atomic<int> active_;
  std::unique_ptr<state> s_;
};

// Number of threads host passes use; KILN_NUM_THREADS sets the start value.
inline int num_threads() { return thread_pool::instance().threads(); }
inline void set_num_threads(int n) { thread_pool::instance().set_threads(n); }

} // namespace kiln

#if KILN_CORE_DEFINITIONS
#include "kiln/eval/thread_pool_impl.hpp"
#endif
