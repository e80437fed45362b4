#pragma once
// Host-visible memory that lives for one submission: parameter buffers of kernels, and
// staging copies (host -> device and back) where device memory is not mapped. Space is cut
// from the current buffer with a bump pointer; the buffers a submission used go with it and
// come back when its fence signals, so the steady state allocates nothing.
#include "kiln/jit/vulkan/buffers.hpp"

#include <memory>
#include <string>
#include <vector>

namespace kiln::jit::vk {

struct upload_slice {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceSize offset = 0;
  std::byte* data = nullptr; // mapped
};

class upload_pool {
public:
  static constexpr VkDeviceSize default_buffer_bytes = VkDeviceSize{4} << 20;

  upload_pool(const device_functions& fn, VkDevice device, std::uint32_t memory_type,
              VkDeviceSize alignment, std::string device_name)
      : fn_(fn), device_(device), memory_type_(memory_type), alignment_(alignment),
        device_name_(std::move(device_name)) {}
  ~upload_pool() { destroy_all(); }
  upload_pool(const upload_pool&) = delete;
  upload_pool& operator=(const upload_pool&) = delete;

  struct buffer {
    chunk_memory memory;
    VkDeviceSize size = 0, used = 0;
  };

  // `bytes` of host-visible memory at an offset aligned for storage buffers, valid until
  // the submission now being recorded has completed.
  upload_slice take(VkDeviceSize bytes) {
    bytes = std::max<VkDeviceSize>(bytes, 4);
    if (!in_use_.empty()) {
      buffer& b = *in_use_.back();
      const VkDeviceSize at = (b.used + alignment_ - 1) / alignment_ * alignment_;
      if (at + bytes <= b.size) return cut(b, at, bytes);
    }
    buffer* b = nullptr;
    for (std::size_t i = 0; i < spare_.size(); ++i)
      if (spare_[i]->size >= bytes) {
        b = spare_[i];
        spare_[i] = spare_.back();
        spare_.pop_back();
        break;
      }
    if (!b) b = create(std::max(bytes, default_buffer_bytes));
    in_use_.push_back(b);
    return cut(*b, 0, bytes);
  }

  // Bytes taken for the submission being recorded.
  VkDeviceSize pending_bytes() const { return pending_; }

  // At submit: the buffers in use move to `to` (an empty list, whose capacity is kept).
  void hand_over(std::vector<buffer*>& to) {
    to.swap(in_use_);
    pending_ = 0;
  }
  // When that submission has completed: its buffers are free again.
  void recycle(std::vector<buffer*>& from) {
    for (buffer* b : from) {
      b->used = 0;
      spare_.push_back(b);
    }
    from.clear();
  }
  // Frees the buffers nobody uses (empty_cache).
  void release_spare() noexcept {
    for (buffer* b : spare_)
      destroy(b);
    spare_.clear();
  }
  // Every buffer, in use or not (device shutdown, after the device is idle). Lists that
  // submissions hold are stale afterwards: the caller drops them without recycle().
  void destroy_all() noexcept {
    for (auto& b : all_)
      free_buffer(fn_, device_, b->memory);
    all_.clear();
    spare_.clear();
    in_use_.clear();
    pending_ = 0;
  }
  VkDeviceSize spare_bytes() const {
    VkDeviceSize n = 0;
    for (const buffer* b : spare_)
      n += b->size;
    return n;
  }

private:
  upload_slice cut(buffer& b, VkDeviceSize at, VkDeviceSize bytes) {
    b.used = at + bytes;
    pending_ += bytes;
    return {b.memory.buffer, at, b.memory.mapped + at};
  }
  buffer* create(VkDeviceSize bytes) {
    auto b = std::make_unique<buffer>();
    b->size = bytes;
    const VkResult r =
        make_buffer(fn_, device_, bytes, memory_type_, true, b->memory, device_name_);
    if (r != VK_SUCCESS)
      throw error("alloc", "out of host-visible memory for an upload buffer",
                  std::to_string(bytes) + " bytes, device " + device_name_);
    all_.push_back(std::move(b));
    return all_.back().get();
  }
  void destroy(buffer* b) noexcept {
    free_buffer(fn_, device_, b->memory);
    for (auto& a : all_)
      if (a.get() == b) {
        a = std::move(all_.back());
        all_.pop_back();
        break;
      }
  }

  const device_functions& fn_;
  VkDevice device_;
  std::uint32_t memory_type_;
  VkDeviceSize alignment_;
  std::string device_name_;
  std::vector<buffer*> in_use_; // by the submission being recorded
  std::vector<buffer*> spare_;
  std::vector<std::unique_ptr<buffer>> all_; // every buffer, wherever it is (in flight too)
  VkDeviceSize pending_ = 0;
};

} // namespace kiln::jit::vk
