#pragma once
// Helpers shared by the disk-cache tests: per-run random draws (Catch's --rng-seed), a
// scratch folder per test, and looking at the folder independently of the cache.
#include <kiln/jit/cache/hash.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

namespace disk_cache_test {

namespace fs = std::filesystem;
using kiln::jit::hash128;

inline std::mt19937_64& rng() {
  static std::mt19937_64 g(Catch::rngSeed());
  return g;
}

inline std::size_t draw(std::size_t lo, std::size_t hi) {
  return std::uniform_int_distribution<std::size_t>(lo, hi)(rng());
}

inline std::vector<std::byte> random_bytes(std::size_t n, std::mt19937_64& g = rng()) {
  std::vector<std::byte> v(n);
  for (auto& b : v)
    b = static_cast<std::byte>(g() & 0xff);
  return v;
}

inline hash128 random_key() { return {rng()(), rng()()}; }

inline std::string random_identity() {
  return "vulkan:" + std::to_string(rng()() % 100000) + " driver " + std::to_string(draw(0, 99));
}

// A fresh folder under the system temp folder, removed (with whatever is inside) at the end.
struct temp_dir {
  fs::path path;
  temp_dir() {
    static std::atomic<int> counter{0};
    path = fs::temp_directory_path() /
           ("kiln-test-disk-cache-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) +
            "-" + hash128{rng()(), 0}.hex().substr(16));
    fs::create_directories(path);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  ~temp_dir() {
    std::error_code ec;
    fs::permissions(path, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path, ec);
  }
  std::string str() const { return path.string(); }
};

// Regular files under root whose name ends with suffix, found independently of the cache.
inline std::vector<fs::path> files_ending(const fs::path& root, std::string_view suffix) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(root))
    if (e.is_regular_file() && e.path().filename().string().ends_with(suffix))
      out.push_back(e.path());
  return out;
}

inline std::uint64_t bytes_on_disk(const fs::path& root) {
  std::uint64_t total = 0;
  for (const auto& p : files_ending(root, ".kc"))
    total += fs::file_size(p);
  return total;
}

inline std::vector<std::byte> read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::vector<char> c((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(c.size());
  if (!c.empty()) std::memcpy(out.data(), c.data(), c.size());
  return out;
}

inline void write_all(const fs::path& p, std::span<const std::byte> bytes) {
  fs::create_directories(p.parent_path());
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// Sets (or unsets, for nullptr) an environment variable for one scope.
struct env_override {
  std::string name;
  std::optional<std::string> saved;
  env_override(std::string n, const char* value) : name(std::move(n)) {
    if (const char* old = std::getenv(name.c_str())) saved = old;
    if (value)
      ::setenv(name.c_str(), value, 1);
    else
      ::unsetenv(name.c_str());
  }
  ~env_override() {
    if (saved)
      ::setenv(name.c_str(), saved->c_str(), 1);
    else
      ::unsetenv(name.c_str());
  }
};

} // namespace disk_cache_test
