#pragma once
// Which configuration a launch takes: the database's choice for its device, kernel and size,
// else the nearest tuned size of the same kernel, else the family's choice for every kernel
// ("*": what `kiln-tune run FAMILY` tunes) at the nearest size, else the defaults. A choice
// that is not legal on the device any more (another driver's limits, a parameter removed)
// is skipped. Nothing is ever measured here.
//   KILN_TUNE_DB: the file, or a folder holding `tuning.kdb`; unset: `tuning.kdb` in the
//     kernel cache's folder.
//   KILN_TUNE=off: the database is not read (deterministic runs).
//   KILN_LOG=jit: each choice, and why, once per kernel and size bucket.
// The database is read once, at the first launch that asks, and again only after this
// process appends to it (tuning in process): launches never touch the file.
#include "kiln/eval/host_launch.hpp"
#include "kiln/jit/cache/disk_cache.hpp"
#include "kiln/jit/cache/kernel_cache.hpp"
#include "kiln/jit/tune/database.hpp"
#include "kiln/jit/tune/space.hpp"
#include "kiln/settings.hpp"

#include <atomic>
#include <fstream>
#include <map>
#include <memory>
#include <sys/stat.h>
#include <thread>

namespace kiln::jit::tune {

struct choice {
  config cfg;
  bool tuned = false;
  std::string why; // for the log: which record, or why the defaults
};

// The database file KILN_TUNE_DB names (a folder: tuning.kdb in it), else tuning.kdb in
// the kernel cache's folder; empty when there is none.
inline std::string database_path() {
  if (const auto v = settings::text("KILN_TUNE_DB")) {
    struct stat st {};
    if (v->back() == '/' || (::stat(v->c_str(), &st) == 0 && S_ISDIR(st.st_mode)))
      return (v->back() == '/' ? *v : *v + "/") + "tuning.kdb";
    return *v;
  }
  const std::string& dir = shared_disk_cache().dir();
  return dir.empty() ? std::string() : dir + "/tuning.kdb";
}

// Read when the selector opens the database (once per process, or at selector::reopen).
inline bool tuning_off() { return settings::in_list("KILN_TUNE", "off"); }

// The host as the tuning database knows it: its CPU model and hardware threads.
inline const std::string& host_identity() {
  static const std::string id = [] {
    std::string model = "unknown CPU";
    std::ifstream f("/proc/cpuinfo");
    for (std::string line; std::getline(f, line);)
      if (line.rfind("model name", 0) == 0) {
        if (const auto colon = line.find(':'); colon != std::string::npos)
          model = line.substr(line.find_first_not_of(' ', colon + 1));
        break;
      }
    return "host " + model + ", " + std::to_string(std::thread::hardware_concurrency()) +
           " hardware threads";
  }();
  return id;
}

// Whether the database holds a choice for this host: host passes look nothing up otherwise.
inline std::atomic<bool>& host_tuned() {
  static std::atomic<bool> b{false};
  return b;
}

class selector {
public:
  static selector& instance() {
    static selector s;
    return s;
  }

  // The database of this process (opened at first use); null with KILN_TUNE=off or no path.
  // Shared: another thread's use() or reopen() may replace it while the caller reads it.
  std::shared_ptr<database> db() {
    std::lock_guard lock(mutex_);
    open_locked();
    return db_;
  }

  // Whether any choice exists for this device: launches on a device without one take the
  // defaults without a lookup.
  bool has_device(const std::string& device) {
    std::lock_guard lock(mutex_);
    open_locked();
    return by_device_.count(device) != 0;
  }

  // Bumped when this process's view of the database changes (memoized choices compare it).
  std::uint64_t generation() const { return generation_.load(std::memory_order_acquire); }
  // The same, the database read first where it was not yet.
  std::uint64_t generation_after_open() {
    if (!opened_flag_.load(std::memory_order_acquire)) {
      std::lock_guard lock(mutex_);
      open_locked();
    }
    return generation();
  }

  // Re-reads the database (after this process appended to it).
  void reload() {
    std::lock_guard lock(mutex_);
    open_locked();
    index_locked();
  }

  // Reads KILN_TUNE and KILN_TUNE_DB again, and the database (tests; kiln-tune).
  void reopen() {
    std::lock_guard lock(mutex_);
    opened_ = false;
    opened_flag_.store(false, std::memory_order_release);
    off_ = false;
    db_.reset();
    open_locked();
  }

  // Points this process at another database file (tests, kiln-tune --db); "" closes it.
  void use(const std::string& path) {
    std::lock_guard lock(mutex_);
    opened_ = true;
    opened_flag_.store(true, std::memory_order_release);
    off_ = false;
    db_ = path.empty() ? nullptr : std::make_shared<database>(path);
    index_locked();
  }

  choice choose(const std::string& device, const space& sp, const std::string& kernel,
                const size_bucket& bucket) {
    std::lock_guard lock(mutex_);
    open_locked();
    choice c{sp.defaults(), false, {}};
    if (!db_) {
      c.why = off_ ? "KILN_TUNE=off" : "no tuning database";
      return c;
    }
    const auto dev = by_device_.find(device);
    if (dev == by_device_.end()) {
      c.why = "nothing tuned for this device in " + db_->path();
      return c;
    }
    const std::string want = format_bucket(bucket);
    // Exact size, then the nearest, for the kernel, then for the whole family.
    std::string skipped;
    for (const std::string& k : {kernel, std::string("*")}) {
      const record* best = nullptr;
      int best_d = -1;
      for (const record* r : dev->second) {
        if (r->family != sp.family() || r->kernel != k) continue;
        const auto b = parse_bucket(r->size);
        const int d = b ? bucket_distance(*b, bucket) : -1;
        if (d < 0 || (best && d >= best_d)) continue;
        const auto cfg = sp.parse(r->config);
        const std::string why = cfg ? sp.why_illegal(*cfg) : "a configuration of another space";
        if (!why.empty()) {
          skipped = " (skipped " + r->config + ": " + why + ")";
          continue;
        }
        best = r;
        best_d = d;
      }
      if (best) {
        c.cfg = *sp.parse(best->config);
        c.tuned = true;
        c.why = std::string(k == "*" ? "the family's" : "this kernel's") + " tuned choice at " +
                (best->size == want ? "this size" : "the nearest size, 2^" + best->size) + skipped;
        return c;
      }
    }
    c.why = "nothing tuned for this kernel or family" + skipped;
    return c;
  }

private:
  void open_locked() {
    if (opened_) return;
    opened_ = true;
    opened_flag_.store(true, std::memory_order_release);
    off_ = tuning_off();
    if (off_) {
      index_locked();
      return;
    }
    // The database is an optimization: a kernel-cache folder that cannot be used (the
    // backends report it where they compile) leaves it closed, and a host-only program
    // runs on with the defaults.
    std::string path;
    try {
      path = database_path();
    } catch (const error& e) {
      log(std::string("no tuning database: ") + e.what());
    }
    if (!path.empty()) db_ = std::make_shared<database>(path);
    index_locked();
  }

  // The latest `c` record of each key, grouped by device.
  void index_locked() {
    all_.clear();
    by_device_.clear();
    if (db_) {
      const auto st = db_->stats();
      if (st.foreign) log("the tuning database " + db_->path() + " is not kiln's: not read");
      std::map<std::string, std::size_t> latest; // key -> index in all_
      for (auto& r : db_->records()) {
        if (r.kind != 'c' || r.status != "ok") continue;
        const std::string key = r.device + '\t' + r.family + '\t' + r.kernel + '\t' + r.size;
        if (auto it = latest.find(key); it != latest.end())
          all_[it->second] = std::move(r);
        else {
          latest.emplace(key, all_.size());
          all_.push_back(std::move(r));
        }
      }
      for (const auto& r : all_)
        by_device_[r.device].push_back(&r);
    }
    host_tuned().store(by_device_.count(host_identity()) != 0, std::memory_order_relaxed);
    if (host_tuned().load(std::memory_order_relaxed))
      kiln::detail::host_chooser_wanted().store(true, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }

  std::mutex mutex_;
  bool opened_ = false;
  std::atomic<bool> opened_flag_{false}; // opened_, read without the lock
  bool off_ = false;
  std::shared_ptr<database> db_;
  std::vector<record> all_;
  std::map<std::string, std::vector<const record*>> by_device_;
  std::atomic<std::uint64_t> generation_{1};
};

} // namespace kiln::jit::tune
