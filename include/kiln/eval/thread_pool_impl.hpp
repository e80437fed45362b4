#pragma once
// The thread pool's non-template members (declared in thread_pool.hpp; see kiln/linkage.hpp
// for where they are compiled).
#include "kiln/eval/thread_pool.hpp"

#include <chrono>

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
} // namespace detail

KILN_CORE_INLINE thread_pool& thread_pool::instance() {
  static thread_pool pool(default_threads());
  return pool;
}

KILN_CORE_INLINE int thread_pool::default_threads() {
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return static_cast<int>(settings::integer("KILN_NUM_THREADS", hw, 1, 1024));
}

KILN_CORE_INLINE thread_pool::thread_pool(int n)
    : active_(n), asleep_(std::size_t(std::max(n - 1, 0)), 0) {
  for (int i = 0; i + 1 < n; ++i)
    workers_.emplace_back([this, i] { work(i); });
}

KILN_CORE_INLINE thread_pool::~thread_pool() {
  {
    std::lock_guard<std::mutex> lk(m_);
    stop_.store(true);
  }
  cv_.notify_all();
  for (auto& w : workers_)
    w.join();
}

KILN_CORE_INLINE bool& thread_pool::in_worker() {
  thread_local bool flag = false;
  return flag;
}

KILN_CORE_INLINE void thread_pool::drain() {
  for (int t; (t = next_.fetch_add(1)) < tasks_;)
    call_(fn_, t);
}

KILN_CORE_INLINE void thread_pool::run(int tasks, int n, job call, const void* fn) {
  // From inside a worker, or while another user thread's pass runs: on this thread alone.
  if (in_worker() || !busy_.try_lock()) {
    for (int t = 0; t < tasks; ++t)
      call(fn, t);
    return;
  }
  std::lock_guard<std::mutex> own(busy_, std::adopt_lock);
  parallel_passes_.fetch_add(1, std::memory_order_relaxed);
  bool wake;
  {
    std::lock_guard<std::mutex> lk(m_);
    call_ = call;
    fn_ = fn;
    tasks_ = tasks;
    next_.store(0);
    helpers_ = n - 1;
    open_ = true;
    generation_.store(generation_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    // Spinning workers see the new generation by themselves; only a sleeping one that
    // takes part is worth a wake-up.
    wake =
        std::find(asleep_.begin(), asleep_.begin() + (n - 1), char(1)) != asleep_.begin() + (n - 1);
  }
  if (wake) cv_.notify_all();
  drain();
  // Every task is taken. Helpers that have not joined yet are not waited for: they find the
  // pass closed. Waiting for a wake-up that brings no work made a pass on two threads
  // slower than on one (issue 13). Those still running finish soon: spin, then sleep.
  {
    std::lock_guard<std::mutex> lk(m_);
    open_ = false;
  }
  detail::spin_until([&] { return running_.load(std::memory_order_acquire) == 0; });
  std::unique_lock<std::mutex> lk(m_);
  done_cv_.wait(lk, [&] { return running_.load(std::memory_order_relaxed) == 0; });
  call_ = nullptr;
  fn_ = nullptr;
}

KILN_CORE_INLINE void thread_pool::work(int index) {
  in_worker() = true;
  std::uint64_t seen = 0;
  for (;;) {
    // A new pass is a new generation: watched without the lock for a while, then asleep.
    detail::spin_until([&] {
      return generation_.load(std::memory_order_acquire) != seen ||
             stop_.load(std::memory_order_relaxed);
    });
    {
      std::unique_lock<std::mutex> lk(m_);
      const auto ready = [&] {
        return stop_.load(std::memory_order_relaxed) ||
               (generation_.load(std::memory_order_relaxed) != seen && index < helpers_);
      };
      if (!ready()) {
        asleep_[std::size_t(index)] = 1;
        cv_.wait(lk, ready);
        asleep_[std::size_t(index)] = 0;
      }
      if (stop_.load(std::memory_order_relaxed)) return;
      seen = generation_.load(std::memory_order_relaxed);
      if (!open_) continue; // arrived after the caller took the last task
      running_.fetch_add(1, std::memory_order_relaxed);
    }
    drain();
    std::lock_guard<std::mutex> lk(m_);
    if (running_.fetch_sub(1, std::memory_order_release) == 1 && !open_) done_cv_.notify_one();
  }
}

} // namespace kiln
