#pragma once
// Messages of the Khronos validation layer (KILN_VK_VALIDATION=1): every warning and error
// is counted, the last ones kept, and each printed to stderr, so that a test can fail on
// any of them and a user sees them as they happen.
#include "kiln/jit/vulkan/functions.hpp"

#include <cstdio>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

namespace kiln::jit::vk {

class validation_log {
public:
  static constexpr std::size_t kept = 50;

  // Made before the instance (which reports into it up to its destruction at exit), so a
  // function-local static destroyed after it.
  static validation_log& instance() {
    static validation_log log;
    return log;
  }
  void add(std::string message) {
    std::lock_guard lock(mutex_);
    ++count_;
    std::fprintf(stderr, "kiln[vulkan validation] %s\n", message.c_str());
    if (last_.size() == kept) last_.pop_front();
    last_.push_back(std::move(message));
  }
  std::size_t count() const {
    std::lock_guard lock(mutex_);
    return count_;
  }
  std::vector<std::string> messages() const {
    std::lock_guard lock(mutex_);
    return {last_.begin(), last_.end()};
  }

  // While set, this thread's messages go to the sink instead: instance creation holds them,
  // and if it fails they become part of the reason (the loader's "Found no drivers!"), not
  // messages counted against a run that merely has no device.
  static std::vector<std::string>*& capture() {
    thread_local std::vector<std::string>* sink = nullptr;
    return sink;
  }

private:
  validation_log() = default;
  mutable std::mutex mutex_;
  std::size_t count_ = 0;
  std::deque<std::string> last_;
};

// Warnings and errors reported so far in this process (0 when validation is off).
inline std::size_t validation_message_count() { return validation_log::instance().count(); }
// The last validation_log::kept of them, oldest first.
inline std::vector<std::string> validation_messages() {
  return validation_log::instance().messages();
}

inline VKAPI_ATTR VkBool32 VKAPI_CALL on_validation_message(
    VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT,
    const VkDebugUtilsMessengerCallbackDataEXT* data, void*) {
  const char* level =
      (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) ? "error" : "warning";
  std::string text = std::string(level) + ": ";
  if (data && data->pMessageIdName) text += std::string("[") + data->pMessageIdName + "] ";
  text += data && data->pMessage ? data->pMessage : "(no message)";
  if (auto* sink = validation_log::capture())
    sink->push_back(std::move(text));
  else
    validation_log::instance().add(std::move(text));
  return VK_FALSE; // the call that triggered it proceeds, as without the layer
}

// What the messenger listens to: warnings and errors of every type.
inline VkDebugUtilsMessengerCreateInfoEXT validation_messenger_info() {
  auto info = make<VkDebugUtilsMessengerCreateInfoEXT>(
      VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT);
  info.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                         VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  info.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  info.pfnUserCallback = on_validation_message;
  return info;
}

} // namespace kiln::jit::vk
