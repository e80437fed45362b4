#pragma once
// kiln::jit::disk_cache: compiled kernel binaries kept on disk, so a second process skips
// the compiler. Entries live at <dir>/<first two hex digits of the key>/<key hex>.kc
// (sharded so no folder grows huge); their format and atomic writing are in
// disk_cache_entry.hpp.
//
// Failure model: the cache is an optimisation, so I/O problems never throw. A corrupt,
// truncated or foreign file is a miss (and the next store replaces it); a folder that cannot
// be created or written makes the cache memory-only (enabled() is false, reason() says
// why). Only programming errors throw kiln::error (a malformed KILN_CACHE_MAX_BYTES).
//
// Size: the total of all entries is kept under max_bytes by evicting the least recently
// used entries (oldest mtime first; a hit refreshes the mtime). The total is scanned once
// at construction and kept as a running sum; because other processes fill the same folder,
// it is rescanned before every eviction and every rescan_interval stores.
//
// Threads and processes may share one folder: writes are temp-file + rename, readers verify
// everything, and the bookkeeping here is under a mutex (file I/O runs outside it).
#include "kiln/error.hpp"
#include "kiln/jit/cache/disk_cache_entry.hpp"
#include "kiln/jit/cache/hash.hpp"
#include "kiln/jit/cache/kernel_cache.hpp"
#include "kiln/settings.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

namespace kiln::jit {

class disk_cache {
public:
  struct stats {
    std::uint64_t hits = 0;
    std::uint64_t misses = 0;    // loads that returned nothing, rejected ones included
    std::uint64_t stores = 0;    // entries written
    std::uint64_t evictions = 0; // entries this object removed to respect the bound
    std::uint64_t rejected = 0;  // files found but unusable: corrupt, truncated or foreign
  };

  static constexpr std::uint64_t default_max_bytes() { return std::uint64_t{256} << 20; }
  // Stores between two rescans of the folder, to notice what other processes added.
  static constexpr std::uint64_t rescan_interval = 64;
  // A temp file this old belongs to a writer that died; a live one takes milliseconds.
  static constexpr std::chrono::seconds stale_temp_age{3600};

  explicit disk_cache(std::string dir, std::uint64_t max_bytes = default_max_bytes())
      : dir_(std::move(dir)), max_bytes_(max_bytes) {
    open();
  }

  // As above, but a folder that cannot be used is a kiln::error under the setting's name.
  disk_cache(std::string dir, std::uint64_t max_bytes,
             settings::key_of<settings::kind::folder> setting)
      : disk_cache(std::move(dir), max_bytes) {
    if (!enabled_ && max_bytes_ != 0)
      throw error(setting.name(), "cannot use the cache folder", reason_);
  }

  disk_cache(const disk_cache&) = delete;
  disk_cache& operator=(const disk_cache&) = delete;

  // The folder: KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else $HOME/.cache/kiln; the
  // bound: KILN_CACHE_MAX_BYTES (bytes, or with a K/M/G suffix), else the default. A
  // KILN_CACHE_DIR that cannot be used is an error (it was asked for: every run would
  // silently recompile); a default folder that cannot means memory only.
  static disk_cache from_environment() {
    const std::uint64_t max_bytes = settings::bytes("KILN_CACHE_MAX_BYTES", default_max_bytes());
    if (const auto v = settings::text("KILN_CACHE_DIR"))
      return disk_cache(*v, max_bytes, "KILN_CACHE_DIR");
    // The XDG spec says to ignore a relative XDG_CACHE_HOME.
    if (const auto v = settings::text("XDG_CACHE_HOME"); v && v->front() == '/')
      return disk_cache(*v + "/kiln", max_bytes);
    if (const auto v = settings::text("HOME")) return disk_cache(*v + "/.cache/kiln", max_bytes);
    return disk_cache("", max_bytes);
  }

  bool enabled() const { return enabled_; }
  // Why the cache is memory-only; empty while enabled.
  const std::string& reason() const { return reason_; }
  const std::string& dir() const { return dir_; }
  std::uint64_t max_bytes() const { return max_bytes_; }

  // Where the entry for key lives (it may not exist).
  std::string path_of(const hash128& key) const {
    const std::string hex = key.hex();
    return dir_ + "/" + hex.substr(0, 2) + "/" + hex + std::string(cache_entry::file_suffix);
  }

  std::optional<std::vector<std::byte>> load(const hash128& key, std::string_view identity) {
    if (!enabled_) {
      count(&stats::misses);
      return std::nullopt;
    }
    cache_entry::read_result r = cache_entry::read_file(path_of(key), key, identity, max_bytes_);
    switch (r.status) {
    case cache_entry::read_status::hit:
      count(&stats::hits);
      return std::move(r.payload);
    case cache_entry::read_status::missing:
      count(&stats::misses);
      break;
    case cache_entry::read_status::rejected:
      count(&stats::misses);
      count(&stats::rejected);
      break;
    }
    return std::nullopt;
  }

  // Writes the entry (replacing any file at its path), then evicts if over the bound. An
  // entry larger than the whole bound is not written: it would evict everything, itself too.
  void store(const hash128& key, std::string_view identity, std::span<const std::byte> payload) {
    if (identity.size() > std::numeric_limits<std::uint32_t>::max())
      throw kiln::error("disk_cache::store", "identity string too long",
                        std::to_string(identity.size()) + " bytes; the file format holds 2^32-1");
    if (!enabled_) return;
    const std::uint64_t entry_bytes = cache_entry::header_size + identity.size() + payload.size();
    if (entry_bytes > max_bytes_) return;
    const cache_entry::write_result w =
        cache_entry::write_file(path_of(key), key, identity, payload);
    if (!w.ok) return; // disk full, folder removed or made read-only: the kernel stays in memory
    bool evict_now;
    {
      std::lock_guard lock(mutex_);
      ++stats_.stores;
      total_bytes_ = total_bytes_ + w.bytes - std::min(w.replaced_bytes, total_bytes_ + w.bytes);
      ++stores_since_scan_;
      evict_now = total_bytes_ > max_bytes_ || stores_since_scan_ >= rescan_interval;
    }
    if (evict_now) rescan_and_evict();
  }

  // The total size of the entries, as tracked (exact after a rescan; between rescans it
  // misses what other processes wrote).
  std::uint64_t total_bytes() const {
    std::lock_guard lock(mutex_);
    return total_bytes_;
  }

  stats counters() const {
    std::lock_guard lock(mutex_);
    return stats_;
  }

private:
  struct entry_file {
    std::string path;
    std::uint64_t bytes;
    timespec mtime;
  };

  static bool is_hex(std::string_view s) {
    return std::all_of(s.begin(), s.end(),
                       [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
  }

  // "<32 hex>.kc" inside the shard folder named after its first two digits.
  static bool is_entry_name(std::string_view name, std::string_view shard) {
    return name.size() == 32 + cache_entry::file_suffix.size() &&
           name.ends_with(cache_entry::file_suffix) && is_hex(name.substr(0, 32)) &&
           name.substr(0, 2) == shard;
  }

  void count(std::uint64_t stats::*field) {
    std::lock_guard lock(mutex_);
    ++(stats_.*field);
  }

  void disable(std::string why) {
    enabled_ = false;
    reason_ = std::move(why);
  }

  void open() {
    if (dir_.empty())
      return disable("no cache folder: KILN_CACHE_DIR, XDG_CACHE_HOME and HOME "
                     "are all unset or empty");
    if (max_bytes_ == 0) return disable("the size bound is 0 bytes (KILN_CACHE_MAX_BYTES=0?)");
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    if (ec && !std::filesystem::is_directory(dir_))
      return disable("cannot create the cache folder " + dir_ + ": " + ec.message());
    // Permission bits do not tell the whole story (read-only mounts, ACLs, root): try it.
    const std::string probe = cache_entry::temp_path_for(dir_ + "/.write-test");
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
      return disable("cannot write to the cache folder " + dir_ + ": " + std::strerror(errno));
    ::close(fd);
    ::unlink(probe.c_str());
    enabled_ = true;
    std::uint64_t total = 0;
    for (const entry_file& e : scan())
      total += e.bytes;
    total_bytes_ = total;
  }

  static bool older_than(const timespec& t, std::chrono::seconds age) {
    timespec now{};
    ::clock_gettime(CLOCK_REALTIME, &now);
    return now.tv_sec - t.tv_sec > age.count();
  }

  static void remove_if_stale_temp(const std::string& path, std::string_view name,
                                   const struct stat& st) {
    if (S_ISREG(st.st_mode) && name.ends_with(cache_entry::temp_suffix) &&
        older_than(st.st_mtim, stale_temp_age))
      ::unlink(path.c_str());
  }

  // Every entry file under the folder. Temp files left by writers that died are removed;
  // anything else that kiln did not name is left alone.
  std::vector<entry_file> scan() const {
    namespace fs = std::filesystem;
    std::vector<entry_file> entries;
    std::error_code ec;
    for (fs::directory_iterator shard(dir_, ec), end; !ec && shard != end; shard.increment(ec)) {
      const std::string shard_name = shard->path().filename().string();
      const std::string shard_path = shard->path().string();
      struct stat st {};
      if (::lstat(shard_path.c_str(), &st) != 0) continue;
      if (!S_ISDIR(st.st_mode)) {
        if (shard_name.starts_with(".write-test."))
          remove_if_stale_temp(shard_path, shard_name, st);
        continue;
      }
      if (shard_name.size() != 2 || !is_hex(shard_name)) continue;
      std::error_code ec2;
      for (fs::directory_iterator it(shard->path(), ec2); !ec2 && it != end; it.increment(ec2)) {
        const std::string name = it->path().filename().string();
        const std::string path = it->path().string();
        if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
        if (is_entry_name(name, shard_name))
          entries.push_back({path, static_cast<std::uint64_t>(st.st_size), st.st_mtim});
        else if (name.size() > 32 && is_entry_name(name.substr(0, 35), shard_name))
          remove_if_stale_temp(path, name, st); // "<key>.kc.<pid>-<n>-<nonce>.tmp"
      }
    }
    return entries;
  }

  // One thread at a time rescans; others carry on (their entries are seen next time).
  void rescan_and_evict() {
    std::unique_lock evicting(evict_mutex_, std::try_to_lock);
    if (!evicting.owns_lock()) return;
    std::vector<entry_file> entries = scan();
    std::uint64_t total = 0;
    for (const entry_file& e : entries)
      total += e.bytes;
    std::uint64_t evicted = 0;
    if (total > max_bytes_) {
      // Oldest mtime first (least recently stored or loaded); the path breaks ties so every
      // process agrees on the order.
      std::sort(entries.begin(), entries.end(), [](const entry_file& a, const entry_file& b) {
        if (a.mtime.tv_sec != b.mtime.tv_sec) return a.mtime.tv_sec < b.mtime.tv_sec;
        if (a.mtime.tv_nsec != b.mtime.tv_nsec) return a.mtime.tv_nsec < b.mtime.tv_nsec;
        return a.path < b.path;
      });
      for (const entry_file& e : entries) {
        if (total <= max_bytes_) break;
        if (::unlink(e.path.c_str()) == 0)
          ++evicted;
        else if (errno != ENOENT) // another process may have evicted it first
          continue;
        total -= e.bytes;
      }
    }
    // Stores by other threads since the scan may be dropped from the total here: it is an
    // estimate between rescans, and the next rescan corrects it.
    std::lock_guard lock(mutex_);
    total_bytes_ = total;
    stores_since_scan_ = 0;
    stats_.evictions += evicted;
  }

  std::string dir_;
  std::uint64_t max_bytes_;
  bool enabled_ = false;
  std::string reason_;

  mutable std::mutex mutex_; // guards the members below
  stats stats_;
  std::uint64_t total_bytes_ = 0;
  std::uint64_t stores_since_scan_ = 0;

  std::mutex evict_mutex_;
};

// The disk cache of the process, shared by every backend and device (entries are keyed by
// device and compiler), with the environment's settings.
inline disk_cache& shared_disk_cache() {
  static disk_cache c = disk_cache::from_environment();
  // No temporaries in a static's initializer (see cuda_home_from_environment).
  static const bool said = [] {
    if (!c.enabled()) {
      const std::string line = "disk cache off: " + c.reason();
      log(line);
    }
    return true;
  }();
  (void)said;
  return c;
}

} // namespace kiln::jit
