#pragma once
// storage: one block of element memory on a device, shared by every tensor handle and
// view over it. Host blocks are 64-byte aligned so SIMD loads of a fresh tensor align.
// Device blocks are opaque handles of the device's backend: data() is null for them.
#include "kiln/device.hpp"
#include "kiln/dtype.hpp"
#include "kiln/linkage.hpp"

#include <cstdlib>
#include <memory>
#include <new>

namespace kiln {

namespace detail {
// Set on a thread while a tuner checks a configuration's output (kiln::tune): storage made
// then starts as 0xFF bytes (NaN; -1), so an element a configuration fails to write differs
// from the default's instead of showing what a recycled block held before.
inline bool& poison_new_storage() {
  thread_local bool on = false;
  return on;
}
// Sets it for a scope (and clears it however the scope ends).
struct poison_scope {
  poison_scope() { poison_new_storage() = true; }
  ~poison_scope() { poison_new_storage() = false; }
  poison_scope(const poison_scope&) = delete;
  poison_scope& operator=(const poison_scope&) = delete;
};
} // namespace detail

class storage {
public:
  // Owned memory on `dev` (host by default), uninitialized.
  KILN_CORE_INLINE storage(kiln::dtype dt, std::int64_t count, const kiln::device& dev = {});
  // Borrowed memory (zero-copy views of other libraries' arrays): not freed here.
  storage(kiln::dtype dt, std::int64_t count, void* external) noexcept
      : data_(external), dtype_(dt), count_(count) {}
  // A device block lent by another storage (a captured plan's argument slot on a device,
  // rebind() pointed at the caller's block at each call): never released here.
  storage(kiln::dtype dt, std::int64_t count, const kiln::device& dev,
          std::shared_ptr<kiln::backend> b, void* handle) noexcept
      : dtype_(dt), count_(count), device_(dev), backend_(std::move(b)), handle_(handle),
        lent_(true) {}
  storage(const storage&) = delete;
  storage& operator=(const storage&) = delete;
  ~storage() {
    if (owned_) std::free(data_);
    if (handle_ && !lent_) backend_->release(handle_);
  }

  void* data() const noexcept { return data_; }
  kiln::dtype dtype() const noexcept { return dtype_; }
  std::int64_t count() const noexcept { return count_; }
  const kiln::device& device() const noexcept { return device_; }
  bool owned() const noexcept { return owned_; }
  bool on_host() const noexcept { return device_.is_host(); }
  // Device storage: its backend and the backend's handle of the memory.
  kiln::backend* backend() const noexcept { return backend_.get(); }
  const std::shared_ptr<kiln::backend>& shared_backend() const noexcept { return backend_; }
  void* handle() const noexcept { return handle_; }
  // A borrowed host block or a lent device block pointed at other memory (its address, or
  // its backend's handle): a captured plan's argument slot, bound to the caller's tensor at
  // each call (plan/recording.hpp). Owned blocks never are.
  void rebind(void* memory, std::int64_t count) noexcept {
    (device_.is_host() ? data_ : handle_) = memory;
    count_ = count;
  }

  // An owned host block given up for memory that outlives this storage (a captured plan's
  // arena, shared by temporaries whose uses never meet): the block is freed.
  void share_memory(void* p) noexcept {
    if (owned_) std::free(data_);
    data_ = p;
    owned_ = false;
  }

private:
  void* data_ = nullptr;
  kiln::dtype dtype_;
  std::int64_t count_;
  kiln::device device_{};
  bool owned_ = false;
  std::shared_ptr<kiln::backend> backend_;
  void* handle_ = nullptr;
  bool lent_ = false;
};

} // namespace kiln

#if KILN_CORE_DEFINITIONS
#include "kiln/storage_impl.hpp"
#endif
