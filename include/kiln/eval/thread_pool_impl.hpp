#pragma once
// The thread pool's non-template members and its state (declared in thread_pool.hpp; see
// kiln/linkage.hpp for where they are compiled).
#include "kiln/eval/thread_pool.hpp"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln {

namespace detail {
// Polls `ready` for up to spin_time, pausing the core between polls; true once it holds.
inline constexpr std::int64_t spin_ns = 100000;
template <class Ready>
bool spin_until(Ready&& ready) {
  constexpr auto spin_time = std::chrono::nanoseconds(spin_ns);
  const auto until = std::chrono::steady_clock::now() + spin_time;
  for (int i = 1;; ++i) {
    if (ready()) return true;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if (i % 64 == 0 && std::chrono::steady_clock::now() >= until) return false;
  }
}

KILN_CORE_INLINE bool& in_pool_worker() {
  thread_local bool flag = false;
  return flag;
}
} // namespace detail

struct thread_pool::state {
  std::vector<std::thread> workers;
  std::mutex busy; // one pass at a time
  std::mutex m;
  std::condition_variable cv, done_cv;
  job call = nullptr; // the current pass's function and its argument
  const void* fn = nullptr;
  int tasks = 0, helpers = 0;
  std::vector<char> asleep;    // per worker: waiting on cv (under m)
  std::atomic<int> running{0}; // helpers inside the current pass (changed under m)
  bool open = false;           // helpers may still join the current pass
  std::atomic<int> next{0};
  std::atomic<std::uint64_t> parallel_passes{0};
  std::atomic<std::uint64_t> generation{0}; // passes started (changed under m)
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> hush{0}; // quiesce() calls: spinning helpers go to sleep
  // Learnt (moving averages, 0 until measured): a sleeping helper's wake-up, from the
  // notify to its joining the pass, and the caller's time per unit of a pass's work.
  std::atomic<double> wake_ns{0}, ns_per_work{0};
  std::atomic<std::int64_t> notified_at{0}; // steady_clock ns of the last notify
  std::int64_t last_end = 0;                // steady_clock ns when the last pass ended

  static std::int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  static void learn(std::atomic<double>& avg, double x) {
    const double a = avg.load(std::memory_order_relaxed);
    avg.store(a == 0 ? x : a + 0.125 * (x - a), std::memory_order_relaxed);
  }

  void drain() {
    for (int t; (t = next.fetch_add(1)) < tasks;)
      call(fn, t);
  }

  void work(int index) {
    detail::in_pool_worker() = true;
    std::uint64_t seen = 0;
    // quiesce() calls seen when the last pass began: one made since ends the spin after it.
    std::uint64_t hushed = hush.load(std::memory_order_relaxed);
    for (;;) {
      // A new pass is a new generation: watched without the lock for a while, then asleep
      // (at once where quiesce() is called meanwhile).
      detail::spin_until([&] {
        return generation.load(std::memory_order_acquire) != seen ||
               stop.load(std::memory_order_relaxed) ||
               hush.load(std::memory_order_relaxed) != hushed;
      });
      {
        std::unique_lock<std::mutex> lk(m);
        const auto ready = [&] {
          return stop.load(std::memory_order_relaxed) ||
                 (generation.load(std::memory_order_relaxed) != seen && index < helpers);
        };
        bool slept = false;
        if (!ready()) {
          asleep[std::size_t(index)] = 1;
          cv.wait(lk, ready);
          asleep[std::size_t(index)] = 0;
          slept = true;
        }
        if (stop.load(std::memory_order_relaxed)) return;
        seen = generation.load(std::memory_order_relaxed);
        hushed = hush.load(std::memory_order_relaxed);
        // (Late or not: how long a wake-up takes is what the caller's decision needs.)
        if (slept) learn(wake_ns, double(now_ns() - notified_at.load(std::memory_order_relaxed)));
        if (!open) continue; // arrived after the caller took the last task
        running.fetch_add(1, std::memory_order_relaxed);
      }
      drain();
      std::lock_guard<std::mutex> lk(m);
      if (running.fetch_sub(1, std::memory_order_release) == 1 && !open) done_cv.notify_one();
    }
  }
};

KILN_CORE_INLINE thread_pool& thread_pool::instance() {
  static thread_pool pool(default_threads());
  return pool;
}

KILN_CORE_INLINE int thread_pool::default_threads() {
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return static_cast<int>(settings::integer("KILN_NUM_THREADS", hw, 1, 1024));
}

KILN_CORE_INLINE thread_pool::thread_pool(int n) : active_(n), s_(std::make_unique<state>()) {
  s_->asleep.assign(std::size_t(std::max(n - 1, 0)), 0);
  for (int i = 0; i + 1 < n; ++i)
    s_->workers.emplace_back([st = s_.get(), i] { st->work(i); });
}

KILN_CORE_INLINE thread_pool::~thread_pool() {
  {
    std::lock_guard<std::mutex> lk(s_->m);
    s_->stop.store(true);
  }
  s_->cv.notify_all();
  for (auto& w : s_->workers)
    w.join();
}

KILN_CORE_INLINE void thread_pool::quiesce() { s_->hush.fetch_add(1, std::memory_order_relaxed); }

KILN_CORE_INLINE void thread_pool::set_threads(int n) {
  active_.store(std::clamp(n, 1, static_cast<int>(s_->workers.size()) + 1));
}

KILN_CORE_INLINE std::uint64_t thread_pool::parallel_passes() const noexcept {
  return s_->parallel_passes.load();
}

KILN_CORE_INLINE double thread_pool::wake_ns() const noexcept { return s_->wake_ns.load(); }
KILN_CORE_INLINE double thread_pool::ns_per_work() const noexcept { return s_->ns_per_work.load(); }

KILN_CORE_INLINE void thread_pool::run(int tasks, int n, job call, const void* fn, double work) {
  state& s = *s_;
  // From inside a worker, or while another user thread's pass runs: on this thread alone.
  if (detail::in_pool_worker() || !s.busy.try_lock()) {
    for (int t = 0; t < tasks; ++t)
      call(fn, t);
    return;
  }
  std::lock_guard<std::mutex> own(s.busy, std::adopt_lock);
  bool wake;
  {
    std::lock_guard<std::mutex> lk(s.m);
    wake = std::find(s.asleep.begin(), s.asleep.begin() + (n - 1), char(1)) !=
           s.asleep.begin() + (n - 1);
  }
  // A helper asleep joins a wake-up later (tens of microseconds on the machines measured,
  // over 100 on a virtual one): a pass done in less than twice that runs here alone, as
  // waking it would make it slower (issue 34). (A helper that wakes meanwhile finds no pass.)
  // Passes back to back (the last ended within a helper's spin) wake it all the same: it then
  // spins through the ones that follow.
  const std::int64_t t0 = work > 0 ? state::now_ns() : 0;
  const double per = s.ns_per_work.load(std::memory_order_relaxed);
  if (wake && work > 0 && per > 0 && t0 - s.last_end > detail::spin_ns &&
      work * per < 2 * s.wake_ns.load(std::memory_order_relaxed)) {
    for (int t = 0; t < tasks; ++t)
      call(fn, t);
    s.last_end = state::now_ns();
    state::learn(s.ns_per_work, double(s.last_end - t0) / work);
    return;
  }
  s.parallel_passes.fetch_add(1, std::memory_order_relaxed);
  int mine = 0; // tasks the caller ran
  {
    std::lock_guard<std::mutex> lk(s.m);
    s.call = call;
    s.fn = fn;
    s.tasks = tasks;
    s.next.store(0);
    s.helpers = n - 1;
    s.open = true;
    s.generation.store(s.generation.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    // Spinning workers see the new generation by themselves; only a sleeping one that
    // takes part is worth a wake-up.
    wake = std::find(s.asleep.begin(), s.asleep.begin() + (n - 1), char(1)) !=
           s.asleep.begin() + (n - 1);
  }
  if (wake) {
    s.notified_at.store(state::now_ns(), std::memory_order_relaxed);
    s.cv.notify_all();
  }
  for (int t; (t = s.next.fetch_add(1)) < tasks; ++mine)
    call(fn, t);
  if (work > 0 && mine > 0) // (the caller's own time per unit: its tasks' share of the work)
    state::learn(s.ns_per_work, double(state::now_ns() - t0) / (work * mine / tasks));
  // Every task is taken. Helpers that have not joined yet are not waited for: they find the
  // pass closed. Waiting for a wake-up that brings no work made a pass on two threads
  // slower than on one (issue 13). Those still running finish soon: spin, then sleep.
  {
    std::lock_guard<std::mutex> lk(s.m);
    s.open = false;
  }
  detail::spin_until([&] { return s.running.load(std::memory_order_acquire) == 0; });
  std::unique_lock<std::mutex> lk(s.m);
  s.done_cv.wait(lk, [&] { return s.running.load(std::memory_order_relaxed) == 0; });
  s.call = nullptr;
  s.fn = nullptr;
  if (work > 0) s.last_end = state::now_ns();
}

} // namespace kiln
