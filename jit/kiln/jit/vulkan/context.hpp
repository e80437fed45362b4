#pragma once
// One Vulkan device as kiln uses it: a logical device with one compute queue (in order,
// asynchronous: command_queue.hpp), the caching arena of device memory (arena.hpp), host
// <-> device copies (memcpy where the memory is mapped, staging copies elsewhere),
// pipelines and dispatch.
//
// Ordering rule, which makes reuse safe without reference counts: all GPU work goes through
// the one in-order queue with a barrier between consecutive commands, so a block released
// while queued kernels still use it may go to a later kernel at once. The host, though,
// must not touch bytes the queue may still use: every command stamps the blocks it uses
// with its epoch (a submission counter), the stamp survives release and reuse, and write()
// and read() wait for that epoch when it has not completed. Nothing else waits.
#include "kiln/jit/vulkan/command_queue.hpp"
#include "kiln/jit/vulkan/instance.hpp"
#include "kiln/jit/vulkan/logical_device.hpp"

#include <cstring>
#include <map>
#include <shared_mutex>

namespace kiln::jit::vk {

// A block bound to a kernel: the whole block (offset = block.offset, range = block.bytes).
struct buffer_ref {
  const block* b = nullptr;
};

struct context_options {
  bool force_staging = false;   // staging copies even where device memory is mappable
  bool push_descriptors = true; // VK_KHR_push_descriptor where the device has it
  std::uint32_t batch_commands = 64;
  std::uint32_t max_in_flight = 32; // submissions queued before the host waits for one
  VkDeviceSize chunk_bytes = VkDeviceSize{64} << 20;
  std::uint64_t memory_limit = 0;        // bytes of device memory to hold at most (0: none)
  std::vector<std::byte> pipeline_cache; // a pipeline_cache_data() blob of an earlier run

  // KILN_VK_FORCE_STAGING=1, KILN_VK_NO_PUSH_DESCRIPTORS=1.
  static context_options from_environment() {
    auto on = [](const char* name) {
      const char* v = std::getenv(name);
      return v && std::string(v) == "1";
    };
    context_options o;
    o.force_staging = on("KILN_VK_FORCE_STAGING");
    o.push_descriptors = !on("KILN_VK_NO_PUSH_DESCRIPTORS");
    return o;
  }
};

class context;
namespace detail {
// Every context of the process; shuts them all down at exit, before the instance goes.
struct context_registry {
  std::mutex mutex;
  std::map<int, std::shared_ptr<context>> cached;
  std::vector<std::weak_ptr<context>> all;
  ~context_registry();
  static context_registry& instance() {
    process_instance(); // made first, so destroyed after this registry
    static context_registry r;
    return r;
  }
};
} // namespace detail

class context final : private chunk_source {
public:
  // The context of device `index` ("vulkan:index"): made once, then shared. kiln::error
  // ("device", ...) with the reason when Vulkan or that device is not there.
  static std::shared_ptr<context> get(int index) {
    auto& reg = detail::context_registry::instance();
    std::lock_guard lock(reg.mutex);
    if (auto it = reg.cached.find(index); it != reg.cached.end()) return it->second;
    auto c = open_device(index, context_options::from_environment());
    reg.cached[index] = c;
    reg.all.push_back(c);
    return c;
  }
  // A context of its own (another logical device on the same physical device), with
  // options: staging copies, descriptor pools, a memory limit, a pipeline cache blob.
  static std::shared_ptr<context> create(int index, context_options options) {
    auto& reg = detail::context_registry::instance();
    std::lock_guard lock(reg.mutex);
    auto c = open_device(index, std::move(options));
    std::erase_if(reg.all, [](const auto& w) { return w.expired(); });
    reg.all.push_back(c);
    return c;
  }

  ~context() { shutdown(); }
  context(const context&) = delete;
  context& operator=(const context&) = delete;

  // Waits for the queue, then destroys every Vulkan object of the device, pipelines that
  // others still hold included. Afterwards release() does nothing and new work is an error.
  void shutdown() noexcept {
    std::unique_lock life(lifetime_);
    std::lock_guard lock(mutex_);
    if (!device_) return;
    fn().vkDeviceWaitIdle(device_);
    queue_->destroy();
    uploads_->destroy_all();
    arena_->destroy_all();
    {
      std::lock_guard l(link_->mutex);
      for (const auto& r : link_->graveyard)
        link_->destroy(r);
      link_->graveyard.clear();
      link_->graveyard_size.store(0);
      for (pipeline* p : link_->live)
        link_->destroy({p->handle_, p->layout_, p->set_layout_, 0});
      link_->device = VK_NULL_HANDLE;
    }
    if (cache_) fn().vkDestroyPipelineCache(device_, cache_, nullptr);
    fn().vkDestroyDevice(device_, nullptr);
    device_ = VK_NULL_HANDLE;
  }
  bool is_open() const {
    std::lock_guard lock(mutex_);
    return device_ != VK_NULL_HANDLE;
  }

  const physical_info& info() const { return info_; }
  int index() const { return index_; }
  const context_options& options() const { return options_; }
  bool mapped() const { return memory_.device_mapped; }
  bool uses_push_descriptors() const { return push_descriptors_; }
  // "llvmpipe (LLVM 15.0.6, 256 bits), llvmpipe Mesa 22.3.6, Vulkan 1.3.230; mapped ..."
  std::string describe() const {
    const auto v = info_.identity.api_version;
    std::string s = info_.name;
    if (!info_.identity.driver_name.empty())
      s += ", " + info_.identity.driver_name + " " + info_.identity.driver_info;
    s += ", Vulkan " + std::to_string(VK_API_VERSION_MAJOR(v)) + "." +
         std::to_string(VK_API_VERSION_MINOR(v)) + "." + std::to_string(VK_API_VERSION_PATCH(v));
    s += memory_.device_mapped ? "; mapped device memory" : "; staging copies";
    s += push_descriptors_ ? ", push descriptors" : ", descriptor pools";
    return s;
  }
  std::uint32_t max_push_bytes() const { return info_.limits.max_push_constants; }
  // Buffers one kernel may bind; one more binding stays for a parameter buffer.
  std::uint32_t max_buffers_per_kernel() const { return max_bindings() - 1; }
  VkDeviceSize alignment() const { return arena_->alignment(); }

  // --- memory
  block allocate(std::size_t bytes) {
    std::lock_guard lock(mutex_);
    require_open("alloc");
    if (bytes > info_.limits.max_storage_buffer_range ||
        (info_.limits.max_memory_allocation_size &&
         arena_->round(bytes) > info_.limits.max_memory_allocation_size))
      throw error(
          "alloc", "request larger than one Vulkan buffer can be",
          std::to_string(bytes) + " bytes requested; maxStorageBufferRange is " +
              std::to_string(info_.limits.max_storage_buffer_range) + ", maxMemoryAllocationSize " +
              std::to_string(info_.limits.max_memory_allocation_size) + " on " + info_.name);
    auto b = arena_->allocate(bytes);
    if (!b) { // out of memory: give back what the cache holds, then once more
      free_cache();
      b = arena_->allocate(bytes);
    }
    if (!b)
      throw error(
          "alloc", "out of device memory",
          std::to_string(bytes) + " bytes requested on " + info_.name + "; " +
              std::to_string(arena_->stats().in_use) + " bytes in use, " +
              std::to_string(arena_->stats().reserved) + " reserved after freeing the cache" +
              (options_.memory_limit ? ", memory_limit " + std::to_string(options_.memory_limit)
                                     : std::string()));
    return *b;
  }
  // The block's memory may go to later work at once (see the ordering rule above).
  // kiln::error for a block that is not live on this device; nothing after shutdown.
  void release(const block& b) {
    std::lock_guard lock(mutex_);
    if (!device_) return;
    arena_->release(b);
  }
  memory_stats stats() const {
    std::lock_guard lock(mutex_);
    return arena_->stats();
  }
  // Waits for the queue, then frees every chunk without a live block (and spare uploads).
  void empty_cache() {
    std::lock_guard lock(mutex_);
    if (device_) free_cache();
  }

  // --- data
  // Host -> device. Mapped: a memcpy, after waiting for queued work on these bytes. Else a
  // staging copy, enqueued.
  void write(const block& b, std::size_t offset, const void* src, std::size_t bytes) {
    std::lock_guard lock(mutex_);
    require_open("write");
    detail::region* r = checked(b, offset, bytes, "write");
    if (bytes == 0) return;
    if (!src) throw error("write", "null source pointer", std::to_string(bytes) + " bytes");
    if (memory_.device_mapped) {
      if (r->epoch > queue_->completed()) queue_->wait_for(r->epoch);
      std::memcpy(arena_->mapped(r) + offset, src, bytes);
      return;
    }
    const auto* from = static_cast<const std::byte*>(src);
    for (std::size_t done = 0; done < bytes;) {
      const std::size_t n = std::min<std::size_t>(bytes - done, staging_piece);
      const upload_slice s = uploads_->take(n);
      std::memcpy(s.data, from + done, n);
      const VkBufferCopy region{s.offset, r->offset + offset + done, n};
      VkCommandBuffer cb = queue_->begin_command();
      fn().vkCmdCopyBuffer(cb, s.buffer, buffer_of(r), 1, &region);
      r->epoch = queue_->recording_epoch();
      queue_->end_command();
      done += n;
      if (uploads_->pending_bytes() >= staging_flush) { // bound the staging memory in flight
        queue_->submit();
        queue_->wait_for(queue_->submitted() - 1);
      }
    }
  }
  // Device -> host: waits for the queued work on these bytes (submitting it), then copies.
  void read(const block& b, std::size_t offset, void* dst, std::size_t bytes) {
    std::lock_guard lock(mutex_);
    require_open("read");
    detail::region* r = checked(b, offset, bytes, "read");
    if (bytes == 0) return;
    if (!dst) throw error("read", "null destination pointer", std::to_string(bytes) + " bytes");
    if (memory_.device_mapped) {
      if (r->epoch > queue_->completed()) queue_->wait_for(r->epoch);
      std::memcpy(dst, arena_->mapped(r) + offset, bytes);
      return;
    }
    auto* to = static_cast<std::byte*>(dst);
    for (std::size_t done = 0; done < bytes;) { // rounds of up to staging_flush bytes
      std::vector<std::pair<std::byte*, std::size_t>> pieces;
      std::size_t round = 0;
      for (; done + round < bytes && round < staging_flush;) {
        const std::size_t n = std::min<std::size_t>(bytes - done - round, staging_piece);
        const upload_slice s = uploads_->take(n);
        const VkBufferCopy region{r->offset + offset + done + round, s.offset, n};
        VkCommandBuffer cb = queue_->begin_command();
        fn().vkCmdCopyBuffer(cb, buffer_of(r), s.buffer, 1, &region);
        r->epoch = queue_->recording_epoch();
        queue_->end_command();
        pieces.emplace_back(s.data, n);
        round += n;
      }
      queue_->wait_for(r->epoch);
      for (const auto& [from, n] : pieces) {
        std::memcpy(to + done, from, n);
        done += n;
      }
    }
  }
  // Device -> device, enqueued. Overlapping ranges of one block copy as memmove does.
  void copy(const block& src, std::size_t src_offset, const block& dst, std::size_t dst_offset,
            std::size_t bytes) {
    std::lock_guard lock(mutex_);
    require_open("copy");
    detail::region* rs = checked(src, src_offset, bytes, "copy (source)");
    detail::region* rd = checked(dst, dst_offset, bytes, "copy (destination)");
    if (bytes == 0) return;
    const VkBuffer sb = buffer_of(rs), db = buffer_of(rd);
    const VkDeviceSize s = rs->offset + src_offset, d = rd->offset + dst_offset;
    if (sb == db && s < d + bytes && d < s + bytes) {
      // Overlap: through an upload slice, both copies in one command (one submission, which
      // keeps the slice until it completes).
      const upload_slice t = uploads_->take(bytes);
      const VkBufferCopy in{s, t.offset, bytes}, out{t.offset, d, bytes};
      VkCommandBuffer cb = queue_->begin_command();
      fn().vkCmdCopyBuffer(cb, sb, t.buffer, 1, &in);
      queue_->barrier(cb);
      fn().vkCmdCopyBuffer(cb, t.buffer, db, 1, &out);
    } else {
      const VkBufferCopy region{s, d, bytes};
      fn().vkCmdCopyBuffer(queue_->begin_command(), sb, db, 1, &region);
    }
    rs->epoch = rd->epoch = queue_->recording_epoch();
    queue_->end_command();
  }
  // Fills `bytes` at `offset` with a 32-bit pattern, enqueued; both multiples of 4.
  void fill(const block& b, std::size_t offset, std::size_t bytes, std::uint32_t pattern) {
    std::lock_guard lock(mutex_);
    require_open("fill");
    detail::region* r = checked(b, offset, bytes, "fill");
    if (offset % 4 || bytes % 4)
      throw error("fill", "offset and size must be multiples of 4",
                  "offset " + std::to_string(offset) + ", " + std::to_string(bytes) + " bytes");
    if (bytes == 0) return;
    fn().vkCmdFillBuffer(queue_->begin_command(), buffer_of(r), r->offset + offset, bytes, pattern);
    r->epoch = queue_->recording_epoch();
    queue_->end_command();
  }

  // --- pipelines
  std::shared_ptr<pipeline> make_pipeline(std::span<const std::uint32_t> spirv, kernel_layout kl,
                                          std::uint32_t workgroup_size) {
    if (spirv.size() < 5 || spirv[0] != 0x07230203u)
      throw error("pipeline", "not a SPIR-V module",
                  std::to_string(spirv.size()) + " words" +
                      (spirv.empty() ? "" : ", first word " + std::to_string(spirv[0])));
    const std::uint32_t max_wg =
        std::min(info_.limits.max_workgroup_size_x, info_.limits.max_workgroup_invocations);
    if (workgroup_size == 0 || workgroup_size > max_wg)
      throw error("pipeline", "workgroup size out of range",
                  std::to_string(workgroup_size) + "; 1.." + std::to_string(max_wg) + " on " +
                      info_.name);
    if (kl.push_bytes % 4 || kl.push_bytes > max_push_bytes())
      throw error("pipeline", "push-constant size must be a multiple of 4 within the limit",
                  std::to_string(kl.push_bytes) + " bytes; maxPushConstantsSize is " +
                      std::to_string(max_push_bytes()) + " on " + info_.name);
    const std::uint32_t bindings = kl.buffers + (kl.param_buffer ? 1 : 0);
    if (bindings > max_bindings())
      throw error("pipeline", "too many buffers for one kernel",
                  std::to_string(kl.buffers) + " buffers" +
                      (kl.param_buffer ? " and a parameter buffer" : "") + "; at most " +
                      std::to_string(max_bindings()) + " bindings on " + info_.name);
    // The driver compiles here (milliseconds): other threads may dispatch meanwhile.
    std::shared_lock life(lifetime_);
    require_open("pipeline");
    auto p = create_pipeline(link_, cache_, spirv, kl, workgroup_size, push_descriptors_);
    std::lock_guard lock(mutex_);
    grow_scratch(bindings);
    return p;
  }
  // The driver's pipeline cache, to persist (lavapipe keeps only a header in it).
  std::vector<std::byte> pipeline_cache_data() const {
    std::shared_lock life(lifetime_);
    std::vector<std::byte> out;
    if (!device_ || !cache_) return out;
    std::size_t n = 0;
    if (fn().vkGetPipelineCacheData(device_, cache_, &n, nullptr) != VK_SUCCESS) return out;
    out.resize(n);
    if (fn().vkGetPipelineCacheData(device_, cache_, &n, out.data()) != VK_SUCCESS) n = 0;
    out.resize(n);
    return out;
  }
  // Merges a saved blob into the cache; one from another driver or version is ignored (the
  // driver checks the header). Returns whether it was taken.
  bool seed_pipeline_cache(std::span<const std::byte> blob) {
    std::unique_lock life(lifetime_); // merging needs the cache to itself
    if (!device_ || blob.empty()) return false;
    VkPipelineCache seed = VK_NULL_HANDLE;
    auto ci = make<VkPipelineCacheCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO);
    ci.initialDataSize = blob.size();
    ci.pInitialData = blob.data();
    if (fn().vkCreatePipelineCache(device_, &ci, nullptr, &seed) != VK_SUCCESS) return false;
    const VkResult r = fn().vkMergePipelineCaches(device_, cache_, 1, &seed);
    fn().vkDestroyPipelineCache(device_, seed, nullptr);
    return r == VK_SUCCESS;
  }

  // --- dispatch: recorded now, run asynchronously in order
  void dispatch(const pipeline& p, std::span<const buffer_ref> buffers,
                std::span<const std::byte> params, std::uint32_t groups_x,
                std::uint32_t groups_y = 1, std::uint32_t groups_z = 1) {
    std::lock_guard lock(mutex_);
    require_open("dispatch");
    const kernel_layout& kl = p.layout_info_;
    if (p.link_ != link_)
      throw error("dispatch", "the pipeline was made on another device context", info_.name);
    if (buffers.size() != kl.buffers)
      throw error("dispatch", "wrong number of buffers",
                  std::to_string(buffers.size()) + " given, the kernel binds " +
                      std::to_string(kl.buffers));
    if (!kl.param_buffer && params.size() > kl.push_bytes)
      throw error("dispatch", "parameters larger than the kernel's push constants",
                  std::to_string(params.size()) + " bytes, push range " +
                      std::to_string(kl.push_bytes) +
                      " (make the pipeline with a parameter buffer)");
    const auto& most = info_.limits.max_workgroup_count;
    if (groups_x > most[0] || groups_y > most[1] || groups_z > most[2])
      throw error("dispatch", "too many workgroups",
                  std::to_string(groups_x) + " x " + std::to_string(groups_y) + " x " +
                      std::to_string(groups_z) + "; at most " + std::to_string(most[0]) + " x " +
                      std::to_string(most[1]) + " x " + std::to_string(most[2]));
    const std::uint64_t epoch = queue_->recording_epoch();
    for (std::size_t i = 0; i < buffers.size(); ++i) {
      detail::region* r = buffers[i].b ? arena_->live(*buffers[i].b) : nullptr;
      if (!r)
        throw error("dispatch", "buffer " + std::to_string(i) + " is not a live block",
                    buffers[i].b ? "released, or from another device" : "null");
      infos_[i] = {buffer_of(r), r->offset, r->size};
    }
    if (groups_x == 0 || groups_y == 0 || groups_z == 0) return; // no work
    for (std::size_t i = 0; i < buffers.size(); ++i)
      buffers[i].b->slot->epoch = epoch;

    VkCommandBuffer cb = queue_->begin_command();
    if (queue_->bound_pipeline() != p.handle_) {
      fn().vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.handle_);
      queue_->bound_pipeline() = p.handle_;
    }
    if (kl.param_buffer) {
      const upload_slice s = uploads_->take(params.size());
      if (!params.empty()) std::memcpy(s.data, params.data(), params.size());
      infos_[kl.buffers] = {s.buffer, s.offset, std::max<VkDeviceSize>(params.size(), 4)};
    }
    const std::uint32_t n = p.bindings();
    if (n > 0 && push_descriptors_) {
      fn().vkCmdPushDescriptorSetKHR(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout_, 0, n,
                                     writes_.data());
    } else if (n > 0) {
      const VkDescriptorSet set = queue_->allocate_set(p.set_layout_, n);
      for (std::uint32_t i = 0; i < n; ++i)
        writes_[i].dstSet = set;
      fn().vkUpdateDescriptorSets(device_, n, writes_.data(), 0, nullptr);
      fn().vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout_, 0, 1, &set, 0,
                                   nullptr);
    }
    if (kl.push_bytes) { // the whole range, zero-padded: every byte the shader reads is set
      const std::size_t given = std::min<std::size_t>(params.size(), kl.push_bytes);
      if (given) std::memcpy(push_scratch_.data(), params.data(), given);
      std::memset(push_scratch_.data() + given, 0, kl.push_bytes - given);
      fn().vkCmdPushConstants(cb, p.layout_, VK_SHADER_STAGE_COMPUTE_BIT, 0, kl.push_bytes,
                              push_scratch_.data());
    }
    fn().vkCmdDispatch(cb, groups_x, groups_y, groups_z);
    p.last_use_.store(epoch, std::memory_order_relaxed);
    queue_->end_command();
  }

  // Submits what is recorded; does not wait.
  void flush() {
    std::lock_guard lock(mutex_);
    if (device_) queue_->submit();
  }
  // Submits and waits for everything.
  void synchronize() {
    std::lock_guard lock(mutex_);
    if (device_) queue_->wait_all();
  }
  std::uint64_t submitted_epoch() const { return queue_->submitted(); }
  std::uint64_t completed_epoch() const { return queue_->completed(); }
  // How often the host has blocked on the device so far (reads, waits, back-pressure).
  std::uint64_t host_waits() const { return queue_->host_waits(); }

private:
  static constexpr std::size_t staging_piece = std::size_t{16} << 20;
  static constexpr std::size_t staging_flush = std::size_t{64} << 20;

  static std::shared_ptr<context> open_device(int index, context_options options) {
    std::string why;
    const auto devices = enumerate_devices(&why);
    const std::string name = "vulkan:" + std::to_string(index);
    if (devices.empty()) throw error("device", "Vulkan is unavailable", name + ": " + why);
    if (index < 0 || index >= static_cast<int>(devices.size())) {
      std::string have;
      for (std::size_t i = 0; i < devices.size(); ++i)
        have += (i ? ", " : "") + ("vulkan:" + std::to_string(i)) + " " + devices[i].name;
      throw error("device", "no such Vulkan device", name + "; there are " + have);
    }
    return std::shared_ptr<context>(
        new context(index, devices[static_cast<std::size_t>(index)], std::move(options)));
  }

  context(int index, const physical_info& info, context_options options)
      : index_(index), info_(info), options_(std::move(options)),
        link_(std::make_shared<detail::device_link>()) {
    const instance& inst = *process_instance().instance; // there: devices were found
    push_descriptors_ = options_.push_descriptors && info_.features.push_descriptor;
    queue_handle_ = create_logical_device(inst, info_, push_descriptors_, *link_);
    device_ = link_->device;
    try {
      VkPhysicalDeviceMemoryProperties mp{};
      inst.functions().vkGetPhysicalDeviceMemoryProperties(info_.handle, &mp);
      memory_ = choose_memory(mp, options_.force_staging, info_.name);
      const VkDeviceSize align =
          std::max<VkDeviceSize>(256, info_.limits.min_storage_buffer_offset_alignment);
      VkDeviceSize chunk = options_.chunk_bytes;
      if (info_.limits.max_memory_allocation_size)
        chunk = std::min<VkDeviceSize>(chunk, info_.limits.max_memory_allocation_size);
      arena_ = std::make_unique<arena>(static_cast<chunk_source&>(*this), align, chunk);
      uploads_ =
          std::make_unique<upload_pool>(fn(), device_, memory_.upload_type, align, info_.name);
      queue_ = std::make_unique<command_queue>(fn(), device_, queue_handle_, info_.queue_family,
                                               *uploads_, *link_, options_.batch_commands,
                                               options_.max_in_flight);
      auto ci = make<VkPipelineCacheCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO);
      ci.initialDataSize = options_.pipeline_cache.size();
      ci.pInitialData = options_.pipeline_cache.empty() ? nullptr : options_.pipeline_cache.data();
      if (fn().vkCreatePipelineCache(device_, &ci, nullptr, &cache_) != VK_SUCCESS) {
        ci.initialDataSize = 0; // a blob the driver refuses: start empty
        ci.pInitialData = nullptr;
        check(fn().vkCreatePipelineCache(device_, &ci, nullptr, &cache_), "vkCreatePipelineCache",
              info_.name);
      }
      push_scratch_.resize(max_push_bytes());
      grow_scratch(8);
    } catch (...) {
      queue_.reset();
      uploads_.reset();
      arena_.reset();
      if (cache_) fn().vkDestroyPipelineCache(device_, cache_, nullptr);
      fn().vkDestroyDevice(device_, nullptr);
      link_->device = device_ = VK_NULL_HANDLE;
      throw;
    }
  }

  const device_functions& fn() const { return link_->fn; }
  void require_open(const char* op) const {
    if (!device_)
      throw error(op, "the Vulkan device was shut down (the program is exiting?)", info_.name);
  }
  std::uint32_t max_bindings() const {
    std::uint32_t n =
        std::min(info_.limits.max_storage_buffers, info_.limits.max_set_storage_buffers);
    if (push_descriptors_) n = std::min(n, info_.limits.max_push_descriptors);
    return std::max<std::uint32_t>(n, 2);
  }
  // The live record of `b`, after checking [offset, offset + bytes) lies inside it.
  detail::region* checked(const block& b, std::size_t offset, std::size_t bytes, const char* op) {
    detail::region* r = arena_->live(b);
    if (!r)
      throw error(op, "the block is not live on this device",
                  "released, or from another device (" + std::to_string(b.bytes) + " bytes)");
    if (offset > r->size || bytes > r->size - offset)
      throw error(op, "range outside the block",
                  "offset " + std::to_string(offset) + " + " + std::to_string(bytes) +
                      " bytes; the block has " + std::to_string(r->size));
    return r;
  }
  // Where a live block is, from the arena's record (not from the caller's copy of it).
  static VkBuffer buffer_of(const detail::region* r) { return r->owner->buffer; }
  void free_cache() {
    queue_->wait_all();
    arena_->release_empty_chunks();
    uploads_->release_spare();
  }
  void grow_scratch(std::uint32_t bindings) {
    if (infos_.size() >= bindings) return;
    infos_.resize(bindings);
    writes_.resize(bindings);
    for (std::uint32_t i = 0; i < bindings; ++i) { // fixed once: a dispatch fills infos_ only
      writes_[i] = make<VkWriteDescriptorSet>(VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET);
      writes_[i].dstBinding = i;
      writes_[i].descriptorCount = 1;
      writes_[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      writes_[i].pBufferInfo = &infos_[i];
    }
  }

  // chunk_source: device memory for the arena, within options_.memory_limit.
  VkResult create_chunk(VkDeviceSize bytes, chunk_memory& out) override {
    if (options_.memory_limit && arena_->stats().reserved + bytes > options_.memory_limit)
      return VK_ERROR_OUT_OF_DEVICE_MEMORY;
    return make_buffer(fn(), device_, bytes, memory_.device_type, memory_.device_mapped, out,
                       info_.name);
  }
  void destroy_chunk(const chunk_memory& m) noexcept override { free_buffer(fn(), device_, m); }

  int index_;
  physical_info info_;
  context_options options_;
  std::shared_ptr<detail::device_link> link_;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_handle_ = VK_NULL_HANDLE;
  bool push_descriptors_ = false;
  memory_choice memory_;
  VkPipelineCache cache_ = VK_NULL_HANDLE;

  mutable std::shared_mutex lifetime_; // shared: making pipelines; unique: shutdown
  mutable std::mutex mutex_;           // recording, submission, memory
  std::unique_ptr<arena> arena_;
  std::unique_ptr<upload_pool> uploads_;
  std::unique_ptr<command_queue> queue_;
  std::vector<VkDescriptorBufferInfo> infos_; // dispatch scratch: no allocation per dispatch
  std::vector<VkWriteDescriptorSet> writes_;
  std::vector<std::byte> push_scratch_;
};

inline detail::context_registry::~context_registry() {
  for (auto& w : all)
    if (auto c = w.lock()) c->shutdown();
  cached.clear();
}

} // namespace kiln::jit::vk
