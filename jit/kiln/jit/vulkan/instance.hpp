#pragma once
// The Vulkan loader opened with dlopen at run time, and the VkInstance: one per process,
// made on first use, listing the compute-capable devices ("vulkan:N" is the N-th). Where
// the loader or a driver is missing, the backend is unavailable and says why; nothing
// aborts. KILN_VK_VALIDATION=1 turns on the Khronos validation layer with a messenger that
// counts every warning and error (validation.hpp); =sync adds synchronization validation.
#include "kiln/jit/vulkan/device_info.hpp"
#include "kiln/jit/vulkan/validation.hpp"

#include <cstdlib>
#include <dlfcn.h>
#include <memory>
#include <string>
#include <vector>

namespace kiln::jit::vk {

struct instance_options {
  // Tried in order with dlopen; a test names a missing one to see the unavailable path.
  std::vector<std::string> libraries{"libvulkan.so.1", "libvulkan.so"};
  bool validation = false;
  bool synchronization_validation = false; // implies validation
  std::string validation_layer = "VK_LAYER_KHRONOS_validation";

  // KILN_VK_VALIDATION=1 (or =sync) from the environment.
  static instance_options from_environment() {
    instance_options o;
    const char* v = std::getenv("KILN_VK_VALIDATION");
    const std::string s = v ? v : "";
    o.synchronization_validation = s == "sync";
    o.validation = s == "1" || o.synchronization_validation;
    return o;
  }
};

class instance {
public:
  // Opens the loader, creates the instance and lists its devices; a kiln::error("vulkan",
  // ...) says what is missing (the loader, a Vulkan 1.1 loader, the validation layer).
  explicit instance(const instance_options& options) {
    try {
      open(options);
    } catch (...) {
      close();
      throw;
    }
  }
  ~instance() { close(); }
  instance(const instance&) = delete;
  instance& operator=(const instance&) = delete;

  VkInstance handle() const { return instance_; }
  std::uint32_t api_version() const { return api_version_; }
  const instance_functions& functions() const { return fn_; }
  const std::vector<physical_info>& devices() const { return devices_; }
  // Why devices() is empty, or which devices were left out ("" when none was).
  const std::string& skipped() const { return skipped_; }
  bool validation() const { return validation_; }
  const std::string& library() const { return library_name_; }

private:
  void open(const instance_options& options) {
    std::string tried;
    for (const auto& name : options.libraries) {
      library_ = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (library_) {
        library_name_ = name;
        break;
      }
      const char* e = dlerror();
      tried += (tried.empty() ? "" : "; ") + name + ": " + (e ? e : "not found");
    }
    if (!library_)
      throw error("vulkan", "the Vulkan loader is not installed",
                  tried + " (Debian: libvulkan1 and a driver such as mesa-vulkan-drivers)");
    auto get_proc =
        reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(library_, "vkGetInstanceProcAddr"));
    if (!get_proc)
      throw error("vulkan", "the Vulkan loader has no vkGetInstanceProcAddr", library_name_);
#define KILN_VK_LOAD_GLOBAL(f)                                                                     \
  global_.f = reinterpret_cast<PFN_##f>(get_proc(VK_NULL_HANDLE, #f));                             \
  if (!global_.f) throw error("vulkan", "the Vulkan loader lacks " #f, library_name_);
    KILN_VK_GLOBAL_FUNCTIONS(KILN_VK_LOAD_GLOBAL)
#undef KILN_VK_LOAD_GLOBAL
    auto version = reinterpret_cast<PFN_vkEnumerateInstanceVersion>(
        get_proc(VK_NULL_HANDLE, "vkEnumerateInstanceVersion"));
    std::uint32_t loader_api = VK_API_VERSION_1_0;
    if (version) version(&loader_api);
    if (loader_api < VK_API_VERSION_1_1)
      throw error("vulkan", "the Vulkan loader supports only Vulkan 1.0 (kiln needs 1.1)",
                  library_name_);
    api_version_ = loader_api >= VK_API_VERSION_1_2 ? VK_API_VERSION_1_2 : VK_API_VERSION_1_1;

    validation_ = options.validation || options.synchronization_validation;
    std::vector<const char*> layers, extensions;
    if (validation_) {
      require_layer(options.validation_layer);
      layers.push_back(options.validation_layer.c_str());
      extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
      if (options.synchronization_validation)
        extensions.push_back(VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME);
    }
    auto app = make<VkApplicationInfo>(VK_STRUCTURE_TYPE_APPLICATION_INFO);
    app.pApplicationName = "kiln";
    app.pEngineName = "kiln";
    app.apiVersion = api_version_;
    auto ci = make<VkInstanceCreateInfo>(VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO);
    ci.pApplicationInfo = &app;
    ci.enabledLayerCount = static_cast<std::uint32_t>(layers.size());
    ci.ppEnabledLayerNames = layers.data();
    ci.enabledExtensionCount = static_cast<std::uint32_t>(extensions.size());
    ci.ppEnabledExtensionNames = extensions.data();
    // Chained into the create info, the messenger also hears instance creation/destruction.
    auto messenger_info = validation_messenger_info();
    const VkValidationFeatureEnableEXT sync_feature =
        VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT;
    auto features = make<VkValidationFeaturesEXT>(VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT);
    features.enabledValidationFeatureCount = 1;
    features.pEnabledValidationFeatures = &sync_feature;
    if (validation_) {
      ci.pNext = &messenger_info;
      if (options.synchronization_validation) messenger_info.pNext = &features;
    }
    create_instance(ci);

#define KILN_VK_LOAD_INSTANCE(f)                                                                   \
  fn_.f = reinterpret_cast<PFN_##f>(get_proc(instance_, #f));                                      \
  if (!fn_.f) throw error("vulkan", "the Vulkan loader lacks " #f, library_name_);
    KILN_VK_INSTANCE_FUNCTIONS(KILN_VK_LOAD_INSTANCE)
#undef KILN_VK_LOAD_INSTANCE
    if (validation_) {
      fn_.vkCreateDebugUtilsMessengerEXT = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
          get_proc(instance_, "vkCreateDebugUtilsMessengerEXT"));
      fn_.vkDestroyDebugUtilsMessengerEXT = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
          get_proc(instance_, "vkDestroyDebugUtilsMessengerEXT"));
      if (!fn_.vkCreateDebugUtilsMessengerEXT || !fn_.vkDestroyDebugUtilsMessengerEXT)
        throw error("vulkan", "VK_EXT_debug_utils is enabled but its functions are missing",
                    library_name_);
      messenger_info.pNext = nullptr;
      check(fn_.vkCreateDebugUtilsMessengerEXT(instance_, &messenger_info, nullptr, &messenger_),
            "vkCreateDebugUtilsMessengerEXT", "");
    }
    enumerate();
  }

  // vkCreateInstance, with the messages it reports held back: on failure they are the
  // details of the error, on success they are logged as usual.
  void create_instance(const VkInstanceCreateInfo& ci) {
    std::vector<std::string> held;
    validation_log::capture() = &held;
    const VkResult r = global_.vkCreateInstance(&ci, nullptr, &instance_);
    validation_log::capture() = nullptr;
    if (r != VK_SUCCESS) {
      instance_ = VK_NULL_HANDLE;
      std::string details = std::string(result_name(r)) + " (" + std::to_string(r) + ")";
      for (const auto& m : held)
        details += "; " + m;
      throw error("vulkan", "vkCreateInstance failed", details);
    }
    for (auto& m : held)
      validation_log::instance().add(std::move(m));
  }

  void require_layer(const std::string& layer) {
    std::uint32_t n = 0;
    check(global_.vkEnumerateInstanceLayerProperties(&n, nullptr),
          "vkEnumerateInstanceLayerProperties", "");
    std::vector<VkLayerProperties> have(n);
    check(global_.vkEnumerateInstanceLayerProperties(&n, have.data()),
          "vkEnumerateInstanceLayerProperties", "");
    std::string found;
    for (std::uint32_t i = 0; i < n; ++i) {
      if (layer == have[i].layerName) return;
      found += (found.empty() ? "" : ", ") + std::string(have[i].layerName);
    }
    throw error("vulkan", "KILN_VK_VALIDATION is set but the validation layer is not installed",
                layer + " not found (Debian: vulkan-validationlayers); installed layers: " +
                    (found.empty() ? "none" : found));
  }

  void enumerate() {
    std::uint32_t n = 0;
    check(fn_.vkEnumeratePhysicalDevices(instance_, &n, nullptr), "vkEnumeratePhysicalDevices", "");
    std::vector<VkPhysicalDevice> handles(n);
    if (n) {
      const VkResult r = fn_.vkEnumeratePhysicalDevices(instance_, &n, handles.data());
      if (r != VK_INCOMPLETE) check(r, "vkEnumeratePhysicalDevices", "");
      handles.resize(n);
    }
    for (VkPhysicalDevice pd : handles) {
      std::string why_not;
      if (auto info = describe_physical_device(fn_, pd, api_version_, why_not))
        devices_.push_back(std::move(*info));
      else
        skipped_ += (skipped_.empty() ? "" : "; ") + why_not;
    }
    if (handles.empty()) skipped_ = "no Vulkan driver reports a device (is an ICD installed?)";
  }

  void close() noexcept {
    if (instance_ != VK_NULL_HANDLE) {
      if (messenger_ != VK_NULL_HANDLE)
        fn_.vkDestroyDebugUtilsMessengerEXT(instance_, messenger_, nullptr);
      fn_.vkDestroyInstance(instance_, nullptr);
    }
    instance_ = VK_NULL_HANDLE;
    messenger_ = VK_NULL_HANDLE;
    if (library_) dlclose(library_);
    library_ = nullptr;
  }

  void* library_ = nullptr;
  std::string library_name_;
  global_functions global_;
  instance_functions fn_;
  std::uint32_t api_version_ = 0;
  bool validation_ = false;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  std::vector<physical_info> devices_;
  std::string skipped_;
};

// The process's instance, or why there is none. A function-local static: made on first use
// (thread-safe), destroyed at exit after every device context (context.hpp makes its
// registry after this, so that registry is destroyed first) and before the validation log.
struct process_vulkan {
  std::unique_ptr<vk::instance> instance;
  std::string why_unavailable;
};
inline const process_vulkan& process_instance() {
  static const process_vulkan p = [] {
    validation_log::instance(); // outlives the instance, which reports into it at exit
    process_vulkan r;
    try {
      r.instance = std::make_unique<vk::instance>(instance_options::from_environment());
    } catch (const std::exception& e) {
      r.why_unavailable = e.what();
    }
    return r;
  }();
  return p;
}

// The compute-capable devices of this process ("vulkan:N" is entry N). When there is none,
// `why` (if given) says why: no loader, no driver, no usable device; else it is cleared.
inline std::vector<physical_info> enumerate_devices(std::string* why) {
  const process_vulkan& p = process_instance();
  if (!p.instance) {
    if (why) *why = p.why_unavailable;
    return {};
  }
  if (why) *why = p.instance->devices().empty() ? p.instance->skipped() : std::string();
  return p.instance->devices();
}

// Whether an instance with these options can be made: "" if so, else the reason. It is made
// and destroyed at once (the process's instance is not touched).
inline std::string probe_instance(const instance_options& options) {
  try {
    vk::instance probe(options);
    return {};
  } catch (const std::exception& e) {
    return e.what();
  }
}

} // namespace kiln::jit::vk
