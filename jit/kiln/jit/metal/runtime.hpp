#pragma once
// What the Metal backend (backend.hpp) asks of a Metal device, as one small interface: the
// Metal framework on Apple platforms implements it (an MTLDevice, its command queue as the
// in-order work queue, MTLBuffers, libraries from source with safe math, compute pipeline
// states), and so can a stand-in (the test suite's msl-on-cpu runs generated MSL on host
// threads through it). Above it, `context` keeps a caching arena of buffers
// (backend/caching_arena.hpp, as the CUDA context's over cuMemAlloc).
#include "kiln/error.hpp"
#include "kiln/jit/backend/caching_arena.hpp"

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace kiln::jit::metal {

struct device_properties {
  std::string name;                 // "Apple M2 Pro"
  std::string identity;             // what tells this device apart in caches: name, registry id, OS
  std::string compiler;             // the MSL compiler's version ("MSL 3.1, macOS 14.4")
  std::uint32_t vendor_id = 0x106b; // Apple
  int max_group = 1024;             // threads per threadgroup
  int simd_width = 32;              // threads per SIMD-group
  std::size_t threadgroup_bytes = 32768;
  std::int64_t preferred_groups = 256; // threadgroups that fill the device
  bool timer = false;                  // GPU timestamps between commands
};

class runtime {
public:
  virtual ~runtime() = default;
  virtual const device_properties& properties() const = 0;
  // Buffers: a handle of at least `bytes` (nullptr when out of memory); copies into and out
  // of one are ordered with the queued kernels (a read waits for them).
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void release(void* buffer) noexcept = 0;
  virtual void write(void* buffer, std::size_t off, const void* src, std::size_t n) = 0;
  virtual void read(void* buffer, std::size_t off, void* dst, std::size_t n) = 0;
  virtual void copy(void* src, std::size_t src_off, void* dst, std::size_t dst_off,
                    std::size_t n) = 0;
  virtual void synchronize() = 0;
  // MSL source -> the binary the disk cache keeps, with the pipeline of its kernel `entry`
  // made; a compile error is a kiln::error with the compiler's log.
  virtual std::vector<std::byte> compile(const std::string& source, const char* entry) = 0;
  // The pipeline of `entry` in a binary; nullptr when the binary is not usable here (one
  // from the disk cache is then compiled again).
  virtual void* pipeline(std::span<const std::byte> binary, const char* entry) = 0;
  // Queues a dispatch of groups_x x groups_y threadgroups of `group` threads: buffer k at
  // [[buffer(k)]], the parameter bytes at [[buffer(buffers.size())]].
  virtual void dispatch(void* pipeline, std::span<void* const> buffers,
                        std::span<const std::byte> params, unsigned groups_x, unsigned groups_y,
                        unsigned group) = 0;
  virtual void timer_begin() {}
  virtual double timer_end_ns() { return -1; }
};

using block = caching_arena<void*>::block;

// The device's memory and queue as device_backend uses them: a caching arena over the
// runtime's buffers.
class context {
public:
  explicit context(std::shared_ptr<runtime> rt) : rt_(std::move(rt)) {}
  context(const context&) = delete;
  context& operator=(const context&) = delete;

  runtime& rt() const { return *rt_; }

  block allocate(std::size_t bytes) {
    return arena_.take(
        bytes, [&](void*& b, std::size_t n) { return (b = rt_->allocate(n)) != nullptr; },
        [&](void* b) { rt_->release(b); },
        [&](std::size_t n) {
          throw error("metal", "out of device memory",
                      std::to_string(n) + " bytes on " + rt_->properties().name);
        });
  }
  void release(const block& b) noexcept { arena_.give_back(b); }
  void empty_cache() {
    rt_->synchronize();
    arena_.release_cached([&](void* b) { rt_->release(b); });
  }
  using memory_stats = caching_arena<void*>::memory_stats;
  memory_stats stats() const { return arena_.stats(); }
  void write(const block& b, std::size_t off, const void* src, std::size_t n) {
    rt_->write(b.handle, off, src, n);
  }
  void read(const block& b, std::size_t off, void* dst, std::size_t n) {
    rt_->read(b.handle, off, dst, n);
  }
  void copy(const block& s, std::size_t so, const block& d, std::size_t doff, std::size_t n) {
    rt_->copy(s.handle, so, d.handle, doff, n);
  }
  void synchronize() const { rt_->synchronize(); }

private:
  std::shared_ptr<runtime> rt_;
  caching_arena<void*> arena_;
};

} // namespace kiln::jit::metal
