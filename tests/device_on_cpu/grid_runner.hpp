#pragma once
// Runs a device kernel compiled as host code (grid_abi.h) over its grid on the calling host
// thread: each thread of a group is a fiber (ucontext) with its own stack, switched at the
// group's and the warp's barriers, the groups one after another (a group's shared memory is
// the kernel's statics). (A host thread per device thread, the runner before this one, spent
// most of a reduction test in the scheduler: 256 threads on 2 cores, 0.1-0.2 ms a barrier.)
// After each barrier the fibers go on in the opposite order to the last, and each group in
// the opposite order to the group before, so that a read that a missing barrier leaves
// unordered against another thread's write comes before that write in one of the groups,
// and shows as a wrong value. Barriers check what real hardware leaves undefined: a group
// whose threads do not all reach the same __syncthreads, or a shuffle some lanes of the warp
// no longer take part in, is a launch error, and so is a launch whose barriers can make no
// progress (threads waiting on each other).
#include "grid_abi.h"

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <sys/mman.h>
#include <ucontext.h>

#if defined(__SANITIZE_ADDRESS__)
#define KILN_CPU_ASAN_FIBERS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KILN_CPU_ASAN_FIBERS 1
#endif
#endif
#ifdef KILN_CPU_ASAN_FIBERS
#include <sanitizer/common_interface_defs.h>
#endif

namespace kiln_cpu {

// The fibers of one launch and the host thread that switches between them.
class fibers {
public:
  // A fiber's stack: the kernel's locals and the runner's frames (ASan's are larger).
  static constexpr std::size_t stack_bytes = 256 * 1024;

  explicit fibers(unsigned n) : f_(n) {}
  fibers(const fibers&) = delete;
  fibers& operator=(const fibers&) = delete;
  ~fibers() {
    for (auto& f : f_)
      if (f.stack) ::munmap(f.stack, stack_bytes);
  }

  // Runs body(i) on fiber i for every i until all return; false if a stack could not be had.
  // progress() counts what the fibers have done (their barriers' phases); stuck() is called
  // after a round in which none of them could go on, and must let them.
  template <class Body, class Progress, class Stuck>
  bool run(Body& body, const Progress& progress, const Stuck& stuck) {
    body_ = &body;
    call_ = [](void* b, unsigned i) { (*static_cast<Body*>(b))(i); };
    for (unsigned i = 0; i < f_.size(); ++i) {
      void* s = ::mmap(nullptr, stack_bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (s == MAP_FAILED) return false;
      f_[i].stack = s;
      prepare(f_[i], this, i);
    }
    unsigned live = static_cast<unsigned>(f_.size());
    while (live > 0) {
      const auto before = progress();
      const unsigned live_before = live;
      for (unsigned k = 0; k < f_.size(); ++k) {
        const unsigned i = forward_ ? k : static_cast<unsigned>(f_.size()) - 1 - k;
        if (f_[i].finished) continue;
        switch_to(i);
        if (f_[i].finished) --live;
      }
      forward_ = !forward_;
      // A whole round in which every waiting fiber found its barrier still closed: they wait
      // on each other, and nothing will open it.
      if (live > 0 && live == live_before && progress() == before) stuck();
    }
    return true;
  }

  // One round more in the same order: at the end of a group, so that the next group runs
  // each stretch between two barriers in the other order.
  void reverse() { forward_ = !forward_; }

  // From fiber code: back to the host thread until the next round.
  void yield() {
    fiber& me = f_[current_];
#ifdef KILN_CPU_ASAN_FIBERS
    void* fake = nullptr;
    __sanitizer_start_switch_fiber(&fake, host_bottom_, host_size_);
    ::swapcontext(&me.ctx, &host_);
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#else
    ::swapcontext(&me.ctx, &host_);
#endif
  }

private:
  struct fiber {
    ucontext_t ctx{};
    void* stack = nullptr;
    bool finished = false;
  };

  // Apart from run's loop: getcontext returns twice as far as the compiler knows, and the
  // loop's variables would be "clobbered" (-Wclobbered).
  [[gnu::noinline]] static void prepare(fiber& f, fibers* self, unsigned i) {
    ::getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack;
    f.ctx.uc_stack.ss_size = stack_bytes;
    f.ctx.uc_link = nullptr;
    // makecontext passes ints: the pointer in two halves.
    const auto p = reinterpret_cast<unsigned long long>(self);
    ::makecontext(&f.ctx, reinterpret_cast<void (*)()>(&start), 3, static_cast<unsigned>(p >> 32),
                  static_cast<unsigned>(p), i);
  }

  static void start(unsigned hi, unsigned lo, unsigned i) {
    auto* self = reinterpret_cast<fibers*>((static_cast<unsigned long long>(hi) << 32) | lo);
#ifdef KILN_CPU_ASAN_FIBERS
    __sanitizer_finish_switch_fiber(nullptr, &self->host_bottom_, &self->host_size_);
#endif
    self->call_(self->body_, i);
    self->f_[i].finished = true;
#ifdef KILN_CPU_ASAN_FIBERS
    // Its stack is done with: no fake frames to keep (nullptr).
    __sanitizer_start_switch_fiber(nullptr, self->host_bottom_, self->host_size_);
#endif
    ::setcontext(&self->host_);
  }

  void switch_to(unsigned i) {
    current_ = i;
#ifdef KILN_CPU_ASAN_FIBERS
    void* fake = nullptr;
    __sanitizer_start_switch_fiber(&fake, f_[i].stack, stack_bytes);
    ::swapcontext(&host_, &f_[i].ctx);
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#else
    ::swapcontext(&host_, &f_[i].ctx);
#endif
  }

  std::vector<fiber> f_;
  ucontext_t host_{};
  unsigned current_ = 0;
  bool forward_ = true;
  void* body_ = nullptr;
  void (*call_)(void*, unsigned) = nullptr;
#ifdef KILN_CPU_ASAN_FIBERS
  const void* host_bottom_ = nullptr;
  std::size_t host_size_ = 0;
#endif
};

// A reusable barrier for `expected` fibers; each arrival says where it comes from (kind), and
// a phase whose arrivals disagree marks the launch as diverged.
class barrier {
public:
  void reset(unsigned n) { expected_ = full_ = n; }
  // `done` runs once per phase, before anyone goes on. Once diverged, the launch has failed:
  // arrivals no longer wait (the threads are out of step, and waiting could never end), so
  // the kernel runs to its end with garbage.
  template <class F>
  void arrive(fibers& f, int kind, F&& done) {
    if (arrived_ == 0)
      kind_ = kind;
    else if (kind_ != kind)
      diverged_ = true;
    if (expected_ < full_) diverged_ = true; // some threads left without taking part
    if (++arrived_ >= expected_) {
      arrived_ = 0;
      done();
      ++phase_;
      return;
    }
    if (diverged_) {
      --arrived_;
      ++phase_;
      return;
    }
    for (const unsigned long long phase = phase_; phase_ == phase;)
      f.yield();
  }
  void arrive(fibers& f, int kind) {
    arrive(f, kind, [] {});
  }
  // A thread that will not arrive again in this phase (its kernel returned).
  void leave() {
    --expected_;
    if (arrived_ > 0) {
      diverged_ = true;
      ++phase_;
    }
  }
  // Releases every waiter for good, the launch failed (it hung).
  void abandon() {
    diverged_ = true;
    ++phase_;
  }
  bool diverged() const { return diverged_; }
  unsigned long long phases() const { return phase_; }

private:
  unsigned long long phase_ = 0;
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
    fibers run;
    barrier group;
    std::vector<barrier> warp;
    std::vector<unsigned char> slots;
  };
  const std::unique_ptr<shared> s(
      new shared{fibers(n),
                 {},
                 std::vector<barrier>(warps),
                 std::vector<unsigned char>(16u * KILN_CPU_WARP * warps)});
  auto lanes_of = [&](unsigned w) {
    return std::min<unsigned>(KILN_CPU_WARP, n - w * KILN_CPU_WARP);
  };
  s->group.reset(n);
  for (unsigned w = 0; w < warps; ++w)
    s->warp[w].reset(lanes_of(w));
  struct context {
    shared* s;
    unsigned warp;
  };
  std::vector<context> ctx(n);
  std::vector<kiln_cpu_thread> t(n);
  for (unsigned i = 0; i < n; ++i) {
    ctx[i] = {s.get(), i / KILN_CPU_WARP};
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
    x.group_barrier = [](void* c, int site) {
      auto* k = static_cast<context*>(c);
      k->s->group.arrive(k->s->run, site);
    };
    x.warp_barrier = [](void* c) {
      auto* k = static_cast<context*>(c);
      k->s->warp[k->warp].arrive(k->s->run, 0);
    };
    x.runner = &ctx[i];
    x.warp_slots = s->slots.data() + 16u * KILN_CPU_WARP * (i / KILN_CPU_WARP);
  }
  auto work = [&](unsigned i) {
    kiln_cpu_thread& x = t[i];
    for (unsigned long long g = 0; g < groups; ++g) {
      x.group[0] = static_cast<unsigned>(g % grid[0]);
      x.group[1] = static_cast<unsigned>(g / grid[0] % grid[1]);
      x.group[2] = static_cast<unsigned>(g / (1ull * grid[0] * grid[1]));
      entry(args, &x);
      s->warp[i / KILN_CPU_WARP].leave();
      // The end of the group (site -1): the last thread makes the warps whole for the next.
      s->group.arrive(s->run, -1, [&] {
        for (unsigned w = 0; w < warps; ++w)
          s->warp[w].reset(lanes_of(w));
        s->run.reverse();
      });
    }
  };
  auto progress = [&] {
    unsigned long long k = s->group.phases();
    for (const auto& w : s->warp)
      k += w.phases();
    return k;
  };
  bool hung = false;
  auto stuck = [&] {
    hung = true;
    s->group.abandon();
    for (auto& w : s->warp)
      w.abandon();
  };
  if (!s->run.run(work, progress, stuck))
    return "cannot map the stacks of " + std::to_string(n) + " threads";
  if (hung) return "the threads of a group wait on each other's barriers: none can go on";
  bool warp_diverged = false;
  for (const auto& w : s->warp)
    warp_diverged = warp_diverged || w.diverged();
  if (s->group.diverged())
    return "the threads of a group did not all reach the same __syncthreads / barrier";
  if (warp_diverged) return "a shuffle ran while lanes of its warp had left the kernel";
  return {};
}

} // namespace kiln_cpu
