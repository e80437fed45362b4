#pragma once
// A caching arena over a device's buffers (CUDA's cuMemAlloc, Metal's buffers): a freed
// block is kept by size and handed out again for a request it fits within twice over, sizes
// rounded so that they repeat (small blocks to 512 B, large ones to 2 MiB). Safe on one
// in-order queue: later work runs after the work that used a block. Counts what is in use,
// reserved from the device and the peak (kiln::memory_stats).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

namespace kiln::jit {

template <class Handle>
class caching_arena {
public:
  struct block {
    Handle handle{};
    std::size_t bytes = 0; // as reserved (rounded up)
  };
  struct memory_stats {
    std::uint64_t in_use, reserved, peak;
  };

  static std::size_t round_up(std::size_t n) {
    if (n == 0) n = 1;
    const std::size_t q = n < (std::size_t{1} << 20) ? 512 : (std::size_t{2} << 20);
    return (n + q - 1) / q * q;
  }

  // A block of at least `bytes`: a cached one, else `alloc(size)` -> bool (false: out of
  // memory, after which the cache is given back through `free(handle)` and alloc tried once
  // more). `fail()` is called (and must throw) when that fails too.
  template <class Alloc, class Free, class Fail>
  block take(std::size_t bytes, Alloc&& alloc, Free&& free, Fail&& fail) {
    const std::size_t size = round_up(bytes);
    std::lock_guard lock(mutex_);
    block b{Handle{}, size};
    if (auto it = free_.lower_bound(size); it != free_.end() && it->first <= 2 * size) {
      b = {it->second, it->first};
      free_.erase(it);
    } else {
      bool ok = alloc(b.handle, size);
      if (!ok && !free_.empty()) {
        release_cached_locked(free);
        ok = alloc(b.handle, size);
      }
      if (!ok) fail(size);
      reserved_ += size;
    }
    count_in_locked(b.bytes);
    return b;
  }
  // Counts a block the device allocated itself (CUDA's stream-ordered pools), never cached.
  void count_in(std::size_t bytes) {
    std::lock_guard lock(mutex_);
    count_in_locked(bytes);
  }
  void count_out(std::size_t bytes) {
    std::lock_guard lock(mutex_);
    in_use_ -= bytes;
  }
  void give_back(const block& b) noexcept {
    std::lock_guard lock(mutex_);
    in_use_ -= b.bytes;
    free_.emplace(b.bytes, b.handle);
  }
  template <class Free>
  void release_cached(Free&& free) {
    std::lock_guard lock(mutex_);
    release_cached_locked(free);
  }
  memory_stats stats(bool pooled = false) const {
    std::lock_guard lock(mutex_);
    return {in_use_, pooled ? in_use_ : reserved_, peak_};
  }

private:
  void count_in_locked(std::size_t bytes) {
    in_use_ += bytes;
    peak_ = std::max(peak_, in_use_);
  }
  template <class Free>
  void release_cached_locked(Free& free) {
    for (const auto& [bytes, handle] : free_) {
      free(handle);
      reserved_ -= bytes;
    }
    free_.clear();
  }
  mutable std::mutex mutex_;
  std::multimap<std::size_t, Handle> free_;
  std::uint64_t in_use_ = 0, reserved_ = 0, peak_ = 0;
};

} // namespace kiln::jit
