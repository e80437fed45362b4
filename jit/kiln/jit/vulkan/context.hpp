#pragma once
// One Vulkan device as kiln uses it: a compute queue fed in order and asynchronously,
// a caching arena of device memory, compute pipelines, and copies.
// - Memory: host-visible device memory (lavapipe, integrated GPUs, resizable BAR) in
//   64 MiB chunks, one VkBuffer each, cut into power-of-two blocks that are kept on free
//   lists when released and reused. Blocks are bound at their offset in the chunk.
// - Ordering: every command goes to one in-order queue with a barrier between commands,
//   so a released block may go to later GPU work at once. The host writes a block through
//   its mapping only once the work queued before its last release has finished.
// - Commands are recorded into a command buffer that is submitted when the host reads,
//   waits, or every 64 commands (so the device keeps busy); fences say what finished.
#include "kiln/jit/vulkan/loader.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <span>

namespace kiln::jit::vk {

struct chunk {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  std::byte* mapped = nullptr;
  VkDeviceSize size = 0, used = 0;
  std::size_t live = 0; // blocks handed out and not released
};

struct block {
  chunk* owner = nullptr;
  VkDeviceSize offset = 0, bytes = 0; // bytes: the rounded size
  std::uint64_t released_at = 0;      // the epoch whose work must finish before host writes
};

struct buffer_ref {
  const block* b = nullptr;
};

struct kernel_layout {
  std::uint32_t buffers = 0;
  std::uint32_t push_bytes = 0;
  bool param_buffer = false;
};

struct pipeline {
  VkDevice device = VK_NULL_HANDLE;
  const device_functions* fn = nullptr;
  VkShaderModule module = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkPipeline handle = VK_NULL_HANDLE;
  kernel_layout kl;
  pipeline() = default;
  pipeline(const pipeline&) = delete;
  pipeline& operator=(const pipeline&) = delete;
  ~pipeline() { destroy(); }
  void destroy() {
    if (!fn) return;
    if (handle) fn->vkDestroyPipeline(device, handle, nullptr);
    if (layout) fn->vkDestroyPipelineLayout(device, layout, nullptr);
    if (set_layout) fn->vkDestroyDescriptorSetLayout(device, set_layout, nullptr);
    if (module) fn->vkDestroyShaderModule(device, module, nullptr);
    fn = nullptr;
  }
};

struct memory_stats {
  std::uint64_t in_use = 0, reserved = 0, peak = 0;
};

class context {
public:
  static std::shared_ptr<context> get(int index) {
    static std::mutex m;
    static std::map<int, std::shared_ptr<context>> open;
    std::lock_guard lock(m);
    // At exit, every device is shut down before any static is destroyed that was made
    // after the first device opened (the validation layer's among them): kernels cached in
    // function-local tables and tensors in globals die later, and then free nothing.
    static const bool at_exit = (std::atexit([] {
                                   std::lock_guard l(m);
                                   for (auto& [i, c] : open)
                                     c->shutdown();
                                 }),
                                 true);
    (void)at_exit;
    auto& c = open[index];
    if (!c) {
      std::string why;
      const auto devs = enumerate_devices(&why);
      if (index < 0 || index >= static_cast<int>(devs.size()))
        throw error("device", "no such Vulkan device",
                    "vulkan:" + std::to_string(index) + "; " + std::to_string(devs.size()) +
                        " usable" + (why.empty() ? "" : " (" + why + ")"));
      c = std::shared_ptr<context>(new context(devs[index]));
    }
    return c;
  }
  context(const context&) = delete;
  context& operator=(const context&) = delete;

  ~context() { shutdown(); }

  // Waits for the queue and destroys every Vulkan object of the device, pipelines that
  // kernels still hold included; afterwards frees are no-ops and new work is an error.
  void shutdown() {
    std::lock_guard lock(mutex_);
    if (!device_) return;
    // A command buffer still being recorded is ended before anything it names is destroyed
    // below, and never submitted: nothing can read its results any more, and running work
    // during exit (lavapipe compiles shader variants on first use) crashed LLVM's own exit
    // handlers.
    if (begun_) {
      fn_.vkEndCommandBuffer(current_cb_.cb);
      fn_.vkDestroyFence(device_, current_cb_.fence, nullptr);
      begun_ = false;
    }
    fn_.vkDeviceWaitIdle(device_);
    for (auto& w : pipelines_)
      if (auto p = w.lock()) p->destroy();
    pipelines_.clear();
    for (auto& s : inflight_)
      fn_.vkDestroyFence(device_, s.fence, nullptr);
    for (auto& s : spare_)
      fn_.vkDestroyFence(device_, s.fence, nullptr);
    if (timer_pool_) fn_.vkDestroyQueryPool(device_, timer_pool_, nullptr);
    timer_pool_ = VK_NULL_HANDLE;
    timing_ = false;
    dead_.clear(); // (the pool frees its command buffers)
    fn_.vkDestroyCommandPool(device_, pool_, nullptr);
    for (auto& c : chunks_)
      destroy_chunk(*c);
    if (pcache_) fn_.vkDestroyPipelineCache(device_, pcache_, nullptr);
    fn_.vkDestroyDevice(device_, nullptr);
    device_ = VK_NULL_HANDLE;
  }

  const physical_info& info() const { return info_; }
  std::string describe() const {
    const auto v = info_.identity.api_version;
    return info_.name + " (Vulkan " + std::to_string(VK_API_VERSION_MAJOR(v)) + "." +
           std::to_string(VK_API_VERSION_MINOR(v)) + "." + std::to_string(VK_API_VERSION_PATCH(v)) +
           ")";
  }
  std::uint32_t max_push_bytes() const { return info_.limits.max_push_constants; }
  // One binding is kept for a parameter buffer.
  std::uint32_t max_buffers_per_kernel() const {
    return std::min(info_.limits.max_storage_buffers, info_.limits.max_push_descriptors) - 1;
  }

  // --- memory
  block allocate(std::size_t bytes) {
    std::lock_guard lock(mutex_);
    require_open();
    if (bytes > info_.limits.max_storage_buffer_range)
      throw error("alloc", "tensor too large for one Vulkan buffer",
                  std::to_string(bytes) + " bytes; maxStorageBufferRange is " +
                      std::to_string(info_.limits.max_storage_buffer_range) + " on " + info_.name);
    const VkDeviceSize size = round_up(std::max<std::size_t>(bytes, 1));
    auto& list = free_[size];
    block b;
    if (!list.empty()) {
      b = list.back();
      list.pop_back();
    } else {
      b = carve(size);
    }
    ++b.owner->live;
    stats_.in_use += size;
    stats_.peak = std::max(stats_.peak, stats_.in_use);
    return b;
  }
  void release(const block& b) {
    std::lock_guard lock(mutex_);
    if (!device_) return; // shut down: the memory is gone already
    block r = b;
    r.released_at = begun_ ? submitted_ + 1 : submitted_;
    --r.owner->live;
    stats_.in_use -= r.bytes;
    free_[r.bytes].push_back(r);
  }
  memory_stats stats() const {
    std::lock_guard lock(mutex_);
    return stats_;
  }
  // Frees every chunk no live block uses (after the queue drains).
  void empty_cache() {
    std::lock_guard lock(mutex_);
    if (!device_) return;
    drain();
    for (auto& [size, list] : free_)
      list.erase(std::remove_if(list.begin(), list.end(),
                                [](const block& b) { return b.owner->live == 0; }),
                 list.end());
    auto dead = std::stable_partition(chunks_.begin(), chunks_.end(),
                                      [](const auto& c) { return c->live > 0; });
    if (dead != chunks_.end()) ++generation_; // pre-recorded commands may name them
    for (auto it = dead; it != chunks_.end(); ++it) {
      stats_.reserved -= (*it)->size;
      destroy_chunk(**it);
    }
    chunks_.erase(dead, chunks_.end());
    current_ = nullptr;
  }

  // --- data
  void write(const block& b, std::size_t offset, const void* src, std::size_t bytes) {
    std::lock_guard lock(mutex_);
    require_open();
    if (b.released_at > completed_) wait_for(b.released_at);
    std::memcpy(b.owner->mapped + b.offset + offset, src, bytes);
  }
  void read(const block& b, std::size_t offset, void* dst, std::size_t bytes) {
    std::lock_guard lock(mutex_);
    require_open();
    drain();
    std::memcpy(dst, b.owner->mapped + b.offset + offset, bytes);
  }
  void copy(const block& s, std::size_t so, const block& d, std::size_t doff, std::size_t bytes) {
    std::lock_guard lock(mutex_);
    require_open();
    if (bytes == 0) return;
    VkCommandBuffer cb = recording();
    VkBufferCopy r{s.offset + so, d.offset + doff, bytes};
    fn_.vkCmdCopyBuffer(cb, s.owner->buffer, d.owner->buffer, 1, &r);
    after_command(cb);
  }
  void flush() {
    std::lock_guard lock(mutex_);
    if (device_) submit();
  }
  void synchronize() {
    std::lock_guard lock(mutex_);
    if (device_) drain();
  }
  std::uint64_t submitted_epoch() const { return submitted_; }
  std::uint64_t completed_epoch() const { return completed_; }

  // --- timing: timestamp queries around the commands queued in between
  bool has_timer() const {
    return info_.limits.timestamp_valid_bits > 0 && info_.limits.timestamp_period > 0;
  }
  void timer_begin() {
    std::lock_guard lock(mutex_);
    require_open();
    if (!has_timer()) return;
    if (!timer_pool_) {
      auto ci = make<VkQueryPoolCreateInfo>(VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO);
      ci.queryType = VK_QUERY_TYPE_TIMESTAMP;
      ci.queryCount = 2;
      check(fn_.vkCreateQueryPool(device_, &ci, nullptr, &timer_pool_), "vkCreateQueryPool");
    }
    // Reset in the command buffer: query commands run in submission order on one queue, so
    // this holds when the batch is submitted before timer_end_ns writes the second query.
    VkCommandBuffer cb = recording();
    fn_.vkCmdResetQueryPool(cb, timer_pool_, 0, 2);
    // Bottom of pipe: latched once every earlier command has finished, so the tail of work
    // queued before does not count (the next command waits for it too, after_command's
    // barrier).
    fn_.vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, timer_pool_, 0);
    timing_ = true;
  }
  // Nanoseconds of device time since timer_begin, after waiting for the queue; -1 without
  // timestamps or a timer_begin.
  double timer_end_ns() {
    std::lock_guard lock(mutex_);
    if (!device_ || !timing_) return -1;
    timing_ = false;
    fn_.vkCmdWriteTimestamp(recording(), VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, timer_pool_, 1);
    drain();
    std::array<std::uint64_t, 2> t{};
    check(fn_.vkGetQueryPoolResults(device_, timer_pool_, 0, 2, sizeof t, t.data(), sizeof t[0],
                                    VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
          "vkGetQueryPoolResults");
    const std::uint32_t bits = info_.limits.timestamp_valid_bits;
    const std::uint64_t mask = bits >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << bits) - 1;
    // Masked difference: right also when the counter wrapped in between.
    return static_cast<double>((t[1] - t[0]) & mask) * info_.limits.timestamp_period;
  }

  // --- kernels
  // full_subgroups: the shader needs whole subgroups (a subgroup reduction), asked for where
  // the device can promise them (device_features::full_subgroups).
  std::shared_ptr<pipeline> make_pipeline(std::span<const std::uint32_t> spirv, kernel_layout kl,
                                          std::uint32_t workgroup, bool full_subgroups = false) {
    std::lock_guard lock(mutex_);
    require_open();
    auto p = std::make_shared<pipeline>();
    pipelines_.push_back(p);
    p->device = device_;
    p->fn = &fn_;
    p->kl = kl;
    auto sm = make<VkShaderModuleCreateInfo>(VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO);
    sm.codeSize = spirv.size() * 4;
    sm.pCode = spirv.data();
    check(fn_.vkCreateShaderModule(device_, &sm, nullptr, &p->module), "vkCreateShaderModule");
    std::vector<VkDescriptorSetLayoutBinding> binds(kl.buffers + (kl.param_buffer ? 1 : 0));
    for (std::uint32_t i = 0; i < binds.size(); ++i)
      binds[i] = {i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
    auto dl =
        make<VkDescriptorSetLayoutCreateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO);
    dl.flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR;
    dl.bindingCount = static_cast<std::uint32_t>(binds.size());
    dl.pBindings = binds.data();
    check(fn_.vkCreateDescriptorSetLayout(device_, &dl, nullptr, &p->set_layout),
          "vkCreateDescriptorSetLayout");
    VkPushConstantRange pr{VK_SHADER_STAGE_COMPUTE_BIT, 0, kl.push_bytes};
    auto pl = make<VkPipelineLayoutCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO);
    pl.setLayoutCount = 1;
    pl.pSetLayouts = &p->set_layout;
    pl.pushConstantRangeCount = kl.push_bytes ? 1 : 0;
    pl.pPushConstantRanges = &pr;
    check(fn_.vkCreatePipelineLayout(device_, &pl, nullptr, &p->layout), "vkCreatePipelineLayout");
    VkSpecializationMapEntry entry{0, 0, sizeof(std::uint32_t)};
    VkSpecializationInfo spec{1, &entry, sizeof workgroup, &workgroup};
    auto ci = make<VkComputePipelineCreateInfo>(VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO);
    ci.stage =
        make<VkPipelineShaderStageCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO);
    ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    ci.stage.module = p->module;
    ci.stage.pName = "main";
    ci.stage.pSpecializationInfo = &spec;
    if (full_subgroups && info_.features.full_subgroups)
      ci.stage.flags = VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT_EXT;
    ci.layout = p->layout;
    check(fn_.vkCreateComputePipelines(device_, pipeline_cache(), 1, &ci, nullptr, &p->handle),
          "vkCreateComputePipelines");
    return p;
  }

  // The driver's pipeline cache: seeded once from a blob (kiln's disk cache keeps it), and
  // its current contents. Many drivers fill it with compiled code; lavapipe leaves only
  // its 32-byte header (Mesa's own shader cache does that job there).
  void seed_pipeline_cache(std::span<const std::byte> blob) {
    std::lock_guard lock(mutex_);
    if (pcache_ || !device_) return;
    auto ci = make<VkPipelineCacheCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO);
    ci.initialDataSize = blob.size();
    ci.pInitialData = blob.data();
    // A blob from another driver or version is ignored by the driver (its header says so).
    if (fn_.vkCreatePipelineCache(device_, &ci, nullptr, &pcache_) != VK_SUCCESS)
      pcache_ = VK_NULL_HANDLE;
  }
  std::vector<std::byte> pipeline_cache_data() {
    std::lock_guard lock(mutex_);
    std::vector<std::byte> out;
    if (!pcache_ || !device_) return out;
    std::size_t n = 0;
    if (fn_.vkGetPipelineCacheData(device_, pcache_, &n, nullptr) != VK_SUCCESS) return out;
    out.resize(n);
    if (fn_.vkGetPipelineCacheData(device_, pcache_, &n, out.data()) != VK_SUCCESS) out.clear();
    out.resize(n);
    return out;
  }

  void dispatch(const pipeline& p, std::span<const buffer_ref> buffers,
                std::span<const std::byte> params, std::uint32_t groups_x,
                std::uint32_t groups_y = 1) {
    std::lock_guard lock(mutex_);
    require_open();
    VkCommandBuffer cb = recording();
    record_dispatch(cb, {&p, buffers, params, groups_x, groups_y}, pending_params_);
    after_command(cb);
  }

  // --- pre-recorded commands (a captured plan's launches, kiln/plan/): dispatches recorded
  // once into a secondary command buffer, executed as one command each time they replay.
  // Simultaneous use: a replay may execute it again before the last one finished.
  struct dispatch_cmd {
    const pipeline* p;
    std::span<const buffer_ref> buffers;
    std::span<const std::byte> params;
    std::uint32_t groups_x, groups_y;
  };
  struct recorded_commands {
    VkCommandBuffer cb = VK_NULL_HANDLE;
    std::uint64_t used = 0;        // the epoch of the last submission executing it
    std::uint64_t generation = 0;  // of the memory it names (empty_cache destroys chunks)
    std::vector<block> params;     // parameter blocks it reads (its buffer-parameter dispatches')
    std::vector<std::byte> values; // what the queue last wrote to them, one after another
  };
  // Whether rc may be executed: recorded, and naming no memory freed since.
  bool current(const recorded_commands& rc) const {
    std::lock_guard lock(mutex_);
    return rc.cb != VK_NULL_HANDLE && rc.generation == generation_ && device_;
  }
  // (Re-)records rc with `cmds`, a barrier after each; its old buffer is reused where no
  // pending work executes it, else let go once that work has finished.
  void record_commands(recorded_commands& rc, std::span<const dispatch_cmd> cmds) {
    std::lock_guard lock(mutex_);
    require_open();
    if (rc.cb && rc.used > completed_) retire(false);
    if (rc.cb && rc.used > completed_) {
      let_go(std::move(rc));
      rc = recorded_commands{};
    }
    for (const block& b : rc.params)
      param_free_[b.bytes].push_back(b);
    rc.params.clear();
    if (!rc.cb) {
      auto ai = make<VkCommandBufferAllocateInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO);
      ai.commandPool = pool_;
      ai.level = VK_COMMAND_BUFFER_LEVEL_SECONDARY;
      ai.commandBufferCount = 1;
      check(fn_.vkAllocateCommandBuffers(device_, &ai, &rc.cb), "vkAllocateCommandBuffers");
    }
    rc.generation = generation_;
    auto inherit =
        make<VkCommandBufferInheritanceInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_INHERITANCE_INFO);
    auto bi = make<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
    bi.flags = VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT;
    bi.pInheritanceInfo = &inherit;
    check(fn_.vkBeginCommandBuffer(rc.cb, &bi), "vkBeginCommandBuffer");
    rc.values.clear();
    for (const dispatch_cmd& c : cmds) {
      record_dispatch(rc.cb, c, rc.params);
      if (c.p->kl.param_buffer) rc.values.insert(rc.values.end(), c.params.begin(), c.params.end());
      barrier(rc.cb);
    }
    check(fn_.vkEndCommandBuffer(rc.cb), "vkEndCommandBuffer");
    ++prerecorded_;
  }
  // Queues rc (current()) as one command, its buffer-parameter dispatches reading `params`
  // (one span each, in the order they were recorded). Where they differ from what rc's
  // blocks hold, the queue writes them first (vkCmdUpdateBuffer): in queue order, so work
  // still pending that executes rc reads the values it was queued with.
  void execute(recorded_commands& rc, std::span<const std::span<const std::byte>> params = {}) {
    std::lock_guard lock(mutex_);
    require_open();
    VkCommandBuffer cb = recording();
    bool wrote = false;
    for (std::size_t i = 0, at = 0; i < params.size() && i < rc.params.size(); ++i) {
      const std::span<const std::byte> v = params[i];
      if (at + v.size() > rc.values.size()) break; // (not as recorded: the caller re-records)
      std::byte* held = rc.values.data() + at;
      at += v.size();
      if (v.empty() || std::memcmp(held, v.data(), v.size()) == 0) continue;
      // (std430 members are 4 or 8 bytes, so the size is a multiple of 4 as the call needs)
      fn_.vkCmdUpdateBuffer(cb, rc.params[i].owner->buffer, rc.params[i].offset, v.size(),
                            v.data());
      std::memcpy(held, v.data(), v.size());
      wrote = true;
    }
    if (wrote) barrier(cb);
    fn_.vkCmdExecuteCommands(cb, 1, &rc.cb);
    rc.used = submitted_ + 1; // (the command buffer being recorded is submitted next)
    ++executed_;
    after_command(cb);
  }
  // Frees rc once no pending work executes it.
  void drop(recorded_commands&& rc) noexcept {
    std::lock_guard lock(mutex_);
    if (!device_ || !rc.cb) return; // shut down: the pool freed it
    let_go(std::move(rc));
  }
  // Pre-recorded command buffers executed, and recorded, so far (tests).
  std::pair<std::uint64_t, std::uint64_t> prerecorded() const {
    std::lock_guard lock(mutex_);
    return {executed_, prerecorded_};
  }

private:
  VkPipelineCache pipeline_cache() {
    if (!pcache_) {
      auto ci = make<VkPipelineCacheCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO);
      check(fn_.vkCreatePipelineCache(device_, &ci, nullptr, &pcache_), "vkCreatePipelineCache");
    }
    return pcache_;
  }
  void require_open() const {
    if (!device_)
      throw error("vulkan", "the device was shut down (the program is exiting)", info_.name);
  }

  struct submission {
    VkCommandBuffer cb = VK_NULL_HANDLE;
    VkFence fence = VK_NULL_HANDLE;
    std::uint64_t epoch = 0;
    std::vector<block> params; // parameter blocks this submission reads
  };

  explicit context(const physical_info& info) : info_(info) {
    const instance& inst = instance::get();
    float prio = 1.0f;
    auto q = make<VkDeviceQueueCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO);
    q.queueFamilyIndex = info.queue_family;
    q.queueCount = 1;
    q.pQueuePriorities = &prio;
    auto f12 = make<VkPhysicalDeviceVulkan12Features>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES);
    f12.shaderInt8 = info.features.i8;
    f12.shaderFloat16 = info.features.f16;
    f12.storageBuffer8BitAccess = info.features.storage_buffer_8bit;
    auto ssc = make<VkPhysicalDeviceSubgroupSizeControlFeaturesEXT>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES_EXT);
    ssc.computeFullSubgroups = VK_TRUE;
    if (info.features.full_subgroups) f12.pNext = &ssc;
    auto f11 = make<VkPhysicalDeviceVulkan11Features>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES);
    f11.storageBuffer16BitAccess = info.features.storage_buffer_16bit;
    f11.pNext = &f12;
    auto f = make<VkPhysicalDeviceFeatures2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2);
    f.features.shaderFloat64 = info.features.f64;
    f.features.shaderInt64 = info.features.i64;
    f.features.shaderInt16 = info.features.i16;
    f.pNext = &f11;
    const char* ext[] = {VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME,
                         VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME};
    auto ci = make<VkDeviceCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO);
    ci.pNext = &f;
    ci.queueCreateInfoCount = 1;
    ci.pQueueCreateInfos = &q;
    ci.enabledExtensionCount = info.features.full_subgroups ? 2 : 1;
    ci.ppEnabledExtensionNames = ext;
    check(inst.vkCreateDevice(info.handle, &ci, nullptr, &device_), "vkCreateDevice");
#define KILN_VK_LOAD_DEVICE(f)                                                                     \
  fn_.f = reinterpret_cast<PFN_##f>(inst.get_device_proc(device_, #f));                            \
  if (!fn_.f) throw error("vulkan", "the driver lacks " #f, info.name);
    KILN_VK_DEVICE_FUNCTIONS(KILN_VK_LOAD_DEVICE)
#undef KILN_VK_LOAD_DEVICE
    fn_.vkGetDeviceQueue(device_, info.queue_family, 0, &queue_);
    auto pc = make<VkCommandPoolCreateInfo>(VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO);
    pc.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pc.queueFamilyIndex = info.queue_family;
    check(fn_.vkCreateCommandPool(device_, &pc, nullptr, &pool_), "vkCreateCommandPool");
    // Host-visible, coherent memory; device-local too where there is such a type.
    VkPhysicalDeviceMemoryProperties mp;
    inst.vkGetPhysicalDeviceMemoryProperties(info.handle, &mp);
    const VkMemoryPropertyFlags need =
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    int best = -1;
    for (std::uint32_t i = 0; i < mp.memoryTypeCount; ++i) {
      const auto fl = mp.memoryTypes[i].propertyFlags;
      if ((fl & need) != need) continue;
      if (best < 0 || ((fl & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) &&
                       !(mp.memoryTypes[best].propertyFlags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)))
        best = static_cast<int>(i);
    }
    if (best < 0) {
      fn_.vkDestroyCommandPool(device_, pool_, nullptr);
      fn_.vkDestroyDevice(device_, nullptr);
      device_ = VK_NULL_HANDLE;
      throw error("device", "no host-visible device memory",
                  info.name + ": kiln's Vulkan backend maps device memory (staging copies are "
                              "not implemented)");
    }
    memory_type_ = static_cast<std::uint32_t>(best);
    alignment_ = std::max<VkDeviceSize>(256, info.limits.min_storage_buffer_offset_alignment);
  }

  VkDeviceSize round_up(VkDeviceSize n) const {
    VkDeviceSize s = alignment_;
    while (s < n)
      s *= 2;
    return s;
  }

  // A new block of `size` (a power of two) from the current chunk, or a new chunk.
  block carve(VkDeviceSize size) {
    constexpr VkDeviceSize chunk_bytes = VkDeviceSize{64} << 20;
    if (!current_ || current_->used + size > current_->size) {
      current_ = new_chunk(std::max(size, chunk_bytes));
      if (size > chunk_bytes) { // a big block has its chunk to itself
        chunk* c = current_;
        current_ = nullptr;
        c->used = size;
        return block{c, 0, size, 0};
      }
    }
    block b{current_, current_->used, size, 0};
    current_->used += size;
    return b;
  }
  // A parameter block: freed when its submission completes.
  block take_block(VkDeviceSize size) {
    auto& list = param_free_[size];
    if (!list.empty()) {
      block b = list.back();
      list.pop_back();
      return b;
    }
    block b = carve(size);
    ++b.owner->live; // parameter blocks stay with their chunk for good
    return b;
  }

  chunk* new_chunk(VkDeviceSize size) {
    auto c = std::make_unique<chunk>();
    c->size = size;
    auto bi = make<VkBufferCreateInfo>(VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO);
    bi.size = size;
    bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
               VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    check(fn_.vkCreateBuffer(device_, &bi, nullptr, &c->buffer), "vkCreateBuffer");
    VkMemoryRequirements req;
    fn_.vkGetBufferMemoryRequirements(device_, c->buffer, &req);
    auto ai = make<VkMemoryAllocateInfo>(VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO);
    ai.allocationSize = req.size;
    ai.memoryTypeIndex = memory_type_;
    VkResult r = fn_.vkAllocateMemory(device_, &ai, nullptr, &c->memory);
    if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) {
      fn_.vkDestroyBuffer(device_, c->buffer, nullptr);
      throw error("alloc", "out of device memory",
                  std::to_string(size) + " bytes on " + info_.name + "; " +
                      std::to_string(stats_.in_use) + " in use, " +
                      std::to_string(stats_.reserved) +
                      " reserved (kiln::empty_cache frees "
                      "cached blocks)");
    }
    check(r, "vkAllocateMemory");
    check(fn_.vkBindBufferMemory(device_, c->buffer, c->memory, 0), "vkBindBufferMemory");
    void* p = nullptr;
    check(fn_.vkMapMemory(device_, c->memory, 0, VK_WHOLE_SIZE, 0, &p), "vkMapMemory");
    c->mapped = static_cast<std::byte*>(p);
    stats_.reserved += size;
    chunks_.push_back(std::move(c));
    return chunks_.back().get();
  }
  void destroy_chunk(chunk& c) {
    fn_.vkDestroyBuffer(device_, c.buffer, nullptr);
    fn_.vkFreeMemory(device_, c.memory, nullptr);
  }

  // The command buffer being recorded (begun on first use; a command that throws half-way
  // leaves it begun, and it is submitted with the rest).
  VkCommandBuffer recording() {
    if (!begun_) {
      if (spare_.empty()) {
        submission s;
        auto ai = make<VkCommandBufferAllocateInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO);
        ai.commandPool = pool_;
        ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
        ai.commandBufferCount = 1;
        check(fn_.vkAllocateCommandBuffers(device_, &ai, &s.cb), "vkAllocateCommandBuffers");
        auto fi = make<VkFenceCreateInfo>(VK_STRUCTURE_TYPE_FENCE_CREATE_INFO);
        check(fn_.vkCreateFence(device_, &fi, nullptr, &s.fence), "vkCreateFence");
        spare_.push_back(std::move(s));
      }
      current_cb_ = std::move(spare_.back());
      spare_.pop_back();
      auto bi = make<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
      bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
      check(fn_.vkBeginCommandBuffer(current_cb_.cb, &bi), "vkBeginCommandBuffer");
      begun_ = true;
    }
    return current_cb_.cb;
  }
  // One dispatch into cb; a parameter block it needs is added to `params` (freed when the
  // work that reads it has finished).
  void record_dispatch(VkCommandBuffer cb, const dispatch_cmd& c, std::vector<block>& params) {
    const pipeline& p = *c.p;
    std::array<VkDescriptorBufferInfo, 64> infos;
    std::array<VkWriteDescriptorSet, 64> writes;
    const std::size_t nb = c.buffers.size() + (p.kl.param_buffer ? 1 : 0);
    if (nb > infos.size()) throw error("vulkan", "too many buffers", std::to_string(nb));
    fn_.vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.handle);
    for (std::size_t i = 0; i < c.buffers.size(); ++i)
      infos[i] = {c.buffers[i].b->owner->buffer, c.buffers[i].b->offset, c.buffers[i].b->bytes};
    if (p.kl.param_buffer) {
      const VkDeviceSize size = round_up(std::max<std::size_t>(c.params.size(), 1));
      block pb = take_block(size);
      std::memcpy(pb.owner->mapped + pb.offset, c.params.data(), c.params.size());
      params.push_back(pb);
      infos[c.buffers.size()] = {pb.owner->buffer, pb.offset, pb.bytes};
    }
    for (std::size_t i = 0; i < nb; ++i) {
      writes[i] = make<VkWriteDescriptorSet>(VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET);
      writes[i].dstBinding = static_cast<std::uint32_t>(i);
      writes[i].descriptorCount = 1;
      writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      writes[i].pBufferInfo = &infos[i];
    }
    fn_.vkCmdPushDescriptorSetKHR(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0,
                                  static_cast<std::uint32_t>(nb), writes.data());
    if (!p.kl.param_buffer && p.kl.push_bytes)
      fn_.vkCmdPushConstants(cb, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                             static_cast<std::uint32_t>(c.params.size()), c.params.data());
    fn_.vkCmdDispatch(cb, std::max<std::uint32_t>(c.groups_x, 1),
                      std::max<std::uint32_t>(c.groups_y, 1), 1);
  }
  // A pre-recorded buffer no longer wanted: freed (with its parameter blocks) once the work
  // that executes it has finished.
  void let_go(recorded_commands&& rc) {
    dead_.push_back(std::move(rc));
    free_dead();
  }
  void free_dead() {
    for (std::size_t i = 0; i < dead_.size();)
      if (dead_[i].used <= completed_) {
        fn_.vkFreeCommandBuffers(device_, pool_, 1, &dead_[i].cb);
        for (const block& b : dead_[i].params)
          param_free_[b.bytes].push_back(b);
        dead_[i] = std::move(dead_.back());
        dead_.pop_back();
      } else {
        ++i;
      }
  }
  // A barrier after every command: the next one sees its writes (in-order semantics).
  void after_command(VkCommandBuffer cb) {
    barrier(cb);
    if (++recorded_ >= 64) submit();
  }
  void barrier(VkCommandBuffer cb) {
    auto mb = make<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                       VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT |
                       VK_ACCESS_HOST_READ_BIT;
    fn_.vkCmdPipelineBarrier(cb,
                             VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                             VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT |
                                 VK_PIPELINE_STAGE_HOST_BIT,
                             0, 1, &mb, 0, nullptr, 0, nullptr);
  }
  void submit() {
    if (!begun_) return;
    begun_ = false;
    check(fn_.vkEndCommandBuffer(current_cb_.cb), "vkEndCommandBuffer");
    auto si = make<VkSubmitInfo>(VK_STRUCTURE_TYPE_SUBMIT_INFO);
    si.commandBufferCount = 1;
    si.pCommandBuffers = &current_cb_.cb;
    check(fn_.vkQueueSubmit(queue_, 1, &si, current_cb_.fence), "vkQueueSubmit");
    current_cb_.epoch = ++submitted_;
    current_cb_.params = std::move(pending_params_);
    pending_params_.clear();
    inflight_.push_back(std::move(current_cb_));
    current_cb_ = submission{};
    recorded_ = 0;
    retire(false);
  }
  // Recycles finished submissions; with `until`, waits for those up to that epoch.
  void retire(bool wait, std::uint64_t until = 0) {
    while (!inflight_.empty()) {
      submission& s = inflight_.front();
      if (wait && s.epoch <= until) {
        check(fn_.vkWaitForFences(device_, 1, &s.fence, VK_TRUE, UINT64_MAX), "vkWaitForFences");
      } else if (fn_.vkGetFenceStatus(device_, s.fence) != VK_SUCCESS) {
        break;
      }
      check(fn_.vkResetFences(device_, 1, &s.fence), "vkResetFences");
      check(fn_.vkResetCommandBuffer(s.cb, 0), "vkResetCommandBuffer");
      completed_ = s.epoch;
      for (const block& b : s.params)
        param_free_[b.bytes].push_back(b);
      s.params.clear();
      spare_.push_back(std::move(s));
      inflight_.pop_front();
    }
    if (!dead_.empty()) free_dead();
  }
  void wait_for(std::uint64_t epoch) {
    if (epoch > submitted_) submit();
    retire(true, epoch);
  }
  void drain() {
    submit();
    retire(true, submitted_);
  }

  physical_info info_;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  device_functions fn_;
  std::uint32_t memory_type_ = 0;
  VkPipelineCache pcache_ = VK_NULL_HANDLE;
  VkDeviceSize alignment_ = 256;

  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<chunk>> chunks_;
  std::vector<std::weak_ptr<pipeline>> pipelines_;
  chunk* current_ = nullptr;
  std::map<VkDeviceSize, std::vector<block>> free_, param_free_;
  memory_stats stats_;

  submission current_cb_;
  std::vector<block> pending_params_;
  std::deque<submission> inflight_;
  std::vector<submission> spare_;
  std::vector<recorded_commands> dead_; // pre-recorded, let go, maybe still executing
  std::uint64_t generation_ = 0, executed_ = 0, prerecorded_ = 0;
  std::uint32_t recorded_ = 0; // commands in the command buffer being recorded
  bool begun_ = false;         // a command buffer is being recorded
  std::uint64_t submitted_ = 0, completed_ = 0;
  VkQueryPool timer_pool_ = VK_NULL_HANDLE; // two timestamps, made on first timer_begin
  bool timing_ = false;                     // timer_begin wrote the first, not yet read
};

} // namespace kiln::jit::vk
