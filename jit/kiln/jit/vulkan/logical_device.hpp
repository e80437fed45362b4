#pragma once
// The logical device of a context: one compute queue, every shader feature the device has
// among those kiln uses enabled (so generated shaders may use them), VK_KHR_push_descriptor
// when available and wanted, and the device-level function table.
#include "kiln/jit/vulkan/instance.hpp"
#include "kiln/jit/vulkan/pipeline.hpp"

#include <vector>

namespace kiln::jit::vk {

// Creates the device into link.device / link.fn and returns its queue. On failure nothing
// is left behind and a kiln::error says which call failed.
inline VkQueue create_logical_device(const instance& inst, const physical_info& info,
                                     bool push_descriptors, detail::device_link& link) {
  const instance_functions& ifn = inst.functions();
  const float priority = 1.0f;
  auto q = make<VkDeviceQueueCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO);
  q.queueFamilyIndex = info.queue_family;
  q.queueCount = 1;
  q.pQueuePriorities = &priority;

  feature_chain features(info.vulkan12, info.has_8bit_storage_ext, info.has_float16_int8_ext);
  device_features want = info.features;
  features.enable(want);
  std::vector<const char*> extensions;
  if (push_descriptors) extensions.push_back(VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
  if (info.has_8bit_storage_ext && want.storage_buffer_8bit)
    extensions.push_back(VK_KHR_8BIT_STORAGE_EXTENSION_NAME);
  if (info.has_float16_int8_ext && (want.i8 || want.f16))
    extensions.push_back(VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);

  auto ci = make<VkDeviceCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO);
  ci.pNext = features.head(); // VkPhysicalDeviceFeatures2 in the chain, pEnabledFeatures null
  ci.queueCreateInfoCount = 1;
  ci.pQueueCreateInfos = &q;
  ci.enabledExtensionCount = static_cast<std::uint32_t>(extensions.size());
  ci.ppEnabledExtensionNames = extensions.data();
  VkDevice device = VK_NULL_HANDLE;
  check(ifn.vkCreateDevice(info.handle, &ci, nullptr, &device), "vkCreateDevice", info.name);

  device_functions fn;
  auto load = [&](const char* name) {
    return reinterpret_cast<PFN_vkVoidFunction>(ifn.vkGetDeviceProcAddr(device, name));
  };
  const char* missing = nullptr;
#define KILN_VK_LOAD_DEVICE(f)                                                                     \
  fn.f = reinterpret_cast<PFN_##f>(load(#f));                                                      \
  if (!fn.f && !missing) missing = #f;
  KILN_VK_DEVICE_FUNCTIONS(KILN_VK_LOAD_DEVICE)
#undef KILN_VK_LOAD_DEVICE
  if (push_descriptors) {
    fn.vkCmdPushDescriptorSetKHR =
        reinterpret_cast<PFN_vkCmdPushDescriptorSetKHR>(load("vkCmdPushDescriptorSetKHR"));
    if (!fn.vkCmdPushDescriptorSetKHR && !missing) missing = "vkCmdPushDescriptorSetKHR";
  }
  if (missing) {
    if (fn.vkDestroyDevice) fn.vkDestroyDevice(device, nullptr);
    throw error("vulkan", std::string("the driver lacks ") + missing, info.name);
  }
  VkQueue queue = VK_NULL_HANDLE;
  fn.vkGetDeviceQueue(device, info.queue_family, 0, &queue);
  link.device = device;
  link.fn = fn;
  link.name = info.name;
  return queue;
}

} // namespace kiln::jit::vk
