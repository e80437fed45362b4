#pragma once
// storage: one block of element memory on a device, shared by every tensor handle and
// view over it. Host blocks are 64-byte aligned so SIMD loads of a fresh tensor align.
#include "kiln/device.hpp"
#include "kiln/dtype.hpp"

#include <cstdlib>
#include <memory>
#include <new>

namespace kiln {

class storage {
public:
  // Owned host memory, uninitialized.
  storage(kiln::dtype dt, std::int64_t count) : dtype_(dt), count_(count) {
    const std::size_t bytes = (static_cast<std::size_t>(count) * size_of(dt) + 63) / 64 * 64;
    data_ = bytes ? std::aligned_alloc(64, bytes) : nullptr;
    if (bytes && !data_)
      throw error("alloc", "out of host memory", std::to_string(bytes) + " bytes");
    owned_ = true;
  }
  // Borrowed memory (zero-copy views of other libraries' arrays): not freed here.
  storage(kiln::dtype dt, std::int64_t count, void* external) noexcept
      : data_(external), dtype_(dt), count_(count) {}
  storage(const storage&) = delete;
  storage& operator=(const storage&) = delete;
  ~storage() {
    if (owned_) std::free(data_);
  }

  void* data() const noexcept { return data_; }
  kiln::dtype dtype() const noexcept { return dtype_; }
  std::int64_t count() const noexcept { return count_; }
  const kiln::device& device() const noexcept { return device_; }
  bool owned() const noexcept { return owned_; }

private:
  void* data_ = nullptr;
  kiln::dtype dtype_;
  std::int64_t count_;
  kiln::device device_{};
  bool owned_ = false;
};

} // namespace kiln
