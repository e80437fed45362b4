#pragma once
// What every Vulkan test binary shares: the device, or a clear skip where there is none;
// the Khronos validation layer on for the whole run, a validation message failing the test
// case during which it appeared; and a fresh kernel disk cache per run, so that a kernel a
// test makes is compiled (and counted) rather than found where an earlier run left it.
// Include this header in exactly one translation unit per test binary (it registers a
// Catch listener, and must come before any other include of Catch: the listener's base
// class is only declared with CATCH_CONFIG_EXTERNAL_INTERFACES).
#define CATCH_CONFIG_EXTERNAL_INTERFACES
#include "device_support.hpp"

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

// kiln::jit::vk::validation_message_count() and validation_messages().
#include "kiln/jit/vulkan/backend.hpp"
#define KILN_TEST_VALIDATION_HEADER 1

namespace vulkan_test {

// The environment the backend reads when it opens a device, set before any test runs.
struct environment {
  device_test::fresh_cache cache{"kiln-vulkan-test-"};
  environment() {
    ::setenv("KILN_VK_VALIDATION", "1", 1);
    ::setenv("KILN_VALIDATE_SPIRV", "1", 1); // every generated module through spirv-val
  }
};

// Made during static initialization of the including translation unit, so before main().
// (Statics the backend makes when a device opens are made later, so they are destroyed
// before this one removes the cache directory.)
inline environment& env() {
  static environment e;
  return e;
}
inline const bool environment_ready = (env(), true);

#ifdef KILN_TEST_VALIDATION_HEADER
inline std::size_t validation_count() { return kiln::jit::vk::validation_message_count(); }
inline std::vector<std::string> validation_texts() { return kiln::jit::vk::validation_messages(); }
#else
inline std::size_t validation_count() {
  return &kiln::jit::vk::validation_message_count ? kiln::jit::vk::validation_message_count() : 0;
}
inline std::vector<std::string> validation_texts() {
  return &kiln::jit::vk::validation_messages ? kiln::jit::vk::validation_messages()
                                             : std::vector<std::string>{};
}
#endif

// The last `n` validation messages, one per line.
inline std::string last_messages(std::size_t n) {
  const auto all = validation_texts();
  std::string s;
  for (std::size_t i = all.size() - std::min(n, all.size()); i < all.size(); ++i)
    s += "\n  " + all[i];
  return s;
}

// Fails the test case during which the validation layer reported anything. The check
// runs when the test case's own section ends: testCaseEnded comes after Catch has tallied
// the case, so a failure recorded there would not fail it (nor the run's exit status).
struct validation_listener : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  int depth = 0;
  std::size_t at_start = 0;

  void sectionStarting(Catch::SectionInfo const& info) override {
    if (depth++ == 0) at_start = validation_count();
    TestEventListenerBase::sectionStarting(info);
  }
  void sectionEnded(Catch::SectionStats const& stats) override {
    if (--depth == 0) {
      const std::size_t now = validation_count();
      if (now != at_start)
        FAIL_CHECK("the Vulkan validation layer reported "
                   << now - at_start << " message(s) in \"" << stats.sectionInfo.name
                   << "\":" << last_messages(now - at_start));
    }
    TestEventListenerBase::sectionEnded(stats);
  }
  // Messages outside any test case (at device creation before the first one, say).
  void testRunEnded(Catch::TestRunStats const& stats) override {
    if (const std::size_t n = validation_count(); n > 0)
      std::cerr << "Vulkan validation messages in this run: " << n << last_messages(n) << "\n";
    TestEventListenerBase::testRunEnded(stats);
  }
};
CATCH_REGISTER_LISTENER(validation_listener)

inline const device_test::lookup& find_vulkan() {
  static const auto found = device_test::find_device({kiln::device_kind::vulkan, 0});
  return found;
}

} // namespace vulkan_test

// The Vulkan device the tests run on, or nullptr after a warning saying why there is none
// (then the test returns: it is skipped, visibly). KILN_REQUIRE_VULKAN=1 turns the skip
// into a failure, for machines that must have the device.
inline const kiln::device* vulkan_or_skip() {
  if (device_test::left_out("vulkan")) return nullptr;
  return device_test::device_or_skip(vulkan_test::find_vulkan(), "KILN_REQUIRE_VULKAN",
                                     "no Vulkan device");
}
