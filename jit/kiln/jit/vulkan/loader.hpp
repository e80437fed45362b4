#pragma once
// The Vulkan loader, opened at run time: nothing links against libvulkan. Loads the
// instance once per process (with the Khronos validation layer when KILN_VK_VALIDATION=1,
// every warning and error then counted and kept), lists the compute-capable devices with
// their identity, features and limits.
#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include "kiln/error.hpp"
#include "kiln/settings.hpp"

#include <array>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

namespace kiln::jit::vk {

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

#define KILN_VK_DEVICE_FUNCTIONS(X)                                                                \
  X(vkDestroyDevice)                                                                               \
  X(vkGetDeviceQueue)                                                                              \
  X(vkDeviceWaitIdle)                                                                              \
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
  X(vkCreatePipelineLayout)                                                                        \
  X(vkDestroyPipelineLayout)                                                                       \
  X(vkCreateComputePipelines)                                                                      \
  X(vkCreatePipelineCache)                                                                         \
  X(vkDestroyPipelineCache)                                                                        \
  X(vkGetPipelineCacheData)                                                                        \
  X(vkDestroyPipeline)                                                                             \
  X(vkCreateCommandPool)                                                                           \
  X(vkDestroyCommandPool)                                                                          \
  X(vkAllocateCommandBuffers)                                                                      \
  X(vkResetCommandBuffer)                                                                          \
  X(vkFreeCommandBuffers)                                                                          \
  X(vkCmdExecuteCommands)                                                                          \
  X(vkBeginCommandBuffer)                                                                          \
  X(vkEndCommandBuffer)                                                                            \
  X(vkCmdBindPipeline)                                                                             \
  X(vkCmdPushConstants)                                                                            \
  X(vkCmdPushDescriptorSetKHR)                                                                     \
  X(vkCmdDispatch)                                                                                 \
  X(vkCmdPipelineBarrier)                                                                          \
  X(vkCmdCopyBuffer)                                                                               \
  X(vkCmdFillBuffer)                                                                               \
  X(vkCmdUpdateBuffer)                                                                             \
  X(vkCreateFence)                                                                                 \
  X(vkDestroyFence)                                                                                \
  X(vkResetFences)                                                                                 \
  X(vkWaitForFences)                                                                               \
  X(vkGetFenceStatus)                                                                              \
  X(vkQueueSubmit)                                                                                 \
  X(vkCreateQueryPool)                                                                             \
  X(vkDestroyQueryPool)                                                                            \
  X(vkCmdResetQueryPool)                                                                           \
  X(vkCmdWriteTimestamp)                                                                           \
  X(vkGetQueryPoolResults)

#define KILN_VK_DECLARE(f) PFN_##f f = nullptr;

// A zeroed Vulkan struct with its sType.
template <class T>
T make(VkStructureType type) {
  T v{};
  v.sType = type;
  return v;
}

struct device_functions {
  KILN_VK_DEVICE_FUNCTIONS(KILN_VK_DECLARE)
};

inline const char* result_name(VkResult r) {
  switch (r) {
  case VK_SUCCESS:
    return "VK_SUCCESS";
  case VK_NOT_READY:
    return "VK_NOT_READY";
  case VK_TIMEOUT:
    return "VK_TIMEOUT";
  case VK_ERROR_OUT_OF_HOST_MEMORY:
    return "VK_ERROR_OUT_OF_HOST_MEMORY";
  case VK_ERROR_OUT_OF_DEVICE_MEMORY:
    return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
  case VK_ERROR_INITIALIZATION_FAILED:
    return "VK_ERROR_INITIALIZATION_FAILED";
  case VK_ERROR_DEVICE_LOST:
    return "VK_ERROR_DEVICE_LOST";
  case VK_ERROR_LAYER_NOT_PRESENT:
    return "VK_ERROR_LAYER_NOT_PRESENT";
  case VK_ERROR_EXTENSION_NOT_PRESENT:
    return "VK_ERROR_EXTENSION_NOT_PRESENT";
  case VK_ERROR_FEATURE_NOT_PRESENT:
    return "VK_ERROR_FEATURE_NOT_PRESENT";
  case VK_ERROR_INCOMPATIBLE_DRIVER:
    return "VK_ERROR_INCOMPATIBLE_DRIVER";
  default:
    return "VkResult error";
  }
}
inline void check(VkResult r, const char* what) {
  if (r != VK_SUCCESS)
    throw error("vulkan", std::string(what) + " failed",
                std::string(result_name(r)) + " (" + std::to_string(static_cast<int>(r)) + ")");
}

// Validation messages (KILN_VK_VALIDATION=1): counted and kept, and printed to stderr.
struct validation_log {
  std::mutex mutex;
  std::size_t count = 0;
  std::vector<std::string> last;
  static validation_log& instance() {
    static validation_log v;
    return v;
  }
};
inline std::size_t validation_message_count() {
  auto& v = validation_log::instance();
  std::lock_guard lock(v.mutex);
  return v.count;
}
inline std::vector<std::string> validation_messages() {
  auto& v = validation_log::instance();
  std::lock_guard lock(v.mutex);
  return v.last;
}
inline VKAPI_ATTR VkBool32 VKAPI_CALL on_validation(VkDebugUtilsMessageSeverityFlagBitsEXT,
                                                    VkDebugUtilsMessageTypeFlagsEXT,
                                                    const VkDebugUtilsMessengerCallbackDataEXT* d,
                                                    void*) {
  auto& v = validation_log::instance();
  std::lock_guard lock(v.mutex);
  ++v.count;
  std::string m = d && d->pMessage ? d->pMessage : "(no message)";
  std::fprintf(stderr, "kiln[vulkan validation] %s\n", m.c_str());
  if (v.last.size() == 50) v.last.erase(v.last.begin());
  v.last.push_back(std::move(m));
  return VK_FALSE;
}

struct device_features {
  bool f64 = false, i64 = false, i16 = false, i8 = false, f16 = false;
  bool storage_buffer_8bit = false, storage_buffer_16bit = false, push_descriptor = false;
  // VK_EXT_subgroup_size_control's computeFullSubgroups: a subgroup reduction's pipeline
  // then asks for whole subgroups, which Vulkan promises only so.
  bool full_subgroups = false;
};
struct device_identity {
  std::uint32_t vendor_id = 0, device_id = 0, driver_version = 0, api_version = 0;
  std::array<std::uint8_t, 16> pipeline_cache_uuid{};
  bool cpu = false; // a CPU implementation (lavapipe, SwiftShader)
};
struct device_limits {
  std::uint32_t max_push_constants = 0, max_storage_buffers = 0, max_push_descriptors = 0;
  std::uint64_t max_storage_buffer_range = 0, min_storage_buffer_offset_alignment = 1;
  std::uint32_t max_workgroup_count_x = 0, max_workgroup_count_y = 0, max_workgroup_size_x = 0;
  std::uint32_t max_workgroup_invocations = 0;
  // Timestamps on the compute queue: meaningful bits (0: none) and nanoseconds per tick.
  std::uint32_t timestamp_valid_bits = 0;
  float timestamp_period = 0;
  // Lanes per subgroup, and whether compute shaders have basic and relative shuffles (the
  // subgroup reduction kernels; they shuffle 32- and 64-bit types only, so they need no
  // shaderSubgroupExtendedTypes).
  std::uint32_t subgroup_size = 0;
  bool subgroup_shuffle = false;
};
struct physical_info {
  VkPhysicalDevice handle = VK_NULL_HANDLE;
  std::string name;
  device_identity identity;
  device_features features;
  device_limits limits;
  std::uint32_t queue_family = 0;
};

// The process's loader and instance. Never destroyed: device contexts may be released
// by static destructors in any order, and the instance must outlive them all.
class instance {
public:
  static instance& get() {
    static instance* i = new instance(); // deliberately leaked (see above)
    return *i;
  }
  bool ok() const { return instance_ != VK_NULL_HANDLE; }
  const std::string& why() const { return why_; }
  VkInstance handle() const { return instance_; }
  const std::vector<physical_info>& devices() const { return devices_; }
  PFN_vkGetDeviceProcAddr get_device_proc = nullptr;
#define KILN_VK_MEMBER(f) PFN_##f f = nullptr;
  KILN_VK_INSTANCE_FUNCTIONS(KILN_VK_MEMBER)
#undef KILN_VK_MEMBER

private:
  instance() {
    try {
      open();
    } catch (const std::exception& e) {
      why_ = e.what();
      instance_ = VK_NULL_HANDLE;
    }
  }
  void open() {
    lib_ = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib_) lib_ = dlopen("libvulkan.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib_) {
      const char* e = dlerror();
      throw error("vulkan", "the Vulkan loader is not installed",
                  std::string("libvulkan.so.1: ") + (e ? e : "not found"));
    }
    auto gipa = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(lib_, "vkGetInstanceProcAddr"));
    if (!gipa) throw error("vulkan", "the Vulkan loader has no vkGetInstanceProcAddr");
    auto create = reinterpret_cast<PFN_vkCreateInstance>(gipa(nullptr, "vkCreateInstance"));
    auto layers_of = reinterpret_cast<PFN_vkEnumerateInstanceLayerProperties>(
        gipa(nullptr, "vkEnumerateInstanceLayerProperties"));
    const bool validate = settings::flag("KILN_VK_VALIDATION");
    std::vector<const char*> layers, exts;
    if (validate) {
      std::uint32_t n = 0;
      layers_of(&n, nullptr);
      std::vector<VkLayerProperties> have(n);
      layers_of(&n, have.data());
      bool found = false;
      for (const auto& l : have)
        found = found || std::strcmp(l.layerName, "VK_LAYER_KHRONOS_validation") == 0;
      if (!found)
        throw error("vulkan", "KILN_VK_VALIDATION=1 but the validation layer is not installed",
                    "VK_LAYER_KHRONOS_validation (Debian: vulkan-validationlayers)");
      layers.push_back("VK_LAYER_KHRONOS_validation");
      exts.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    }
    auto app = make<VkApplicationInfo>(VK_STRUCTURE_TYPE_APPLICATION_INFO);
    app.pApplicationName = "kiln";
    app.apiVersion = VK_API_VERSION_1_2;
    auto ci = make<VkInstanceCreateInfo>(VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO);
    ci.pApplicationInfo = &app;
    ci.enabledLayerCount = static_cast<std::uint32_t>(layers.size());
    ci.ppEnabledLayerNames = layers.data();
    ci.enabledExtensionCount = static_cast<std::uint32_t>(exts.size());
    ci.ppEnabledExtensionNames = exts.data();
    auto dbg = make<VkDebugUtilsMessengerCreateInfoEXT>(
        VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT);
    dbg.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                          VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    dbg.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                      VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                      VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    dbg.pfnUserCallback = on_validation;
    if (validate) ci.pNext = &dbg; // also covers instance creation and destruction
    check(create(&ci, nullptr, &instance_), "vkCreateInstance");
#define KILN_VK_LOAD(f)                                                                            \
  f = reinterpret_cast<PFN_##f>(gipa(instance_, #f));                                              \
  if (!f) throw error("vulkan", "the Vulkan loader lacks " #f);
    KILN_VK_INSTANCE_FUNCTIONS(KILN_VK_LOAD)
#undef KILN_VK_LOAD
    get_device_proc = vkGetDeviceProcAddr;
    if (validate) {
      auto mk = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
          gipa(instance_, "vkCreateDebugUtilsMessengerEXT"));
      if (mk) check(mk(instance_, &dbg, nullptr, &messenger_), "vkCreateDebugUtilsMessengerEXT");
    }
    enumerate();
  }

  void enumerate() {
    std::uint32_t n = 0;
    check(vkEnumeratePhysicalDevices(instance_, &n, nullptr), "vkEnumeratePhysicalDevices");
    std::vector<VkPhysicalDevice> pds(n);
    check(vkEnumeratePhysicalDevices(instance_, &n, pds.data()), "vkEnumeratePhysicalDevices");
    for (VkPhysicalDevice pd : pds) {
      physical_info info;
      info.handle = pd;
      auto pushd = make<VkPhysicalDevicePushDescriptorPropertiesKHR>(
          VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PUSH_DESCRIPTOR_PROPERTIES_KHR);
      auto sub = make<VkPhysicalDeviceSubgroupProperties>(
          VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES);
      pushd.pNext = &sub;
      auto props =
          make<VkPhysicalDeviceProperties2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2);
      props.pNext = &pushd;
      vkGetPhysicalDeviceProperties2(pd, &props);
      const auto& p = props.properties;
      if (p.apiVersion < VK_API_VERSION_1_2) continue; // kiln needs Vulkan 1.2 features
      info.name = p.deviceName;
      info.identity = {p.vendorID, p.deviceID, p.driverVersion, p.apiVersion, {}};
      std::memcpy(info.identity.pipeline_cache_uuid.data(), p.pipelineCacheUUID, 16);
      info.identity.cpu = p.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
      info.limits.max_push_constants = p.limits.maxPushConstantsSize;
      info.limits.max_storage_buffers = p.limits.maxPerStageDescriptorStorageBuffers;
      info.limits.max_storage_buffer_range = p.limits.maxStorageBufferRange;
      info.limits.min_storage_buffer_offset_alignment = p.limits.minStorageBufferOffsetAlignment;
      info.limits.max_workgroup_count_x = p.limits.maxComputeWorkGroupCount[0];
      info.limits.max_workgroup_count_y = p.limits.maxComputeWorkGroupCount[1];
      info.limits.max_workgroup_size_x = p.limits.maxComputeWorkGroupSize[0];
      info.limits.max_workgroup_invocations = p.limits.maxComputeWorkGroupInvocations;
      info.limits.max_push_descriptors = pushd.maxPushDescriptors;
      info.limits.timestamp_period = p.limits.timestampPeriod;
      info.limits.subgroup_size = sub.subgroupSize;
      info.limits.subgroup_shuffle =
          (sub.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
          (sub.supportedOperations & VK_SUBGROUP_FEATURE_BASIC_BIT) &&
          (sub.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_RELATIVE_BIT) &&
          std::has_single_bit(sub.subgroupSize);

      std::uint32_t ne = 0;
      vkEnumerateDeviceExtensionProperties(pd, nullptr, &ne, nullptr);
      std::vector<VkExtensionProperties> ext(ne);
      vkEnumerateDeviceExtensionProperties(pd, nullptr, &ne, ext.data());
      bool size_control = false;
      for (const auto& e : ext) {
        if (std::strcmp(e.extensionName, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME) == 0)
          info.features.push_descriptor = true;
        if (std::strcmp(e.extensionName, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME) == 0)
          size_control = true;
      }
      if (!info.features.push_descriptor) continue; // kiln binds buffers as push descriptors

      auto ssc = make<VkPhysicalDeviceSubgroupSizeControlFeaturesEXT>(
          VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES_EXT);
      auto f12 = make<VkPhysicalDeviceVulkan12Features>(
          VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES);
      if (size_control) f12.pNext = &ssc; // only where the device has the extension
      auto f11 = make<VkPhysicalDeviceVulkan11Features>(
          VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES);
      f11.pNext = &f12;
      auto f = make<VkPhysicalDeviceFeatures2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2);
      f.pNext = &f11;
      vkGetPhysicalDeviceFeatures2(pd, &f);
      info.features.full_subgroups = size_control && ssc.computeFullSubgroups;
      info.features.f64 = f.features.shaderFloat64;
      info.features.i64 = f.features.shaderInt64;
      info.features.i16 = f.features.shaderInt16;
      info.features.i8 = f12.shaderInt8;
      info.features.f16 = f12.shaderFloat16;
      info.features.storage_buffer_8bit = f12.storageBuffer8BitAccess;
      info.features.storage_buffer_16bit = f11.storageBuffer16BitAccess;

      std::uint32_t nq = 0;
      vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, nullptr);
      std::vector<VkQueueFamilyProperties> qs(nq);
      vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, qs.data());
      bool found = false;
      for (std::uint32_t q = 0; q < nq && !found; ++q)
        if (qs[q].queueFlags & VK_QUEUE_COMPUTE_BIT) {
          info.queue_family = q;
          found = true;
          // A family with valid bits writes timestamps (timestampComputeAndGraphics only
          // promises that every graphics and compute family does).
          info.limits.timestamp_valid_bits = qs[q].timestampValidBits;
        }
      if (found) devices_.push_back(std::move(info));
    }
    if (devices_.empty())
      why_ = "no Vulkan 1.2 device with compute queues and VK_KHR_push_descriptor (" +
             std::to_string(n) + " devices found)";
  }

  void* lib_ = nullptr;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  std::vector<physical_info> devices_;
  std::string why_;
};

// The usable devices; `why` says why there are none.
inline std::vector<physical_info> enumerate_devices(std::string* why) {
  const instance& i = instance::get();
  if (why) *why = i.why();
  return i.devices();
}

} // namespace kiln::jit::vk
