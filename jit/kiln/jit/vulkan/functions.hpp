#pragma once
// The Vulkan entry points kiln calls, as tables of function pointers filled at run time
// (nothing links against libvulkan: <vulkan/vulkan.h> is used for its types only), and
// the one way a failed VkResult becomes a kiln::error.
#ifndef VK_NO_PROTOTYPES
#define VK_NO_PROTOTYPES
#endif
#include <vulkan/vulkan.h>

#include "kiln/error.hpp"

#include <string>

namespace kiln::jit::vk {

// Loaded with vkGetInstanceProcAddr(VK_NULL_HANDLE, ...): usable before an instance exists.
#define KILN_VK_GLOBAL_FUNCTIONS(X)                                                                \
  X(vkCreateInstance)                                                                              \
  X(vkEnumerateInstanceLayerProperties)                                                            \
  X(vkEnumerateInstanceExtensionProperties)

// Loaded with vkGetInstanceProcAddr(instance, ...). Vulkan 1.1 entry points included: a
// loader too old for them makes the backend unavailable, with that reason.
#define KILN_VK_INSTANCE_FUNCTIONS(X)                                                              \
  X(vkDestroyInstance)                                                                             \
  X(vkEnumeratePhysicalDevices)                                                                    \
  X(vkGetPhysicalDeviceProperties)                                                                 \
  X(vkGetPhysicalDeviceProperties2)                                                                \
  X(vkGetPhysicalDeviceFeatures2)                                                                  \
  X(vkGetPhysicalDeviceQueueFamilyProperties)                                                      \
  X(vkGetPhysicalDeviceMemoryProperties)                                                           \
  X(vkEnumerateDeviceExtensionProperties)                                                          \
  X(vkCreateDevice)                                                                                \
  X(vkGetDeviceProcAddr)

// Loaded with vkGetDeviceProcAddr: straight into the driver (or the layers), no trampoline.
#define KILN_VK_DEVICE_FUNCTIONS(X)                                                                \
  X(vkDestroyDevice)                                                                               \
  X(vkGetDeviceQueue)                                                                              \
  X(vkDeviceWaitIdle)                                                                              \
  X(vkQueueWaitIdle)                                                                               \
  X(vkCreateBuffer)                                                                                \
  X(vkDestroyBuffer)                                                                               \
  X(vkGetBufferMemoryRequirements)                                                                 \
  X(vkAllocateMemory)                                                                              \
  X(vkFreeMemory)                                                                                  \
  X(vkBindBufferMemory)                                                                            \
  X(vkMapMemory)                                                                                   \
  X(vkCreateShaderModule)                                                                          \
  X(vkDestroyShaderModule)                                                                         \
  X(vkCreateDescriptorSetLayout)                                                                   \
  X(vkDestroyDescriptorSetLayout)                                                                  \
  X(vkCreateDescriptorPool)                                                                        \
  X(vkDestroyDescriptorPool)                                                                       \
  X(vkResetDescriptorPool)                                                                         \
  X(vkAllocateDescriptorSets)                                                                      \
  X(vkUpdateDescriptorSets)                                                                        \
  X(vkCreatePipelineLayout)                                                                        \
  X(vkDestroyPipelineLayout)                                                                       \
  X(vkCreateComputePipelines)                                                                      \
  X(vkDestroyPipeline)                                                                             \
  X(vkCreatePipelineCache)                                                                         \
  X(vkDestroyPipelineCache)                                                                        \
  X(vkGetPipelineCacheData)                                                                        \
  X(vkMergePipelineCaches)                                                                         \
  X(vkCreateCommandPool)                                                                           \
  X(vkDestroyCommandPool)                                                                          \
  X(vkAllocateCommandBuffers)                                                                      \
  X(vkResetCommandBuffer)                                                                          \
  X(vkBeginCommandBuffer)                                                                          \
  X(vkEndCommandBuffer)                                                                            \
  X(vkCmdBindPipeline)                                                                             \
  X(vkCmdBindDescriptorSets)                                                                       \
  X(vkCmdPushConstants)                                                                            \
  X(vkCmdDispatch)                                                                                 \
  X(vkCmdPipelineBarrier)                                                                          \
  X(vkCmdCopyBuffer)                                                                               \
  X(vkCmdFillBuffer)                                                                               \
  X(vkCreateFence)                                                                                 \
  X(vkDestroyFence)                                                                                \
  X(vkResetFences)                                                                                 \
  X(vkWaitForFences)                                                                               \
  X(vkGetFenceStatus)                                                                              \
  X(vkQueueSubmit)

#define KILN_VK_DECLARE_POINTER(f) PFN_##f f = nullptr;

struct global_functions {
  KILN_VK_GLOBAL_FUNCTIONS(KILN_VK_DECLARE_POINTER)
};
struct instance_functions {
  KILN_VK_INSTANCE_FUNCTIONS(KILN_VK_DECLARE_POINTER)
  // Optional: present with VK_EXT_debug_utils (validation on).
  PFN_vkCreateDebugUtilsMessengerEXT vkCreateDebugUtilsMessengerEXT = nullptr;
  PFN_vkDestroyDebugUtilsMessengerEXT vkDestroyDebugUtilsMessengerEXT = nullptr;
};
struct device_functions {
  KILN_VK_DEVICE_FUNCTIONS(KILN_VK_DECLARE_POINTER)
  // Optional: present when VK_KHR_push_descriptor is enabled.
  PFN_vkCmdPushDescriptorSetKHR vkCmdPushDescriptorSetKHR = nullptr;
};

// A zeroed Vulkan struct with its sType set.
template <class T>
T make(VkStructureType type) {
  T v{};
  v.sType = type;
  return v;
}

inline const char* result_name(VkResult r) {
  switch (r) {
#define KILN_VK_RESULT(name)                                                                       \
  case name:                                                                                       \
    return #name;
    KILN_VK_RESULT(VK_SUCCESS)
    KILN_VK_RESULT(VK_NOT_READY)
    KILN_VK_RESULT(VK_TIMEOUT)
    KILN_VK_RESULT(VK_EVENT_SET)
    KILN_VK_RESULT(VK_EVENT_RESET)
    KILN_VK_RESULT(VK_INCOMPLETE)
    KILN_VK_RESULT(VK_ERROR_OUT_OF_HOST_MEMORY)
    KILN_VK_RESULT(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    KILN_VK_RESULT(VK_ERROR_INITIALIZATION_FAILED)
    KILN_VK_RESULT(VK_ERROR_DEVICE_LOST)
    KILN_VK_RESULT(VK_ERROR_MEMORY_MAP_FAILED)
    KILN_VK_RESULT(VK_ERROR_LAYER_NOT_PRESENT)
    KILN_VK_RESULT(VK_ERROR_EXTENSION_NOT_PRESENT)
    KILN_VK_RESULT(VK_ERROR_FEATURE_NOT_PRESENT)
    KILN_VK_RESULT(VK_ERROR_INCOMPATIBLE_DRIVER)
    KILN_VK_RESULT(VK_ERROR_TOO_MANY_OBJECTS)
    KILN_VK_RESULT(VK_ERROR_FORMAT_NOT_SUPPORTED)
    KILN_VK_RESULT(VK_ERROR_FRAGMENTED_POOL)
    KILN_VK_RESULT(VK_ERROR_UNKNOWN)
    KILN_VK_RESULT(VK_ERROR_OUT_OF_POOL_MEMORY)
    KILN_VK_RESULT(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    KILN_VK_RESULT(VK_ERROR_FRAGMENTATION)
    KILN_VK_RESULT(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
    KILN_VK_RESULT(VK_PIPELINE_COMPILE_REQUIRED)
    KILN_VK_RESULT(VK_ERROR_VALIDATION_FAILED_EXT)
    KILN_VK_RESULT(VK_ERROR_INVALID_SHADER_NV)
#undef KILN_VK_RESULT
  default:
    return "VkResult (unknown code)";
  }
}

inline bool out_of_memory(VkResult r) {
  return r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY;
}

// kiln::error("vulkan", "<function> failed", "<VkResult name> (<code>), device <name>").
inline void check(VkResult r, const char* function, const std::string& device) {
  if (r == VK_SUCCESS) return;
  std::string details = std::string(result_name(r)) + " (" + std::to_string(static_cast<int>(r)) +
                        ")" + (device.empty() ? "" : ", device " + device);
  throw error("vulkan", std::string(function) + " failed", std::move(details));
}

} // namespace kiln::jit::vk
