// kiln::jit::disk_cache: round trips of random payloads, every kind of bad file is a miss
// and is replaced, LRU eviction against a reference model, memory-only degradation and the
// environment. Two processes at once: test_disk_cache_processes.cpp.
#include <kiln/jit/cache/disk_cache.hpp>

#include "disk_cache_support.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <list>
#include <map>
#include <string>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

namespace fs = std::filesystem;
using kiln::jit::disk_cache;
using kiln::jit::hash128;
using namespace disk_cache_test;

TEST_CASE("disk_cache: random payloads round-trip, sharded by key", "[disk_cache]") {
  temp_dir dir;
  disk_cache cache(dir.str());
  REQUIRE(cache.enabled());
  CHECK(cache.reason().empty());
  CHECK(cache.dir() == dir.str());
  CHECK(cache.max_bytes() == 256u << 20);
  CHECK(cache.total_bytes() == 0);

  std::vector<std::size_t> sizes{0, 1, 15, 16, 17, (1u << 20) + draw(1, 100000)};
  for (int i = 0; i < 10; ++i)
    sizes.push_back(draw(0, 70000));
  std::map<std::string, std::pair<hash128, std::vector<std::byte>>> stored;
  const std::string identity = random_identity();
  for (const std::size_t n : sizes) {
    const hash128 key = random_key();
    auto payload = random_bytes(n);
    CHECK_FALSE(cache.load(key, identity)); // an unknown key misses
    cache.store(key, identity, payload);
    stored[key.hex()] = {key, std::move(payload)};
  }
  for (const auto& [hex, entry] : stored) {
    INFO("key " << hex << ", " << entry.second.size() << " bytes");
    const auto loaded = cache.load(entry.first, identity);
    REQUIRE(loaded);
    CHECK(*loaded == entry.second);
    // <dir>/<first two hex digits>/<hex>.kc
    const fs::path file = dir.path / hex.substr(0, 2) / (hex + ".kc");
    CHECK(cache.path_of(entry.first) == file.string());
    CHECK(fs::is_regular_file(file));
  }
  const auto c = cache.counters();
  CHECK(c.hits == sizes.size());
  CHECK(c.misses == sizes.size());
  CHECK(c.stores == sizes.size());
  CHECK(c.evictions == 0);
  CHECK(c.rejected == 0);
  CHECK(files_ending(dir.path, ".kc").size() == sizes.size());
  CHECK(files_ending(dir.path, ".tmp").empty());
  CHECK(cache.total_bytes() == bytes_on_disk(dir.path));

  // Another process's view: the scan at open finds the same total, every entry loads.
  disk_cache reopened(dir.str());
  CHECK(reopened.total_bytes() == bytes_on_disk(dir.path));
  for (const auto& [hex, entry] : stored)
    CHECK(reopened.load(entry.first, identity) == entry.second);
  // The same key under another identity (another device or driver) is a foreign file.
  const auto& first = stored.begin()->second;
  CHECK_FALSE(reopened.load(first.first, identity + "x"));
  CHECK(reopened.counters().rejected == 1);
  // Storing over an entry replaces it and keeps the tracked total exact.
  const auto replacement = random_bytes(draw(0, 5000));
  reopened.store(first.first, identity, replacement);
  CHECK(reopened.load(first.first, identity) == replacement);
  CHECK(reopened.total_bytes() == bytes_on_disk(dir.path));
}

TEST_CASE("disk_cache: a file with one corrupt byte is a miss, then replaced", "[disk_cache]") {
  temp_dir dir;
  disk_cache cache(dir.str());
  const std::string identity = random_identity();
  const hash128 key = random_key();
  const auto payload = random_bytes(draw(1, 3000));
  cache.store(key, identity, payload);
  const fs::path file = cache.path_of(key);
  const auto good = read_all(file);
  REQUIRE(good.size() == 48 + identity.size() + payload.size());
  // Every header byte (magic, version, lengths, key, checksum), then random identity and
  // payload positions.
  std::vector<std::size_t> positions;
  for (std::size_t i = 0; i < 48; ++i)
    positions.push_back(i);
  for (int i = 0; i < 6; ++i)
    positions.push_back(48 + draw(0, identity.size() - 1));
  for (int i = 0; i < 12; ++i)
    positions.push_back(48 + identity.size() + draw(0, payload.size() - 1));
  std::uint64_t rejected = 0;
  for (const std::size_t at : positions) {
    INFO("byte " << at << " of " << good.size());
    auto bad = good;
    bad[at] ^= static_cast<std::byte>(draw(1, 255));
    write_all(file, bad);
    CHECK_FALSE(cache.load(key, identity));
    CHECK(cache.counters().rejected == ++rejected);
    cache.store(key, identity, payload);
    CHECK(read_all(file) == good);
    CHECK(cache.load(key, identity) == payload);
  }
  CHECK(files_ending(dir.path, ".tmp").empty());
}

TEST_CASE("disk_cache: truncated, zero-length, garbage and foreign files are misses",
          "[disk_cache]") {
  temp_dir dir;
  disk_cache cache(dir.str());
  const std::string identity = random_identity();
  const hash128 key = random_key(), other = random_key();
  const auto payload = random_bytes(draw(100, 5000));
  const auto other_payload = random_bytes(payload.size()); // same size: only the key differs
  cache.store(key, identity, payload);
  cache.store(other, identity, other_payload);
  const fs::path file = cache.path_of(key);
  const auto good = read_all(file);
  std::uint64_t rejected = 0;
  auto expect_miss_then_replaced = [&](const std::vector<std::byte>& bad) {
    write_all(file, bad);
    CHECK_FALSE(cache.load(key, identity));
    CHECK(cache.counters().rejected == ++rejected);
    cache.store(key, identity, payload);
    CHECK(cache.load(key, identity) == payload);
  };
  SECTION("truncated anywhere, to zero bytes included") {
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{47}, std::size_t{48},
                          48 + identity.size(), good.size() - 1, draw(0, good.size() - 1)}) {
      INFO("truncated to " << n << " of " << good.size() << " bytes");
      expect_miss_then_replaced(std::vector<std::byte>(good.begin(), good.begin() + n));
    }
  }
  SECTION("one byte appended") {
    auto longer = good;
    longer.push_back(std::byte{0});
    expect_miss_then_replaced(longer);
  }
  SECTION("another key's file copied over it") {
    expect_miss_then_replaced(read_all(cache.path_of(other)));
    CHECK(cache.load(other, identity) == other_payload);
  }
  SECTION("garbage of random sizes, with and without the right magic") {
    for (int i = 0; i < 8; ++i) {
      auto garbage = random_bytes(draw(0, 3 * good.size()));
      if (i % 2 == 1 && garbage.size() >= 8) std::memcpy(garbage.data(), "kilnJITc", 8);
      expect_miss_then_replaced(garbage);
    }
  }
  SECTION("another format version") {
    auto bad = good;
    bad[8] = static_cast<std::byte>(2); // version 2, little-endian
    expect_miss_then_replaced(bad);
  }
  SECTION("a folder where the file should be: a miss, and a store fails quietly") {
    fs::remove(file);
    fs::create_directory(file);
    CHECK_FALSE(cache.load(key, identity));
    const auto stores = cache.counters().stores;
    cache.store(key, identity, payload);
    CHECK(cache.counters().stores == stores);
    CHECK_FALSE(cache.load(key, identity));
    CHECK(files_ending(dir.path, ".tmp").empty());
  }
  CHECK(files_ending(dir.path, ".tmp").empty());
}

TEST_CASE("disk_cache: LRU eviction drops the least recently loaded entries", "[disk_cache]") {
  temp_dir dir;
  const std::string identity = "id";
  const std::size_t entry = 48 + identity.size() + 1000;
  disk_cache cache(dir.str(), 3 * entry + entry / 2); // three entries fit, not four
  std::vector<hash128> k;
  std::vector<std::vector<std::byte>> p;
  for (int i = 0; i < 5; ++i)
    k.push_back(random_key()), p.push_back(random_bytes(1000));
  for (int i = 0; i < 3; ++i)
    cache.store(k[i], identity, p[i]);
  CHECK(cache.load(k[0], identity) == p[0]); // 0 is now the most recently used
  cache.store(k[3], identity, p[3]);         // over the bound: 1 goes
  CHECK(cache.counters().evictions == 1);
  CHECK_FALSE(fs::exists(cache.path_of(k[1])));
  CHECK(cache.load(k[2], identity) == p[2]); // order now: 0, 3, 2
  cache.store(k[4], identity, p[4]);         // 0 goes
  CHECK_FALSE(cache.load(k[0], identity));
  CHECK_FALSE(cache.load(k[1], identity));
  for (int i : {2, 3, 4})
    CHECK(cache.load(k[i], identity) == p[i]);
  CHECK(cache.counters().evictions == 2);
  CHECK(cache.total_bytes() == 3 * entry);
  CHECK(bytes_on_disk(dir.path) == 3 * entry);
}

TEST_CASE("disk_cache: eviction matches a reference LRU model over random operations",
          "[disk_cache]") {
  temp_dir dir;
  const std::string identity = random_identity();
  const std::uint64_t bound = 40000;
  disk_cache cache(dir.str(), bound);
  // Unrelated files in the folder are never counted or evicted.
  write_all(dir.path / "notes.txt", random_bytes(5000));
  write_all(dir.path / "ab" / "notes.kc", random_bytes(5000));
  struct model_entry {
    hash128 key;
    std::vector<std::byte> payload;
  };
  std::list<model_entry> lru; // front: least recently used
  std::uint64_t model_total = 0;
  auto file_bytes = [&](const model_entry& e) { return 48 + identity.size() + e.payload.size(); };
  std::vector<hash128> keys(30);
  for (auto& key : keys)
    key = random_key();
  for (int step = 0; step < 150; ++step) {
    const hash128 key = keys[draw(0, keys.size() - 1)];
    auto in_model = std::find_if(lru.begin(), lru.end(), [&](auto& e) { return e.key == key; });
    if (draw(0, 1) == 0) { // load: a hit moves the entry to the back
      const auto loaded = cache.load(key, identity);
      REQUIRE(loaded.has_value() == (in_model != lru.end()));
      if (loaded) {
        REQUIRE(*loaded == in_model->payload);
        lru.splice(lru.end(), lru, in_model);
      }
    } else { // store, replacing any entry of that key, then evict the oldest
      model_entry e{key, random_bytes(draw(0, 12000))};
      if (in_model != lru.end()) {
        model_total -= file_bytes(*in_model);
        lru.erase(in_model);
      }
      cache.store(key, identity, e.payload);
      model_total += file_bytes(e);
      lru.push_back(std::move(e));
      while (model_total > bound) {
        model_total -= file_bytes(lru.front());
        lru.pop_front();
      }
    }
    REQUIRE(bytes_on_disk(dir.path) == model_total + 5000); // notes.kc is not an entry name
    REQUIRE(cache.total_bytes() == model_total);
    REQUIRE(cache.total_bytes() <= bound);
  }
  CHECK(fs::exists(dir.path / "notes.txt"));
  CHECK(fs::exists(dir.path / "ab" / "notes.kc"));
  CHECK(cache.counters().evictions > 0);
}

TEST_CASE("disk_cache: an entry larger than the bound is not written", "[disk_cache]") {
  temp_dir dir;
  disk_cache cache(dir.str(), 1000);
  const hash128 small = random_key(), big = random_key();
  const auto small_payload = random_bytes(100);
  cache.store(small, "id", small_payload);
  cache.store(big, "id", random_bytes(1000 - 48 - 2 + 1));
  CHECK_FALSE(cache.load(big, "id"));
  CHECK(cache.load(small, "id") == small_payload);
  CHECK(cache.counters().stores == 1);
}

TEST_CASE("disk_cache: the tracked total is rescanned to see other processes' entries",
          "[disk_cache]") {
  temp_dir dir;
  const std::uint64_t entry = 48 + 2 + 100, bound = 20 * entry;
  disk_cache mine(dir.str(), bound), theirs(dir.str(), bound);
  for (int i = 0; i < 15; ++i)
    theirs.store(random_key(), "id", random_bytes(100));
  // Not seen yet: a running total is cheap, and stale until the next rescan.
  mine.store(random_key(), "id", random_bytes(100));
  CHECK(mine.total_bytes() == entry);
  for (std::uint64_t i = 1; i < disk_cache::rescan_interval; ++i)
    mine.store(random_key(), "id", random_bytes(100));
  CHECK(mine.total_bytes() == bytes_on_disk(dir.path));
  CHECK(bytes_on_disk(dir.path) <= bound);
  CHECK(mine.counters().evictions == 15 + disk_cache::rescan_interval - 20);
}

TEST_CASE("disk_cache: temp files of writers that died are removed at open", "[disk_cache]") {
  temp_dir dir;
  const std::string hex = random_key().hex();
  const fs::path shard = dir.path / hex.substr(0, 2);
  const fs::path stale = shard / (hex + ".kc.12345-0-0123456789abcdef.tmp");
  const fs::path fresh = shard / (hex + ".kc.12345-1-0123456789abcdef.tmp");
  const fs::path unrelated = shard / "mine.tmp";
  for (const auto& p : {stale, fresh, unrelated})
    write_all(p, random_bytes(10));
  const auto two_hours_ago = fs::file_time_type::clock::now() - std::chrono::hours(2);
  fs::last_write_time(stale, two_hours_ago);
  fs::last_write_time(unrelated, two_hours_ago);
  disk_cache cache(dir.str());
  CHECK_FALSE(fs::exists(stale));
  CHECK(fs::exists(fresh)); // perhaps a live writer in another process
  CHECK(fs::exists(unrelated));
  CHECK(cache.total_bytes() == 0);
}

TEST_CASE("disk_cache: a folder that cannot be created or written makes it memory-only",
          "[disk_cache]") {
  temp_dir dir;
  auto check_memory_only = [&](const std::string& path) {
    INFO("cache folder " << path);
    disk_cache cache(path);
    CHECK_FALSE(cache.enabled());
    CHECK(cache.reason().find(path) != std::string::npos);
    const hash128 key = random_key();
    cache.store(key, "id", random_bytes(100));
    CHECK_FALSE(cache.load(key, "id"));
    const auto c = cache.counters();
    CHECK(c.stores == 0);
    CHECK(c.misses == 1);
    CHECK(cache.total_bytes() == 0);
  };
  // A path under a regular file can never be created, even by root.
  write_all(dir.path / "file", random_bytes(10));
  check_memory_only((dir.path / "file" / "sub").string());
  check_memory_only((dir.path / "file").string()); // a file, not a folder
  if (::geteuid() != 0) { // root writes through permission bits: only test them as a user
    fs::create_directory(dir.path / "ro");
    fs::permissions(dir.path / "ro", fs::perms::owner_read | fs::perms::owner_exec);
    check_memory_only((dir.path / "ro").string());
    check_memory_only((dir.path / "ro" / "sub").string());
    fs::permissions(dir.path / "ro", fs::perms::owner_all);
  }
  CHECK(fs::is_empty(dir.path / "file") == false);
  CHECK(fs::file_size(dir.path / "file") == 10);

  disk_cache no_folder("");
  CHECK_FALSE(no_folder.enabled());
  CHECK_FALSE(no_folder.reason().empty());
  disk_cache no_room(dir.str(), 0);
  CHECK_FALSE(no_room.enabled());
  CHECK(no_room.reason().find("0 bytes") != std::string::npos);
}

TEST_CASE("disk_cache: a missing folder is created", "[disk_cache]") {
  temp_dir dir;
  const fs::path nested = dir.path / "a" / "b" / "c";
  disk_cache cache(nested.string());
  REQUIRE(cache.enabled());
  CHECK(fs::is_directory(nested));
  const hash128 key = random_key();
  const auto payload = random_bytes(draw(0, 2000));
  cache.store(key, "id", payload);
  CHECK(cache.load(key, "id") == payload);
  // Removed while in use (someone cleaned ~/.cache): the next store recreates it.
  fs::remove_all(nested);
  CHECK_FALSE(cache.load(key, "id"));
  cache.store(key, "id", payload);
  CHECK(cache.load(key, "id") == payload);
}

TEST_CASE("disk_cache: the location and bound come from the environment", "[disk_cache]") {
  temp_dir dir;
  env_override max("KILN_CACHE_MAX_BYTES", nullptr);
  SECTION("KILN_CACHE_DIR first") {
    const std::string path = (dir.path / "kiln-dir").string();
    env_override a("KILN_CACHE_DIR", path.c_str()), b("XDG_CACHE_HOME", dir.str().c_str());
    disk_cache cache = disk_cache::from_environment();
    CHECK(cache.dir() == path);
    CHECK(cache.enabled());
    CHECK(cache.max_bytes() == disk_cache::default_max_bytes());
    const hash128 key = random_key();
    const auto payload = random_bytes(10);
    cache.store(key, "id", payload);
    CHECK(fs::exists(cache.path_of(key)));
    CHECK(cache.path_of(key).starts_with(path + "/"));
  }
  SECTION("then $XDG_CACHE_HOME/kiln, if absolute") {
    const std::string xdg = (dir.path / "xdg").string(), home = (dir.path / "home").string();
    env_override a("KILN_CACHE_DIR", ""), b("XDG_CACHE_HOME", xdg.c_str()), c("HOME", home.c_str());
    CHECK(disk_cache::from_environment().dir() == xdg + "/kiln");
    env_override d("XDG_CACHE_HOME", "relative/path");
    CHECK(disk_cache::from_environment().dir() == home + "/.cache/kiln");
  }
  SECTION("then $HOME/.cache/kiln, else memory-only") {
    const std::string home = (dir.path / "home").string();
    env_override a("KILN_CACHE_DIR", nullptr), b("XDG_CACHE_HOME", nullptr),
        c("HOME", home.c_str());
    disk_cache cache = disk_cache::from_environment();
    CHECK(cache.dir() == home + "/.cache/kiln");
    CHECK(cache.enabled());
    CHECK(fs::is_directory(home + "/.cache/kiln"));
    env_override d("HOME", nullptr);
    disk_cache none = disk_cache::from_environment();
    CHECK_FALSE(none.enabled());
    CHECK(none.reason().find("KILN_CACHE_DIR") != std::string::npos);
  }
  SECTION("KILN_CACHE_MAX_BYTES, with an optional K/M/G suffix") {
    env_override a("KILN_CACHE_DIR", dir.str().c_str());
    const std::uint64_t n = rng()() >> 34;
    const std::pair<std::string, std::uint64_t> cases[] = {{"1234", 1234},
                                                           {"64K", 64u << 10},
                                                           {"64k", 64u << 10},
                                                           {"3M", 3u << 20},
                                                           {"2G", 2ull << 30},
                                                           {std::to_string(n), n},
                                                           {std::to_string(n) + "K", n << 10},
                                                           {"18446744073709551615", ~0ull}};
    for (const auto& [text, bytes] : cases) {
      env_override b("KILN_CACHE_MAX_BYTES", text.c_str());
      CHECK(disk_cache::from_environment().max_bytes() == bytes);
    }
    env_override zero("KILN_CACHE_MAX_BYTES", "0");
    CHECK_FALSE(disk_cache::from_environment().enabled());
  }
}

TEST_CASE("disk_cache: a malformed KILN_CACHE_MAX_BYTES is a kiln::error naming it",
          "[disk_cache]") {
  temp_dir dir;
  env_override a("KILN_CACHE_DIR", dir.str().c_str());
  for (const char* text :
       {"abc", "12x", "-5", "1.5M", " 12", "12 ", "M", "0x10", "1MB", "18446744073709551616",
        "99999999999999999999", "17179869184G"}) { // the last two overflow 64 bits
    INFO("KILN_CACHE_MAX_BYTES=" << text);
    env_override b("KILN_CACHE_MAX_BYTES", text);
    try {
      (void)disk_cache::from_environment();
      FAIL("no kiln::error");
    } catch (const kiln::error& e) {
      CHECK(std::string(e.what()).find("KILN_CACHE_MAX_BYTES") != std::string::npos);
      CHECK(std::string(e.what()).find(std::string("\"") + text + "\"") != std::string::npos);
    }
  }
}

TEST_CASE("disk_cache: an identity over 4 GiB is a kiln::error", "[disk_cache]") {
  temp_dir dir;
  disk_cache cache(dir.str());
  // 4 GiB + 1 of address space, never touched: store must reject it by its size alone.
  const std::size_t n = (std::size_t{1} << 32) + 1;
  void* p = ::mmap(nullptr, n, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    WARN("cannot reserve 4 GiB of address space: skipped");
    return;
  }
  const std::string_view huge(static_cast<const char*>(p), n);
  CHECK_THROWS_AS(cache.store(random_key(), huge, random_bytes(10)), kiln::error);
  ::munmap(p, n);
  CHECK(files_ending(dir.path, ".kc").empty());
}
