#pragma once
// A launch's configuration, asked by run_pass.hpp and run_reduction.hpp for each launch:
//   - under a tuner (a launch_hook set on this thread), the configuration the tuner forces,
//     and the launch is reported to it (family, kernel, size, and how to compile a
//     configuration without launching, for parallel compiles);
//   - else the database's choice (select.hpp), memoized per kernel and size bucket until the
//     database changes in this process; a device with nothing tuned takes the defaults
//     without a lookup.
#include "kiln/jit/tune/select.hpp"

#include <functional>

namespace kiln::jit {
class jit_backend;
} // namespace kiln::jit

namespace kiln::jit::tune {

// What a tuner learns of a launch made while it listens.
struct launch_site {
  jit_backend* backend = nullptr;
  std::string device; // the device's identity
  const space* sp = nullptr;
  std::string kernel;
  size_bucket bucket;
  // Compiles (or finds in the caches) the launch's kernels for a configuration, without
  // launching: thread-safe (the kernel caches are single-flight).
  std::function<void(const config&)> prepare;
};

struct launch_hook {
  const config* force = nullptr; // launches of this family and kernel take it
  std::string family, kernel;
  std::vector<launch_site> seen;
};

// The configuration of this thread's last launch of a family, and whether it was tuned (tests;
// a user checking what ran).
struct last_launch {
  std::string family;
  config cfg;
  bool tuned = false;
};
inline last_launch& last_choice(const std::string& family) {
  thread_local std::map<std::string, last_launch> by_family;
  return by_family[family];
}

inline launch_hook*& current_hook() {
  thread_local launch_hook* h = nullptr;
  return h;
}

// One kernel's choices by size bucket.
class choice_memo {
public:
  template <class Prepare>
  config get(jit_backend* be, const std::string& device, const space& sp, const std::string& kernel,
             const size_bucket& bucket, Prepare&& prepare) {
    const choice c = pick(be, device, sp, kernel, bucket, std::forward<Prepare>(prepare));
    last_launch& l = last_choice(sp.family());
    l.family = sp.family();
    l.cfg = c.cfg;
    l.tuned = c.tuned;
    return c.cfg;
  }

private:
  template <class Prepare>
  choice pick(jit_backend* be, const std::string& device, const space& sp,
              const std::string& kernel, const size_bucket& bucket, Prepare&& prepare) {
    if (launch_hook* h = current_hook()) {
      h->seen.push_back({be, device, &sp, kernel, bucket, std::forward<Prepare>(prepare)});
      if (h->force && h->kernel == kernel && h->family == sp.family())
        return {*h->force, *h->force != sp.defaults(), "forced by a tuner"};
    }
    selector& sel = selector::instance();
    // A device with nothing tuned, seen so at this view of the database: no lock at all.
    if (untuned_at_.load(std::memory_order_acquire) == sel.generation())
      return {sp.defaults(), false, {}};
    const std::uint64_t gen = sel.generation_after_open();
    if (!sel.has_device(device)) {
      if (log_enabled() && !said_default_.exchange(true))
        log(sp.family() + " kernel " + kernel.substr(0, 12) + ": defaults " +
            sp.format(sp.defaults()) + " (" + sel.choose(device, sp, kernel, bucket).why + ")");
      untuned_at_.store(gen, std::memory_order_release);
      return {sp.defaults(), false, {}};
    }
    std::lock_guard lock(mutex_);
    if (gen != generation_) {
      by_bucket_.clear();
      generation_ = gen;
    }
    if (auto it = by_bucket_.find(bucket); it != by_bucket_.end()) return it->second;
    choice c = sel.choose(device, sp, kernel, bucket);
    log(sp.family() + " kernel " + kernel.substr(0, 12) + " at 2^" + format_bucket(bucket) + ": " +
        (c.tuned ? "tuned " : "defaults ") + sp.format(c.cfg) + " (" + c.why + ")");
    by_bucket_.emplace(bucket, c);
    return c;
  }

  std::mutex mutex_;
  std::atomic<bool> said_default_{false};
  std::atomic<std::uint64_t> untuned_at_{0}; // the generation at which the device had nothing
  std::uint64_t generation_ = 0;
  std::map<size_bucket, choice> by_bucket_;
};

} // namespace kiln::jit::tune
