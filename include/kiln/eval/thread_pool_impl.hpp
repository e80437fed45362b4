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
template <class Ready>
bool spin_until(Ready&& ready) {
  constexpr auto spin_time = std::chrono::microseconds(100);
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
        if (!ready()) {
          asleep[std::size_t(index)] = 1;
          cv.wait(lk, ready);
          asleep[std::size_t(index)] = 0;
        }
        if (stop.load(std::memory_order_relaxed)) return;
        seen = generation.load(std::memory_order_relaxed);
        hushed = hush.load(std::memory_order_relaxed);
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

KILN_CORE_INLINE void thread_pool::run(int tasks, int n, job call, const void* fn) {
  state& s = *s_;
  // From inside a worker, or while another user thread's pass runs: on this thread alone.
  if (detail::in_pool_worker() || !s.busy.try_lock()) {
    for (int t = 0; t < tasks; ++t)
      call(fn, t);
    return;
  }
  std::lock_guard<std::mutex> own(s.busy, std::adopt_lock);
  s.parallel_passes.fetch_add(1, std::memory_order_relaxed);
  bool wake;
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
  if (wake) s.cv.notify_all();
  s.drain();
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
}

} // namespace kiln
