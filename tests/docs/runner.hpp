#pragma once
// Runs the blocks of one Markdown file that tests/docs/extract.cpp turned into functions:
// each in turn, named by its file and line before it runs (so a crash shows which block),
// an exception reported at that line and counted as a failure. A block that names a device
// runs only where kiln::devices() has it usable; elsewhere it is skipped with the reason
// (KILN_REQUIRE_VULKAN=1 makes a missing vulkan:0 a failure). The Vulkan validation layer is
// on, and a message during a block fails it. `doc_x <line>` runs the block at that line only.
#include <kiln/kiln.hpp>

#include <cstdlib>
#include <exception>
#include <filesystem>
#include <iostream>
#include <string>
#include <system_error>

#include "kiln/jit/tune.hpp"
#include "kiln/jit/vulkan/backend.hpp"

namespace kiln_doc {

struct block {
  int line; // the first line of the code in the Markdown file; 0 ends the list
  void (*run)();
  const char* device; // the device the block names, or nullptr
};

// A fresh kernel disk cache for the run (removed at exit), as the other GPU tests use.
struct scratch_cache {
  std::string dir;
  scratch_cache() {
    std::error_code ec;
    std::string pattern = (std::filesystem::temp_directory_path(ec) / "kiln-doc-XXXXXX").string();
    if (!ec && ::mkdtemp(pattern.data())) {
      dir = pattern;
      ::setenv("KILN_CACHE_DIR", dir.c_str(), 1);
    }
  }
  ~scratch_cache() {
    std::error_code ec;
    if (!dir.empty()) std::filesystem::remove_all(dir, ec);
  }
  scratch_cache(const scratch_cache&) = delete;
  scratch_cache& operator=(const scratch_cache&) = delete;
};

// Empty when `name` is usable here, else why not.
inline std::string why_unusable(const std::string& name) {
  for (const auto& d : kiln::devices())
    if (d.device.str() == name) return d.available ? "" : d.description;
  return name + " is not among kiln::devices()";
}

inline int run(const char* file, const block* blocks, int argc, char** argv) {
  ::setenv("KILN_VK_VALIDATION", "1", 1);
  ::setenv("KILN_VALIDATE_SPIRV", "1", 1);
  const scratch_cache cache;
  const int only = argc > 1 ? std::atoi(argv[1]) : 0;
  int ran = 0, skipped = 0, failed = 0;
  for (const block* b = blocks; b->line != 0; ++b) {
    if (only && b->line != only) continue;
    const std::string at = std::string(file) + ":" + std::to_string(b->line);
    if (b->device) {
      if (const std::string why = why_unusable(b->device); !why.empty()) {
        const char* req = std::getenv("KILN_REQUIRE_VULKAN");
        const bool must = req && std::string(req) == "1" && std::string(b->device) == "vulkan:0";
        std::cout << (must ? "FAILED " : "SKIPPED ") << at << ": needs " << b->device << ": " << why
                  << std::endl;
        (must ? failed : skipped) += 1;
        continue;
      }
    }
    std::cout << "--- " << at << std::endl;
    const std::size_t messages = kiln::jit::vk::validation_message_count();
    try {
      b->run();
      if (b->device) kiln::synchronize(kiln::device(b->device));
    } catch (const std::exception& e) {
      std::cout << std::endl;
      std::cout << at << ": the block threw: " << e.what() << std::endl;
      ++failed;
      continue;
    }
    std::cout << std::endl;
    if (const std::size_t n = kiln::jit::vk::validation_message_count() - messages) {
      std::cout << at << ": " << n << " Vulkan validation message(s) during the block" << std::endl;
      ++failed;
      continue;
    }
    ++ran;
  }
  std::cout << file << ": " << ran << " block(s) passed, " << skipped << " skipped, " << failed
            << " failed" << std::endl;
  if (only && ran + skipped + failed == 0) {
    std::cout << file << ": no block starts at line " << only << std::endl;
    return 1;
  }
  return failed ? 1 : 0;
}

} // namespace kiln_doc
