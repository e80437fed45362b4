#pragma once
// The caching arena ("BFC-lite") that hands out device memory: large chunks, one VkBuffer
// and one VkDeviceMemory each, cut into blocks aligned to max(minStorageBufferOffsetAlignment,
// 256). A released block goes back to a best-fit index of free regions after merging with
// free neighbours, and later requests are cut from there; chunks are returned to the driver
// only by release_empty_chunks(). The arena does bookkeeping only: chunks come from a
// chunk_source (the context), which is where Vulkan memory is made.
#include "kiln/jit/vulkan/functions.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace kiln::jit::vk {

class arena;

namespace detail {
struct chunk;
// A run of bytes in a chunk, free or held by one live block; neighbours are linked by
// address. Nodes are pooled by their arena for its whole life, so a stale block's pointer
// still points at a node (whose id no longer matches) rather than at freed memory.
struct region {
  chunk* owner = nullptr;
  VkDeviceSize offset = 0, size = 0;
  region* prev = nullptr;
  region* next = nullptr;
  std::uint64_t id = 0;    // the live block's id, 0 while free
  std::uint64_t epoch = 0; // the last queue epoch whose work may touch these bytes
  bool free = true;
};
struct chunk {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  std::byte* mapped = nullptr; // persistently mapped, or null (staging copies)
  VkDeviceSize size = 0;
  std::size_t live = 0;     // live blocks in this chunk
  std::uint64_t serial = 0; // creation order: a stable tie-break for the free index
  const arena* home = nullptr;
  region* first = nullptr;
};
inline std::uint64_t next_block_id() {
  static std::atomic<std::uint64_t> id{0}; // unique across contexts
  return id.fetch_add(1, std::memory_order_relaxed) + 1;
}
} // namespace detail

// A piece of device memory: bind it at (buffer, offset) with range `bytes`. A value; copies
// name the same memory. Valid from allocate() until release().
struct block {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceSize offset = 0;        // in buffer
  VkDeviceSize bytes = 0;         // usable size: the request rounded up to the alignment (> 0)
  std::size_t requested = 0;      // what was asked for (may be 0)
  detail::region* slot = nullptr; // opaque: the arena's record of this block
  std::uint64_t id = 0;           // opaque: matches slot->id while the block is live
};

struct memory_stats {
  std::uint64_t in_use = 0;   // bytes of live blocks (rounded sizes)
  std::uint64_t reserved = 0; // bytes of chunks held from the driver
  std::uint64_t peak = 0;     // the most in_use has been
};

struct chunk_memory {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  std::byte* mapped = nullptr;
};

// Where chunks come from. create() returns VK_ERROR_OUT_OF_DEVICE_MEMORY (or _HOST_) when
// the memory is not there, so the arena can fall back; other failures throw.
class chunk_source {
public:
  virtual VkResult create_chunk(VkDeviceSize bytes, chunk_memory& out) = 0;
  virtual void destroy_chunk(const chunk_memory& memory) noexcept = 0;

protected:
  ~chunk_source() = default;
};

class arena {
public:
  arena(chunk_source& source, VkDeviceSize alignment, VkDeviceSize chunk_bytes)
      : source_(source), alignment_(alignment),
        chunk_bytes_(std::max(round(chunk_bytes), alignment)) {}
  ~arena() { destroy_all(); }
  arena(const arena&) = delete;
  arena& operator=(const arena&) = delete;

  VkDeviceSize alignment() const { return alignment_; }
  VkDeviceSize chunk_bytes() const { return chunk_bytes_; }
  // The size a request occupies: rounded up to the alignment, at least one unit.
  VkDeviceSize round(std::uint64_t bytes) const {
    const VkDeviceSize n = std::max<std::uint64_t>(bytes, 1);
    return (n + alignment_ - 1) / alignment_ * alignment_;
  }

  // A block of at least `bytes`, cut from the best-fitting free region or from a new chunk
  // (chunk_bytes, or the block's own size if larger or if a full chunk cannot be had).
  // Nothing when the driver is out of memory for the new chunk.
  std::optional<block> allocate(std::size_t bytes) {
    const VkDeviceSize size = round(bytes);
    detail::region* r = best_fit(size);
    if (!r) {
      detail::chunk* c = new_chunk(std::max(size, chunk_bytes_));
      if (!c && size < chunk_bytes_) c = new_chunk(size);
      if (!c) return std::nullopt;
      r = c->first;
      free_.erase(r);
    }
    if (r->size - size >= alignment_) { // the rest stays free
      detail::region* tail = node();
      *tail =
          detail::region{r->owner, r->offset + size, r->size - size, r, r->next, 0, r->epoch, true};
      if (r->next) r->next->prev = tail;
      r->next = tail;
      r->size = size;
      free_.insert(tail);
    }
    r->free = false;
    r->id = detail::next_block_id();
    ++r->owner->live;
    stats_.in_use += r->size;
    stats_.peak = std::max(stats_.peak, stats_.in_use);
    return block{r->owner->buffer, r->offset, r->size, bytes, r, r->id};
  }

  // The arena's record of a live block of this arena, or null (released, foreign, empty).
  detail::region* live(const block& b) const {
    detail::region* r = b.slot;
    if (!r || b.id == 0 || r->id != b.id || r->owner->home != this) return nullptr;
    return r;
  }
  std::byte* mapped(const detail::region* r) const {
    return r->owner->mapped ? r->owner->mapped + r->offset : nullptr;
  }

  // Gives a block back; its bytes merge with free neighbours. kiln::error for a block that
  // is not live here (released twice, or from another device).
  void release(const block& b) {
    detail::region* r = live(b);
    if (!r)
      throw error("release", "the block is not live on this device",
                  "released twice, never allocated here, or from another device (" +
                      std::to_string(b.bytes) + " bytes at offset " + std::to_string(b.offset) +
                      ")");
    r->free = true;
    r->id = 0;
    --r->owner->live;
    stats_.in_use -= r->size;
    if (r->prev && r->prev->free) {
      detail::region* p = r->prev;
      free_.erase(p);
      p->size += r->size;
      p->epoch = std::max(p->epoch, r->epoch);
      unlink(r);
      r = p;
    }
    if (r->next && r->next->free) {
      detail::region* n = r->next;
      free_.erase(n);
      r->size += n->size;
      r->epoch = std::max(r->epoch, n->epoch);
      unlink(n);
    }
    free_.insert(r);
  }

  // Returns every chunk without a live block to the driver; the caller has made sure the
  // device no longer uses them. Returns how many bytes were freed.
  std::uint64_t release_empty_chunks() {
    std::uint64_t freed = 0;
    for (auto it = chunks_.begin(); it != chunks_.end();) {
      detail::chunk& c = **it;
      if (c.live != 0) {
        ++it;
        continue;
      }
      free_.erase(c.first); // merged: one free region spans an empty chunk
      recycle(c.first);
      freed += c.size;
      stats_.reserved -= c.size;
      source_.destroy_chunk({c.buffer, c.memory, c.mapped});
      it = chunks_.erase(it);
    }
    return freed;
  }

  const memory_stats& stats() const { return stats_; }
  std::size_t chunk_count() const { return chunks_.size(); }
  // Which chunk a live block is in (0, 1, ... in creation order): for tests and logs.
  std::uint64_t chunk_serial(const block& b) const {
    const detail::region* r = live(b);
    return r ? r->owner->serial : UINT64_MAX;
  }

  // Every chunk back to the driver, live blocks or not (device shutdown).
  void destroy_all() noexcept {
    for (auto& c : chunks_)
      source_.destroy_chunk({c->buffer, c->memory, c->mapped});
    chunks_.clear();
    free_.clear();
    stats_.in_use = stats_.reserved = 0;
    for (auto& n : nodes_) // stale blocks then find no live record
      n.id = 0;
  }

private:
  // Free regions by size (best fit), then by chunk and offset (lowest address first).
  struct by_size {
    bool operator()(const detail::region* a, const detail::region* b) const {
      if (a->size != b->size) return a->size < b->size;
      if (a->owner->serial != b->owner->serial) return a->owner->serial < b->owner->serial;
      return a->offset < b->offset;
    }
  };

  detail::region* best_fit(VkDeviceSize size) {
    detail::region key;
    detail::chunk zero;
    key.owner = &zero;
    key.size = size;
    auto it = free_.lower_bound(&key);
    if (it == free_.end()) return nullptr;
    detail::region* r = *it;
    free_.erase(it);
    return r;
  }

  detail::chunk* new_chunk(VkDeviceSize size) {
    chunk_memory m;
    const VkResult r = source_.create_chunk(size, m);
    if (out_of_memory(r)) return nullptr;
    check(r, "vkAllocateMemory", "");
    auto c = std::make_unique<detail::chunk>();
    c->buffer = m.buffer;
    c->memory = m.memory;
    c->mapped = m.mapped;
    c->size = size;
    c->serial = next_serial_++;
    c->home = this;
    c->first = node();
    *c->first = detail::region{c.get(), 0, size, nullptr, nullptr, 0, 0, true};
    free_.insert(c->first);
    stats_.reserved += size;
    chunks_.push_back(std::move(c));
    return chunks_.back().get();
  }

  detail::region* node() {
    if (spare_.empty()) return &nodes_.emplace_back();
    detail::region* n = spare_.back();
    spare_.pop_back();
    return n;
  }
  void recycle(detail::region* n) {
    *n = detail::region{};
    spare_.push_back(n);
  }
  void unlink(detail::region* n) {
    if (n->prev) n->prev->next = n->next;
    if (n->next) n->next->prev = n->prev;
    recycle(n);
  }

  chunk_source& source_;
  VkDeviceSize alignment_;
  VkDeviceSize chunk_bytes_;
  std::vector<std::unique_ptr<detail::chunk>> chunks_;
  std::set<detail::region*, by_size> free_;
  std::deque<detail::region> nodes_; // stable addresses
  std::vector<detail::region*> spare_;
  std::uint64_t next_serial_ = 0;
  memory_stats stats_;
};

} // namespace kiln::jit::vk
