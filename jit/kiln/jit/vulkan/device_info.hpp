#pragma once
// What kiln knows of a physical device: its identity (for cache keys), the shader features
// kiln may enable, and the limits that shape kernels and launches. Queried once per device
// when the instance is created.
#include "kiln/jit/vulkan/functions.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace kiln::jit::vk {

struct device_features {
  bool f64 = false;                  // shaderFloat64
  bool i64 = false;                  // shaderInt64
  bool i16 = false;                  // shaderInt16
  bool i8 = false;                   // shaderInt8
  bool f16 = false;                  // shaderFloat16 (arithmetic)
  bool storage_buffer_8bit = false;  // storageBuffer8BitAccess
  bool storage_buffer_16bit = false; // storageBuffer16BitAccess
  bool push_descriptor = false;      // VK_KHR_push_descriptor is available
};

struct device_identity {
  std::uint32_t vendor_id = 0, device_id = 0, driver_version = 0, api_version = 0;
  std::array<std::uint8_t, 16> pipeline_cache_uuid{};
  std::string driver_name, driver_info; // empty where the driver does not say
  bool cpu = false;                     // a CPU implementation (lavapipe, SwiftShader)
};

struct device_limits {
  std::uint32_t max_push_constants = 0;       // maxPushConstantsSize
  std::uint32_t max_storage_buffers = 0;      // maxPerStageDescriptorStorageBuffers
  std::uint32_t max_set_storage_buffers = 0;  // maxDescriptorSetStorageBuffers
  std::uint32_t max_push_descriptors = 0;     // 0 without VK_KHR_push_descriptor
  std::uint64_t max_storage_buffer_range = 0; // maxStorageBufferRange
  std::uint64_t min_storage_buffer_offset_alignment = 1;
  std::uint64_t max_memory_allocation_size = 0; // maxMemoryAllocationSize
  std::uint32_t max_workgroup_count_x = 0;      // maxComputeWorkGroupCount[0]
  std::array<std::uint32_t, 3> max_workgroup_count{};
  std::uint32_t max_workgroup_size_x = 0; // maxComputeWorkGroupSize[0]
  std::uint32_t max_workgroup_invocations = 0;
  std::uint32_t subgroup_size = 0;
};

struct physical_info {
  VkPhysicalDevice handle = VK_NULL_HANDLE;
  std::string name;
  device_identity identity;
  device_features features;
  device_limits limits;
  std::uint32_t queue_family = 0; // the compute queue family kiln uses
  // Features are queried and enabled through the Vulkan 1.1/1.2 structs when both the
  // instance and the device speak 1.2, else through the extensions' own structs.
  bool vulkan12 = false;
  bool has_8bit_storage_ext = false, has_float16_int8_ext = false;
};

// The feature structs kiln reads and enables, chained. Both directions use it, so what is
// enabled at device creation is exactly what enumeration found.
class feature_chain {
public:
  feature_chain(bool vulkan12, bool has_8bit_ext, bool has_f16_i8_ext) {
    base_ = make<VkPhysicalDeviceFeatures2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2);
    v11_ = make<VkPhysicalDeviceVulkan11Features>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES);
    v12_ = make<VkPhysicalDeviceVulkan12Features>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES);
    s16_ = make<VkPhysicalDevice16BitStorageFeatures>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES);
    s8_ = make<VkPhysicalDevice8BitStorageFeatures>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES);
    f16_ = make<VkPhysicalDeviceShaderFloat16Int8Features>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES);
    vulkan12_ = vulkan12;
    void** next = &base_.pNext;
    auto link = [&](auto& s) {
      *next = &s;
      next = &s.pNext;
    };
    if (vulkan12) {
      link(v11_);
      link(v12_);
    } else { // Vulkan 1.1: 16-bit storage is core, the rest are extensions
      link(s16_);
      if (has_8bit_ext) link(s8_);
      if (has_f16_i8_ext) link(f16_);
    }
  }
  feature_chain(const feature_chain&) = delete; // the chain points into itself
  feature_chain& operator=(const feature_chain&) = delete;

  VkPhysicalDeviceFeatures2* head() { return &base_; }

  device_features read() const {
    device_features f;
    f.f64 = base_.features.shaderFloat64;
    f.i64 = base_.features.shaderInt64;
    f.i16 = base_.features.shaderInt16;
    f.i8 = vulkan12_ ? v12_.shaderInt8 : f16_.shaderInt8;
    f.f16 = vulkan12_ ? v12_.shaderFloat16 : f16_.shaderFloat16;
    f.storage_buffer_8bit = vulkan12_ ? v12_.storageBuffer8BitAccess : s8_.storageBuffer8BitAccess;
    f.storage_buffer_16bit =
        vulkan12_ ? v11_.storageBuffer16BitAccess : s16_.storageBuffer16BitAccess;
    return f;
  }
  void enable(const device_features& f) {
    base_.features.shaderFloat64 = f.f64;
    base_.features.shaderInt64 = f.i64;
    base_.features.shaderInt16 = f.i16;
    (vulkan12_ ? v12_.shaderInt8 : f16_.shaderInt8) = f.i8;
    (vulkan12_ ? v12_.shaderFloat16 : f16_.shaderFloat16) = f.f16;
    (vulkan12_ ? v12_.storageBuffer8BitAccess : s8_.storageBuffer8BitAccess) =
        f.storage_buffer_8bit;
    (vulkan12_ ? v11_.storageBuffer16BitAccess : s16_.storageBuffer16BitAccess) =
        f.storage_buffer_16bit;
  }

private:
  bool vulkan12_ = false;
  VkPhysicalDeviceFeatures2 base_;
  VkPhysicalDeviceVulkan11Features v11_;
  VkPhysicalDeviceVulkan12Features v12_;
  VkPhysicalDevice16BitStorageFeatures s16_;
  VkPhysicalDevice8BitStorageFeatures s8_;
  VkPhysicalDeviceShaderFloat16Int8Features f16_;
};

inline std::vector<std::string> device_extensions(const instance_functions& fn,
                                                  VkPhysicalDevice pd) {
  std::uint32_t n = 0;
  if (fn.vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, nullptr) != VK_SUCCESS) return {};
  std::vector<VkExtensionProperties> ext(n);
  if (fn.vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, ext.data()) != VK_SUCCESS) return {};
  std::vector<std::string> names;
  for (std::uint32_t i = 0; i < n; ++i)
    names.emplace_back(ext[i].extensionName);
  return names;
}

// The device as kiln sees it, or nothing (with the reason in `why_not`) when kiln cannot
// use it: older than Vulkan 1.1, or no queue family with compute.
inline std::optional<physical_info> describe_physical_device(const instance_functions& fn,
                                                             VkPhysicalDevice pd,
                                                             std::uint32_t instance_api,
                                                             std::string& why_not) {
  VkPhysicalDeviceProperties basic{};
  fn.vkGetPhysicalDeviceProperties(pd, &basic);
  const std::string name = basic.deviceName;
  if (basic.apiVersion < VK_API_VERSION_1_1) {
    why_not = name + " supports only Vulkan " +
              std::to_string(VK_API_VERSION_MAJOR(basic.apiVersion)) + "." +
              std::to_string(VK_API_VERSION_MINOR(basic.apiVersion)) + " (kiln needs 1.1)";
    return std::nullopt;
  }
  const auto extensions = device_extensions(fn, pd);
  auto has = [&](const char* e) {
    return std::find(extensions.begin(), extensions.end(), e) != extensions.end();
  };
  physical_info info;
  info.handle = pd;
  info.name = name;
  info.vulkan12 = std::min(basic.apiVersion, instance_api) >= VK_API_VERSION_1_2;
  info.has_8bit_storage_ext = !info.vulkan12 && has(VK_KHR_8BIT_STORAGE_EXTENSION_NAME);
  info.has_float16_int8_ext = !info.vulkan12 && has(VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);
  const bool push_ext = has(VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
  const bool driver_props = info.vulkan12 || has(VK_KHR_DRIVER_PROPERTIES_EXTENSION_NAME);

  // Properties, with only the structs this device knows in the chain.
  auto props = make<VkPhysicalDeviceProperties2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2);
  auto subgroup = make<VkPhysicalDeviceSubgroupProperties>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES);
  auto maint3 = make<VkPhysicalDeviceMaintenance3Properties>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES);
  auto driver =
      make<VkPhysicalDeviceDriverProperties>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES);
  auto push = make<VkPhysicalDevicePushDescriptorPropertiesKHR>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PUSH_DESCRIPTOR_PROPERTIES_KHR);
  props.pNext = &subgroup;
  subgroup.pNext = &maint3;
  void** next = &maint3.pNext;
  if (driver_props) {
    *next = &driver;
    next = &driver.pNext;
  }
  if (push_ext) *next = &push;
  fn.vkGetPhysicalDeviceProperties2(pd, &props);
  const VkPhysicalDeviceProperties& p = props.properties;
  const VkPhysicalDeviceLimits& l = p.limits;

  auto& id = info.identity;
  id.vendor_id = p.vendorID;
  id.device_id = p.deviceID;
  id.driver_version = p.driverVersion;
  id.api_version = p.apiVersion;
  std::memcpy(id.pipeline_cache_uuid.data(), p.pipelineCacheUUID, VK_UUID_SIZE);
  if (driver_props) {
    id.driver_name = driver.driverName;
    id.driver_info = driver.driverInfo;
  }
  id.cpu = p.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;

  auto& lim = info.limits;
  lim.max_push_constants = l.maxPushConstantsSize;
  lim.max_storage_buffers = l.maxPerStageDescriptorStorageBuffers;
  lim.max_set_storage_buffers = l.maxDescriptorSetStorageBuffers;
  lim.max_push_descriptors = push_ext ? push.maxPushDescriptors : 0;
  lim.max_storage_buffer_range = l.maxStorageBufferRange;
  lim.min_storage_buffer_offset_alignment = l.minStorageBufferOffsetAlignment;
  lim.max_memory_allocation_size = maint3.maxMemoryAllocationSize;
  lim.max_workgroup_count = {l.maxComputeWorkGroupCount[0], l.maxComputeWorkGroupCount[1],
                             l.maxComputeWorkGroupCount[2]};
  lim.max_workgroup_count_x = l.maxComputeWorkGroupCount[0];
  lim.max_workgroup_size_x = l.maxComputeWorkGroupSize[0];
  lim.max_workgroup_invocations = l.maxComputeWorkGroupInvocations;
  lim.subgroup_size = subgroup.subgroupSize;

  feature_chain chain(info.vulkan12, info.has_8bit_storage_ext, info.has_float16_int8_ext);
  fn.vkGetPhysicalDeviceFeatures2(pd, chain.head());
  info.features = chain.read();
  info.features.push_descriptor = push_ext && push.maxPushDescriptors >= 2;

  // A compute queue: a compute-only family where there is one (dedicated hardware queues
  // on discrete GPUs), else the first with compute.
  std::uint32_t nq = 0;
  fn.vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, nullptr);
  std::vector<VkQueueFamilyProperties> families(nq);
  fn.vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, families.data());
  int best = -1;
  for (std::uint32_t q = 0; q < nq; ++q) {
    const auto flags = families[q].queueFlags;
    if (!(flags & VK_QUEUE_COMPUTE_BIT) || families[q].queueCount == 0) continue;
    if (best < 0 || (!(flags & VK_QUEUE_GRAPHICS_BIT) &&
                     (families[static_cast<std::size_t>(best)].queueFlags & VK_QUEUE_GRAPHICS_BIT)))
      best = static_cast<int>(q);
  }
  if (best < 0) {
    why_not = name + " has no queue family with compute";
    return std::nullopt;
  }
  info.queue_family = static_cast<std::uint32_t>(best);
  return info;
}

} // namespace kiln::jit::vk
