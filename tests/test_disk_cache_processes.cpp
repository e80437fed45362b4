// kiln::jit::disk_cache shared by two processes x three threads at once (the test forks):
// stores and loads of overlapping keys race, with and without eviction; afterwards every
// entry verifies and no temp file is left behind.
#include <kiln/jit/cache/disk_cache.hpp>

#include "disk_cache_support.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <csignal>
#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;
using kiln::jit::disk_cache;
using kiln::jit::hash128;
using namespace disk_cache_test;

namespace {

// The payload every writer stores for key i, so whoever wins a race, the content is known.
std::vector<std::byte> payload_for(std::size_t i) {
  std::mt19937_64 g(i * 7919 + 1);
  const std::size_t n = i == 0 ? 0 : i == 1 ? (1u << 20) + 12345 : g() % 40000;
  return random_bytes(n, g);
}

// Threads sharing one cache object, each visiting every key in its own random order, twice:
// load and verify, or store on a miss (and sometimes store anyway, to race readers). Returns
// how many loads returned wrong content. Runs in a forked child too: no Catch macros.
int fill_concurrently(const std::string& dir, std::uint64_t bound, std::size_t keys,
                      std::uint64_t seed, bool every_load_must_hit_after_store) {
  disk_cache cache(dir, bound);
  if (!cache.enabled()) return 1000;
  std::vector<hash128> key(keys);
  for (std::size_t i = 0; i < keys; ++i)
    key[i] = kiln::jit::hasher().add(std::uint64_t{i}).digest();
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&, t] {
      std::mt19937_64 g(seed * 31 + static_cast<std::uint64_t>(t));
      std::vector<std::size_t> order(keys);
      for (std::size_t i = 0; i < keys; ++i)
        order[i] = i;
      for (int round = 0; round < 2; ++round) {
        std::shuffle(order.begin(), order.end(), g);
        for (const std::size_t i : order) {
          const auto loaded = cache.load(key[i], "identity");
          if (loaded && *loaded != payload_for(i)) ++failures;
          if (!loaded || g() % 4 == 0) {
            cache.store(key[i], "identity", payload_for(i));
            if (every_load_must_hit_after_store && cache.load(key[i], "identity") != payload_for(i))
              ++failures;
          }
        }
      }
    });
  for (auto& th : threads)
    th.join();
  return failures;
}

// Runs fill_concurrently in this process and a forked child at the same time; returns the
// failures of both (the child's exit status), or fails the test if the child does not end.
int fill_from_two_processes(const std::string& dir, std::uint64_t bound, std::size_t keys,
                            bool must_hit) {
  int go[2];
  REQUIRE(::pipe(go) == 0);
  const std::uint64_t seed = rng()();
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) { // the second process: wait for the start signal, then race the parent
    ::close(go[1]);
    char c;
    const bool started = ::read(go[0], &c, 1) == 1;
    int failures = 101;
    try { // an exception must not return into Catch in this copy of the test process
      if (started)
        failures = std::min(fill_concurrently(dir, bound, keys, seed + 1, must_hit), 100);
    } catch (...) {
      failures = 102;
    }
    ::_exit(failures);
  }
  ::close(go[0]);
  const bool signalled = ::write(go[1], "x", 1) == 1;
  ::close(go[1]);
  const int mine = fill_concurrently(dir, bound, keys, seed, must_hit);
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (::waitpid(child, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(child, SIGKILL);
      ::waitpid(child, &status, 0);
      FAIL("the second process did not finish in 120 s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  REQUIRE(signalled);
  REQUIRE(WIFEXITED(status));
  return mine + WEXITSTATUS(status);
}

} // namespace

TEST_CASE("disk_cache: two processes x three threads fill one folder at once", "[disk_cache]") {
  temp_dir dir;
  const std::size_t keys = 24;
  CHECK(fill_from_two_processes(dir.str(), disk_cache::default_max_bytes(), keys, true) == 0);
  // Afterwards every entry loads and verifies, and no temp file is left behind.
  disk_cache cache(dir.str());
  for (std::size_t i = 0; i < keys; ++i) {
    INFO("key " << i);
    CHECK(cache.load(kiln::jit::hasher().add(std::uint64_t{i}).digest(), "identity") ==
          payload_for(i));
  }
  CHECK(files_ending(dir.path, ".kc").size() == keys);
  CHECK(files_ending(dir.path, ".tmp").empty());
  CHECK(cache.total_bytes() == bytes_on_disk(dir.path));
}

TEST_CASE("disk_cache: two processes x three threads evicting at once", "[disk_cache]") {
  temp_dir dir;
  const std::uint64_t bound = 300000; // room for a fraction of the keys: constant eviction
  // The 1 MiB payload never fits; every load that hits must still verify.
  CHECK(fill_from_two_processes(dir.str(), bound, 40, false) == 0);
  CHECK(files_ending(dir.path, ".tmp").empty());
  // Each process saw its own stores; a fresh view rescans on its first store over the bound.
  disk_cache cache(dir.str(), bound);
  CHECK(cache.total_bytes() == bytes_on_disk(dir.path));
  cache.store(random_key(), "identity", random_bytes(10));
  CHECK(bytes_on_disk(dir.path) <= bound);
  CHECK(cache.total_bytes() == bytes_on_disk(dir.path));
  for (std::size_t i = 0; i < 40; ++i) {
    const auto loaded = cache.load(kiln::jit::hasher().add(std::uint64_t{i}).digest(), "identity");
    if (loaded) CHECK(*loaded == payload_for(i));
  }
}
