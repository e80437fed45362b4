#pragma once
// Compute pipelines: a SPIR-V module with `buffers` storage buffers at set 0, bindings
// 0..buffers-1 (plus one parameter buffer at binding `buffers` when asked), an optional
// push-constant range, and the workgroup size as specialization constant 0 (the GLSL says
// `layout(local_size_x_id = 0) in;`). A pipeline dropped while queued work still uses it
// is destroyed once that work has completed; at device shutdown every one is destroyed.
#include "kiln/jit/vulkan/device_info.hpp"

#include <atomic>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace kiln::jit::vk {

struct kernel_layout {
  std::uint32_t buffers = 0;    // storage buffers at bindings 0..buffers-1
  std::uint32_t push_bytes = 0; // push-constant bytes (0: none)
  bool param_buffer = false;    // parameters in a storage buffer at binding `buffers`
};

class pipeline;

namespace detail {
// What outlives a context for its pipelines: the device's functions, whether the device
// still exists, and the pipelines to destroy later.
struct device_link {
  struct retired {
    VkPipeline pipeline = VK_NULL_HANDLE;
    VkPipelineLayout layout = VK_NULL_HANDLE;
    VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
    std::uint64_t epoch = 0; // destroy once the queue has completed this epoch
  };
  std::mutex mutex;
  VkDevice device = VK_NULL_HANDLE; // null once the device is shut down
  device_functions fn;
  std::string name;
  std::atomic<std::uint64_t> completed{0}; // the queue's completed epoch
  std::vector<retired> graveyard;
  std::atomic<std::size_t> graveyard_size{0}; // read without the lock by the queue
  std::vector<pipeline*> live;

  void destroy(const retired& r) noexcept {
    if (r.pipeline) fn.vkDestroyPipeline(device, r.pipeline, nullptr);
    if (r.layout) fn.vkDestroyPipelineLayout(device, r.layout, nullptr);
    if (r.set_layout) fn.vkDestroyDescriptorSetLayout(device, r.set_layout, nullptr);
  }
  // Destroys the retired pipelines whose work has completed (lock held by the caller).
  void collect(std::uint64_t done) noexcept {
    for (std::size_t i = 0; i < graveyard.size();) {
      if (graveyard[i].epoch <= done) {
        destroy(graveyard[i]);
        graveyard[i] = graveyard.back();
        graveyard.pop_back();
      } else {
        ++i;
      }
    }
    graveyard_size.store(graveyard.size());
  }
};
} // namespace detail

class pipeline {
public:
  ~pipeline() {
    std::lock_guard lock(link_->mutex);
    auto& live = link_->live;
    for (auto& p : live)
      if (p == this) {
        p = live.back();
        live.pop_back();
        break;
      }
    if (!link_->device) return; // shut down: destroyed already
    const detail::device_link::retired r{handle_, layout_, set_layout_, last_use_.load()};
    if (r.epoch <= link_->completed.load())
      link_->destroy(r);
    else {
      link_->graveyard.push_back(r);
      link_->graveyard_size.store(link_->graveyard.size());
    }
  }
  pipeline(const pipeline&) = delete;
  pipeline& operator=(const pipeline&) = delete;

  const kernel_layout& layout() const { return layout_info_; }
  std::uint32_t workgroup_size() const { return workgroup_; }
  VkPipeline handle() const { return handle_; }
  VkPipelineLayout pipeline_layout() const { return layout_; }
  VkDescriptorSetLayout set_layout() const { return set_layout_; }
  // Bindings a dispatch fills: the buffers, and the parameter buffer if there is one.
  std::uint32_t bindings() const {
    return layout_info_.buffers + (layout_info_.param_buffer ? 1 : 0);
  }

private:
  friend class context;
  friend std::shared_ptr<pipeline> create_pipeline(const std::shared_ptr<detail::device_link>&,
                                                   VkPipelineCache, std::span<const std::uint32_t>,
                                                   kernel_layout, std::uint32_t, bool);
  explicit pipeline(std::shared_ptr<detail::device_link> link) : link_(std::move(link)) {}

  std::shared_ptr<detail::device_link> link_;
  VkPipeline handle_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  kernel_layout layout_info_;
  std::uint32_t workgroup_ = 0;
  mutable std::atomic<std::uint64_t> last_use_{0}; // the last epoch whose work uses it
};

// Makes the Vulkan objects of a pipeline (inputs already checked by the context). With
// push descriptors the set layout is a push-descriptor layout, else sets come from pools.
inline std::shared_ptr<pipeline> create_pipeline(const std::shared_ptr<detail::device_link>& link,
                                                 VkPipelineCache cache,
                                                 std::span<const std::uint32_t> spirv,
                                                 kernel_layout kl, std::uint32_t workgroup,
                                                 bool push_descriptors) {
  const device_functions& fn = link->fn;
  const VkDevice device = link->device;
  std::shared_ptr<pipeline> p(new pipeline(link));
  p->layout_info_ = kl;
  p->workgroup_ = workgroup;
  // Registered before anything can throw, so a half-made pipeline is cleaned up the same way.
  {
    std::lock_guard lock(link->mutex);
    link->live.push_back(p.get());
  }

  auto sm = make<VkShaderModuleCreateInfo>(VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO);
  sm.codeSize = spirv.size_bytes();
  sm.pCode = spirv.data();
  VkShaderModule module = VK_NULL_HANDLE;
  check(fn.vkCreateShaderModule(device, &sm, nullptr, &module), "vkCreateShaderModule", link->name);
  struct module_guard { // the module is needed only while the pipeline is made
    const device_functions& fn;
    VkDevice device;
    VkShaderModule module;
    ~module_guard() { fn.vkDestroyShaderModule(device, module, nullptr); }
  } guard{fn, device, module};

  std::vector<VkDescriptorSetLayoutBinding> bindings(p->bindings());
  for (std::uint32_t i = 0; i < bindings.size(); ++i)
    bindings[i] = {i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
  auto dl =
      make<VkDescriptorSetLayoutCreateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO);
  if (push_descriptors) dl.flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR;
  dl.bindingCount = static_cast<std::uint32_t>(bindings.size());
  dl.pBindings = bindings.data();
  check(fn.vkCreateDescriptorSetLayout(device, &dl, nullptr, &p->set_layout_),
        "vkCreateDescriptorSetLayout", link->name);

  const VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, kl.push_bytes};
  auto pl = make<VkPipelineLayoutCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO);
  pl.setLayoutCount = 1;
  pl.pSetLayouts = &p->set_layout_;
  pl.pushConstantRangeCount = kl.push_bytes ? 1 : 0;
  pl.pPushConstantRanges = &range;
  check(fn.vkCreatePipelineLayout(device, &pl, nullptr, &p->layout_), "vkCreatePipelineLayout",
        link->name);

  const VkSpecializationMapEntry entry{0, 0, sizeof(std::uint32_t)};
  const VkSpecializationInfo spec{1, &entry, sizeof workgroup, &workgroup};
  auto ci = make<VkComputePipelineCreateInfo>(VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO);
  ci.stage =
      make<VkPipelineShaderStageCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO);
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = module;
  ci.stage.pName = "main";
  ci.stage.pSpecializationInfo = &spec;
  ci.layout = p->layout_;
  check(fn.vkCreateComputePipelines(device, cache, 1, &ci, nullptr, &p->handle_),
        "vkCreateComputePipelines", link->name);
  return p;
}

} // namespace kiln::jit::vk
