#pragma once
// The in-order, asynchronous work queue of a context. Commands are recorded into the
// current command buffer, each after a memory barrier that orders it behind everything
// submitted before (compute and transfer, both ways), so consecutive commands behave as on
// an in-order stream. The buffer is submitted when the host needs a result, or every
// `batch` commands so the device keeps busy. Each submission is an epoch (1, 2, ...); its
// fence, command buffer, descriptor pools and upload buffers are recycled when it completes.
// The host waits only in wait_for()/wait_all() (and when `max_in_flight` submissions are
// queued: back-pressure).
#include "kiln/jit/vulkan/pipeline.hpp"
#include "kiln/jit/vulkan/upload_pool.hpp"

#include <atomic>
#include <vector>

namespace kiln::jit::vk {

class command_queue {
public:
  command_queue(const device_functions& fn, VkDevice device, VkQueue queue, std::uint32_t family,
                upload_pool& uploads, detail::device_link& link, std::uint32_t batch,
                std::uint32_t max_in_flight)
      : fn_(fn), device_(device), queue_(queue), uploads_(uploads), link_(link),
        batch_(std::max<std::uint32_t>(batch, 1)),
        slots_(std::max<std::uint32_t>(max_in_flight, 2)) {
    auto pc = make<VkCommandPoolCreateInfo>(VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO);
    pc.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pc.queueFamilyIndex = family;
    check(fn_.vkCreateCommandPool(device_, &pc, nullptr, &pool_), "vkCreateCommandPool",
          link_.name);
  }
  ~command_queue() { destroy(); }
  // Destroys every Vulkan object of the queue; the device must be idle (the context waits
  // first). The epochs stay readable.
  void destroy() noexcept {
    if (!pool_) return;
    if (recording_) fn_.vkEndCommandBuffer(slots_[tail()].cb);
    recording_ = false;
    for (auto& s : slots_) {
      if (s.fence) fn_.vkDestroyFence(device_, s.fence, nullptr);
      for (auto& p : s.pools)
        fn_.vkDestroyDescriptorPool(device_, p.handle, nullptr);
      s = submission{};
    }
    for (auto& p : spare_pools_)
      fn_.vkDestroyDescriptorPool(device_, p.handle, nullptr);
    spare_pools_.clear();
    if (current_pool_.handle) fn_.vkDestroyDescriptorPool(device_, current_pool_.handle, nullptr);
    current_pool_ = {};
    fn_.vkDestroyCommandPool(device_, pool_, nullptr); // frees the command buffers
    pool_ = VK_NULL_HANDLE;
    in_flight_ = 0;
  }
  command_queue(const command_queue&) = delete;
  command_queue& operator=(const command_queue&) = delete;

  // The command buffer to record the next command into, with the ordering barrier already
  // in it. Call end_command() after recording the command.
  VkCommandBuffer begin_command() {
    VkCommandBuffer cb = recording();
    barrier(cb);
    return cb;
  }
  void end_command() {
    if (++recorded_ >= batch_) submit();
  }
  // Orders what follows in `cb` after everything before it (recorded or submitted).
  void barrier(VkCommandBuffer cb) {
    auto mb = make<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                       VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    constexpr VkPipelineStageFlags stages =
        VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    fn_.vkCmdPipelineBarrier(cb, stages, stages, 0, 1, &mb, 0, nullptr, 0, nullptr);
  }

  // The epoch of the work being recorded now (submitted_epoch() + 1).
  std::uint64_t recording_epoch() const { return submitted_.load(std::memory_order_relaxed) + 1; }
  std::uint64_t submitted() const { return submitted_.load(std::memory_order_relaxed); }
  std::uint64_t completed() const { return completed_.load(std::memory_order_relaxed); }
  std::uint64_t host_waits() const { return host_waits_.load(std::memory_order_relaxed); }
  std::uint32_t recorded() const { return recorded_; }

  // The pipeline last bound in the command buffer being recorded (rebinding is skipped).
  VkPipeline& bound_pipeline() { return bound_; }

  // Submits what is recorded (nothing if nothing is) without waiting for it.
  void submit() {
    retire(false, 0);
    if (!recording_) return;
    submission& s = slots_[tail()];
    // Makes the device's writes visible to the host once the fence has signalled.
    auto mb = make<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    fn_.vkCmdPipelineBarrier(s.cb,
                             VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                             VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
    recording_ = false;
    recorded_ = 0;
    bound_ = VK_NULL_HANDLE;
    check(fn_.vkEndCommandBuffer(s.cb), "vkEndCommandBuffer", link_.name);
    uploads_.hand_over(s.uploads);
    if (current_pool_.handle) {
      s.pools.push_back(current_pool_);
      current_pool_ = {};
    }
    auto si = make<VkSubmitInfo>(VK_STRUCTURE_TYPE_SUBMIT_INFO);
    si.commandBufferCount = 1;
    si.pCommandBuffers = &s.cb;
    const VkResult r = fn_.vkQueueSubmit(queue_, 1, &si, s.fence);
    if (r != VK_SUCCESS) { // the work is lost: drop it so the queue stays usable
      fn_.vkResetCommandBuffer(s.cb, 0);
      uploads_.recycle(s.uploads);
      recycle_pools(s);
      check(r, "vkQueueSubmit", link_.name);
    }
    s.epoch = submitted_.load(std::memory_order_relaxed) + 1;
    submitted_.store(s.epoch, std::memory_order_relaxed);
    ++in_flight_;
  }

  // Returns once the work of `epoch` (and all before it) has completed; submits first if
  // that work is still being recorded.
  void wait_for(std::uint64_t epoch) {
    if (epoch > submitted()) submit();
    retire(true, std::min(epoch, submitted()));
  }
  void wait_all() {
    submit();
    retire(true, submitted());
  }

  // A descriptor set for a layout of `descriptors` storage buffers, from a pool that is
  // recycled when the recording submission completes (devices without push descriptors).
  VkDescriptorSet allocate_set(VkDescriptorSetLayout layout, std::uint32_t descriptors) {
    descriptors = std::max<std::uint32_t>(descriptors, 1);
    if (!current_pool_.handle || current_pool_.sets_left == 0 ||
        current_pool_.descriptors_left < descriptors) {
      if (current_pool_.handle) slots_[tail()].pools.push_back(current_pool_);
      current_pool_ = take_pool(descriptors);
    }
    auto ai = make<VkDescriptorSetAllocateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO);
    ai.descriptorPool = current_pool_.handle;
    ai.descriptorSetCount = 1;
    ai.pSetLayouts = &layout;
    VkDescriptorSet set = VK_NULL_HANDLE;
    check(fn_.vkAllocateDescriptorSets(device_, &ai, &set), "vkAllocateDescriptorSets", link_.name);
    --current_pool_.sets_left;
    current_pool_.descriptors_left -= descriptors;
    return set;
  }

private:
  struct pool {
    VkDescriptorPool handle = VK_NULL_HANDLE;
    std::uint32_t sets = 0, descriptors = 0;
    std::uint32_t sets_left = 0, descriptors_left = 0;
  };
  struct submission {
    VkCommandBuffer cb = VK_NULL_HANDLE;
    VkFence fence = VK_NULL_HANDLE;
    std::uint64_t epoch = 0;
    std::vector<upload_pool::buffer*> uploads; // upload buffers its commands read or write
    std::vector<pool> pools;                   // descriptor pools its sets came from
  };

  std::size_t tail() const { return (head_ + in_flight_) % slots_.size(); }

  VkCommandBuffer recording() {
    if (recording_) return slots_[tail()].cb;
    if (in_flight_ == slots_.size()) retire(true, slots_[head_].epoch); // back-pressure
    submission& s = slots_[tail()];
    if (!s.cb) {
      auto ai = make<VkCommandBufferAllocateInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO);
      ai.commandPool = pool_;
      ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
      ai.commandBufferCount = 1;
      check(fn_.vkAllocateCommandBuffers(device_, &ai, &s.cb), "vkAllocateCommandBuffers",
            link_.name);
      auto fi = make<VkFenceCreateInfo>(VK_STRUCTURE_TYPE_FENCE_CREATE_INFO);
      check(fn_.vkCreateFence(device_, &fi, nullptr, &s.fence), "vkCreateFence", link_.name);
    }
    auto bi = make<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    check(fn_.vkBeginCommandBuffer(s.cb, &bi), "vkBeginCommandBuffer", link_.name);
    recording_ = true;
    bound_ = VK_NULL_HANDLE;
    return s.cb;
  }

  // Recycles completed submissions, oldest first; with `wait`, blocks until `until` is done.
  void retire(bool wait, std::uint64_t until) {
    while (in_flight_ > 0) {
      submission& s = slots_[head_];
      const char* call = "vkGetFenceStatus";
      VkResult r = fn_.vkGetFenceStatus(device_, s.fence);
      if (r == VK_NOT_READY) {
        if (!wait || s.epoch > until) break;
        host_waits_.fetch_add(1, std::memory_order_relaxed);
        call = "vkWaitForFences";
        r = fn_.vkWaitForFences(device_, 1, &s.fence, VK_TRUE, UINT64_MAX);
      }
      check(r, call, link_.name);
      check(fn_.vkResetFences(device_, 1, &s.fence), "vkResetFences", link_.name);
      check(fn_.vkResetCommandBuffer(s.cb, 0), "vkResetCommandBuffer", link_.name);
      uploads_.recycle(s.uploads);
      recycle_pools(s);
      head_ = (head_ + 1) % slots_.size();
      --in_flight_;
      completed_.store(s.epoch, std::memory_order_relaxed);
      link_.completed.store(s.epoch);
      if (link_.graveyard_size.load() > 0) { // pipelines dropped while this work used them
        std::lock_guard lock(link_.mutex);
        link_.collect(s.epoch);
      }
    }
  }

  void recycle_pools(submission& s) {
    for (auto& p : s.pools) {
      check(fn_.vkResetDescriptorPool(device_, p.handle, 0), "vkResetDescriptorPool", link_.name);
      p.sets_left = p.sets;
      p.descriptors_left = p.descriptors;
      spare_pools_.push_back(p);
    }
    s.pools.clear();
  }

  pool take_pool(std::uint32_t descriptors) {
    for (std::size_t i = 0; i < spare_pools_.size(); ++i)
      if (spare_pools_[i].descriptors >= descriptors) {
        pool p = spare_pools_[i];
        spare_pools_[i] = spare_pools_.back();
        spare_pools_.pop_back();
        return p;
      }
    pool p;
    p.sets = std::max<std::uint32_t>(batch_, 64);
    p.descriptors = std::max(p.sets * 8, descriptors);
    const VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, p.descriptors};
    auto ci = make<VkDescriptorPoolCreateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO);
    ci.maxSets = p.sets;
    ci.poolSizeCount = 1;
    ci.pPoolSizes = &size;
    check(fn_.vkCreateDescriptorPool(device_, &ci, nullptr, &p.handle), "vkCreateDescriptorPool",
          link_.name);
    p.sets_left = p.sets;
    p.descriptors_left = p.descriptors;
    return p;
  }

  const device_functions& fn_;
  VkDevice device_;
  VkQueue queue_;
  upload_pool& uploads_;
  detail::device_link& link_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  std::uint32_t batch_;
  std::vector<submission> slots_; // a ring: in flight from head_, then the one recording
  std::size_t head_ = 0, in_flight_ = 0;
  bool recording_ = false;
  std::uint32_t recorded_ = 0;
  VkPipeline bound_ = VK_NULL_HANDLE;
  pool current_pool_;
  std::vector<pool> spare_pools_;
  std::atomic<std::uint64_t> submitted_{0}, completed_{0}, host_waits_{0};
};

} // namespace kiln::jit::vk
