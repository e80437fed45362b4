#pragma once
// Runs a device kernel compiled as host code (grid_abi.h) over its grid on host threads: one
// host thread per thread of a group, the group's threads concurrently, the groups one after
// another (a group's shared memory is the kernel's statics). Barriers check what real
// hardware leaves undefined: a group whose threads do not all reach the same __syncthreads,
// or a shuffle some lanes of the warp no longer take part in, is a launch error, and so is a
// launch whose barriers make no progress for a minute (threads waiting on each other).
#include "grid_abi.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace kiln_cpu {

// A reusable barrier for `expected` threads; each arrival says where it comes from (kind),
// and a phase whose arrivals disagree marks the launch as diverged. Arrivals count under a
// mutex; waiters sleep on the phase counter (a futex), so a release wakes them without
// their contending for the mutex again (measured on 2 cores, 256 threads: 0.22 ms per
// phase; a condition variable's wake-all took 4.0 ms).
class barrier {
public:
  void reset(unsigned n) {
    std::lock_guard l(m_);
    expected_ = full_ = n;
  }
  // `done` runs once per phase, under the lock, before anyone is released. Once diverged,
  // the launch has failed: arrivals no longer wait (the threads are out of step, and waiting
  // could never end), so the kernel runs to its end with garbage.
  template <class F>
  void arrive(int kind, F&& done) {
    unsigned phase = 0;
    {
      std::lock_guard l(m_);
      if (arrived_ == 0)
        kind_ = kind;
      else if (kind_ != kind)
        diverged_ = true;
      if (expected_ < full_) diverged_ = true; // some threads left without taking part
      if (++arrived_ >= expected_) {
        arrived_ = 0;
        done();
        return release();
      }
      if (diverged_) {
        --arrived_;
        return release();
      }
      phase = phase_.load(std::memory_order_relaxed);
    }
    while (phase_.load(std::memory_order_acquire) == phase)
      phase_.wait(phase, std::memory_order_acquire);
  }
  void arrive(int kind) {
    arrive(kind, [] {});
  }
  // A thread that will not arrive again in this phase (its kernel returned).
  void leave() {
    std::lock_guard l(m_);
    --expected_;
    if (arrived_ > 0) {
      diverged_ = true;
      release();
    }
  }
  // Releases every waiter for good, the launch failed (it hung).
  void abandon() {
    std::lock_guard l(m_);
    diverged_ = true;
    release();
  }
  bool diverged() const {
    std::lock_guard l(m_);
    return diverged_;
  }
  unsigned phases() const { return phase_.load(std::memory_order_relaxed); }

private:
  void release() {
    phase_.fetch_add(1, std::memory_order_release);
    phase_.notify_all();
  }
  mutable std::mutex m_;
  std::atomic<unsigned> phase_{0};
  unsigned expected_ = 0, full_ = 0, arrived_ = 0;
  int kind_ = 0;
  bool diverged_ = false;
};

// Runs entry over grid x block with `args`; empty on success, else why the launch failed.
inline std::string run_grid(kiln_cpu_entry entry, const void* args, const unsigned grid[3],
                            const unsigned block[3]) {
  const unsigned long long groups = 1ull * grid[0] * grid[1] * grid[2];
  const unsigned long long threads = 1ull * block[0] * block[1] * block[2];
  if (groups == 0 || threads == 0 || threads > 1024)
    return "invalid launch configuration: grid " + std::to_string(grid[0]) + "x" +
           std::to_string(grid[1]) + "x" + std::to_string(grid[2]) + ", block " +
           std::to_string(block[0]) + "x" + std::to_string(block[1]) + "x" +
           std::to_string(block[2]);
  const unsigned n = static_cast<unsigned>(threads);
  const unsigned warps = (n + KILN_CPU_WARP - 1) / KILN_CPU_WARP;
  struct shared {
    barrier group;
    std::vector<barrier> warp;
    std::vector<unsigned char> slots;
  } s{{}, std::vector<barrier>(warps), std::vector<unsigned char>(16u * KILN_CPU_WARP * warps)};
  auto lanes_of = [&](unsigned w) {
    return std::min<unsigned>(KILN_CPU_WARP, n - w * KILN_CPU_WARP);
  };
  s.group.reset(n);
  for (unsigned w = 0; w < warps; ++w)
    s.warp[w].reset(lanes_of(w));
  struct context {
    shared* s;
    unsigned warp;
  };
  std::vector<context> ctx(n);
  std::vector<kiln_cpu_thread> t(n);
  for (unsigned i = 0; i < n; ++i) {
    ctx[i] = {&s, i / KILN_CPU_WARP};
    kiln_cpu_thread& x = t[i];
    x.thread[0] = i % block[0];
    x.thread[1] = i / block[0] % block[1];
    x.thread[2] = i / (block[0] * block[1]);
    for (int d = 0; d < 3; ++d) {
      x.group_size[d] = block[d];
      x.groups[d] = grid[d];
    }
    x.lane = i % KILN_CPU_WARP;
    x.warp_lanes = lanes_of(i / KILN_CPU_WARP);
    x.group_barrier = [](void* c, int site) { static_cast<context*>(c)->s->group.arrive(site); };
    x.warp_barrier = [](void* c) {
      auto* k = static_cast<context*>(c);
      k->s->warp[k->warp].arrive(0);
    };
    x.runner = &ctx[i];
    x.warp_slots = s.slots.data() + 16u * KILN_CPU_WARP * (i / KILN_CPU_WARP);
  }
  auto work = [&](unsigned i) {
    kiln_cpu_thread& x = t[i];
    for (unsigned long long g = 0; g < groups; ++g) {
      x.group[0] = static_cast<unsigned>(g % grid[0]);
      x.group[1] = static_cast<unsigned>(g / grid[0] % grid[1]);
      x.group[2] = static_cast<unsigned>(g / (1ull * grid[0] * grid[1]));
      entry(args, &x);
      s.warp[i / KILN_CPU_WARP].leave();
      // The end of the group (site -1): the last thread makes the warps whole for the next.
      s.group.arrive(-1, [&] {
        for (unsigned w = 0; w < warps; ++w)
          s.warp[w].reset(lanes_of(w));
      });
    }
  };
  // The watchdog: no barrier phase completing for a minute means threads wait on each other
  // (a shuffle's lanes at a group barrier, say); every barrier then lets everyone through.
  std::mutex wm;
  std::condition_variable wcv;
  bool finished = false, hung = false;
  std::thread watchdog([&] {
    auto progress = [&] {
      unsigned long long p = s.group.phases();
      for (const auto& w : s.warp)
        p += w.phases();
      return p;
    };
    std::unique_lock l(wm);
    auto last = progress();
    auto since = std::chrono::steady_clock::now();
    while (!wcv.wait_for(l, std::chrono::seconds(1), [&] { return finished; })) {
      if (const auto p = progress(); p != last) {
        last = p;
        since = std::chrono::steady_clock::now();
      } else if (std::chrono::steady_clock::now() - since > std::chrono::minutes(1)) {
        hung = true;
        s.group.abandon();
        for (auto& w : s.warp)
          w.abandon();
      }
    }
  });
  std::vector<std::thread> pool;
  pool.reserve(n - 1);
  for (unsigned i = 1; i < n; ++i)
    pool.emplace_back(work, i);
  work(0);
  for (auto& th : pool)
    th.join();
  {
    std::lock_guard l(wm);
    finished = true;
  }
  wcv.notify_one();
  watchdog.join();
  if (hung) return "the threads of a group waited a minute on each other's barriers";
  bool warp_diverged = false;
  for (const auto& w : s.warp)
    warp_diverged = warp_diverged || w.diverged();
  if (s.group.diverged())
    return "the threads of a group did not all reach the same __syncthreads / barrier";
  if (warp_diverged) return "a shuffle ran while lanes of its warp had left the kernel";
  return {};
}

} // namespace kiln_cpu
