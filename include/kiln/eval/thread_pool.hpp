#pragma once
// The host evaluator's persistent thread pool. Workers are started once, so an evaluation
// never creates a thread. Between passes a worker first spins for a short while (passes
// often come back to back: the steps of a stencil, the statements of a loop), then sleeps
// on a condition variable; a pass wakes sleepers only where there are some, since a
// wake-up (a futex call, then the scheduler) costs ~10-15 us on the machines measured,
// as much as a pass of 2^16 simple elements takes. The calling thread takes part in the
// work. A pass that arrives while another runs (from a second user thread) or from inside
// a worker runs on the calling thread alone.
#include "kiln/settings.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln {

class thread_pool {
public:
  static thread_pool& instance() {
    static thread_pool pool(default_threads());
    return pool;
  }

  // Threads used by a pass, the caller included (>= 1).
  int threads() const noexcept { return active_.load(std::memory_order_relaxed); }
  // Use fewer threads than were started (or more, up to the started count).
  void set_threads(int n) {
    active_.store(std::clamp(n, 1, static_cast<int>(workers_.size()) + 1));
  }

  // Runs fn(task) for task in [0, tasks), spread over the active threads (at most
  // max_threads of them where that is given: a tuned pass).
  template <class F>
  void parallel_for(int tasks, F&& fn, int max_threads = 0) {
    const int n = std::min({tasks, threads(), max_threads > 0 ? max_threads : tasks});
    if (n <= 1 || in_worker() || !busy_.try_lock()) {
      for (int t = 0; t < tasks; ++t)
        fn(t);
      return;
    }
    std::lock_guard<std::mutex> own(busy_, std::adopt_lock);
    parallel_passes_.fetch_add(1, std::memory_order_relaxed);
    const std::function<void(int)> job = std::ref(fn);
    bool wake;
    {
      std::lock_guard<std::mutex> lk(m_);
      job_ = &job;
      tasks_ = tasks;
      next_.store(0);
      helpers_ = n - 1;
      open_ = true;
      generation_.store(generation_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
      // Spinning workers see the new generation by themselves; only a sleeping one that
      // takes part is worth a wake-up.
      wake = std::find(asleep_.begin(), asleep_.begin() + (n - 1), char(1)) !=
             asleep_.begin() + (n - 1);
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
    spin_until([&] { return running_.load(std::memory_order_acquire) == 0; });
    std::unique_lock<std::mutex> lk(m_);
    done_cv_.wait(lk, [&] { return running_.load(std::memory_order_relaxed) == 0; });
    job_ = nullptr;
  }

  ~thread_pool() {
    {
      std::lock_guard<std::mutex> lk(m_);
      stop_.store(true);
    }
    cv_.notify_all();
    for (auto& w : workers_)
      w.join();
  }

  // Passes that woke workers since start (small passes run on the caller and don't count).
  std::uint64_t parallel_passes() const noexcept { return parallel_passes_.load(); }

  // KILN_NUM_THREADS (an integer in [1, 1024]; anything else is a kiln::error naming it),
  // else the hardware's thread count.
  static int default_threads() {
    const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    return static_cast<int>(settings::integer("KILN_NUM_THREADS", hw, 1, 1024));
  }

private:
  explicit thread_pool(int n) : active_(n), asleep_(std::size_t(std::max(n - 1, 0)), 0) {
    for (int i = 0; i + 1 < n; ++i)
      workers_.emplace_back([this, i] { work(i); });
  }

  static bool& in_worker() {
    thread_local bool flag = false;
    return flag;
  }

  void drain() {
    for (int t; (t = next_.fetch_add(1)) < tasks_;)
      (*job_)(t);
  }

  // Polls `ready` for up to spin_time, pausing the core between polls; true once it holds.
  template <class Ready>
  static bool spin_until(Ready&& ready) {
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

  void work(int index) {
    in_worker() = true;
    std::uint64_t seen = 0;
    for (;;) {
      // A new pass is a new generation: watched without the lock for a while, then asleep.
      spin_until([&] {
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

  std::vector<std::thread> workers_;
  std::atomic<int> active_;
  std::mutex busy_; // one pass at a time
  std::mutex m_;
  std::condition_variable cv_, done_cv_;
  const std::function<void(int)>* job_ = nullptr;
  int tasks_ = 0, helpers_ = 0;
  std::vector<char> asleep_;    // per worker: waiting on cv_ (under m_)
  std::atomic<int> running_{0}; // helpers inside the current pass (changed under m_)
  bool open_ = false;           // helpers may still join the current pass
  std::atomic<int> next_{0};
  std::atomic<std::uint64_t> parallel_passes_{0};
  std::atomic<std::uint64_t> generation_{0}; // passes started (changed under m_)
  std::atomic<bool> stop_{false};
};

// Number of threads host passes use; KILN_NUM_THREADS sets the start value.
inline int num_threads() { return thread_pool::instance().threads(); }
inline void set_num_threads(int n) { thread_pool::instance().set_threads(n); }

} // namespace kiln
