#pragma once
// The in-memory kernel cache of a device, single-flight: threads that need the same kernel
// at once wait for one compile. Keyed by the full generated source (exact, no hashing on
// this path: it runs only when an expression type meets a device for the first time).
// Also the JIT's logging (KILN_LOG=jit) and kernel dumps (KILN_DUMP_KERNELS=dir).
#include "kiln/jit/cache/hash.hpp"
#include "kiln/settings.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <string>
#include <unordered_map>

namespace kiln::jit {

// KILN_LOG=jit (or a comma list containing jit, or all).
inline bool log_enabled() {
  static const bool on = settings::in_list("KILN_LOG", "jit");
  return on;
}
inline void log(const std::string& line) {
  if (log_enabled()) std::fprintf(stderr, "kiln[jit] %s\n", line.c_str());
}

inline double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// KILN_DUMP_KERNELS=dir: each generated source is written there once, named by its hash;
// a dump that was asked for and cannot be written is an error, not a silent gap.
inline void dump_kernel(std::string_view source, std::string_view extension) {
  const auto dir = settings::text("KILN_DUMP_KERNELS");
  if (!dir) return;
  std::error_code ec;
  std::filesystem::create_directories(*dir, ec);
  const std::string path = *dir + "/" + hash_of(source).hex() + "." + std::string(extension);
  std::ofstream f(path, std::ios::binary);
  f.write(source.data(), static_cast<std::streamsize>(source.size()));
  if (!f)
    throw error("KILN_DUMP_KERNELS", "cannot write a kernel dump",
                path + (ec ? ": " + ec.message() : std::string()));
}

template <class V>
class single_flight {
public:
  // The value for `key`, made by make() once; concurrent callers wait for that one call.
  // A failure reaches every waiter, and the next call tries again.
  template <class Make>
  V get(const std::string& key, Make&& make) {
    std::promise<V> promise;
    std::shared_future<V> f;
    bool owner = false;
    {
      std::lock_guard lock(mutex_);
      auto it = map_.find(key);
      if (it != map_.end()) {
        f = it->second;
      } else {
        f = promise.get_future().share();
        map_.emplace(key, f);
        owner = true;
      }
    }
    if (!owner) return f.get();
    try {
      promise.set_value(make());
    } catch (...) {
      promise.set_exception(std::current_exception());
      std::lock_guard lock(mutex_);
      map_.erase(key);
    }
    return f.get();
  }
  void clear() {
    std::lock_guard lock(mutex_);
    map_.clear();
  }
  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return map_.size();
  }

private:
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::shared_future<V>> map_;
};

} // namespace kiln::jit
