// kiln's Vulkan runtime (jit/kiln/jit/vulkan/) on its own, end to end on the device found
// (Mesa's lavapipe here): enumeration, the caching arena, data movement by memcpy and by
// staging copies, pipelines and dispatch with push constants, parameter buffers, push
// descriptors and descriptor pools. (Asynchrony, the ordering rule, lifetimes, threads,
// errors of use and host costs: test_vulkan_runtime_queue.cpp.) The validation layer is on for the
// whole run and any message fails (support header).
#include "vulkan_runtime_support.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <thread>
#include <tuple>

using namespace vkt;

namespace {

// A chunk_source that hands out fake handles from host memory, with a byte budget.
struct host_chunks final : vk::chunk_source {
  std::uint64_t budget = UINT64_MAX, held = 0;
  std::map<std::uint64_t, std::vector<std::byte>> chunks;
  std::uint64_t next = 1;
  VkResult create_chunk(VkDeviceSize bytes, vk::chunk_memory& out) override {
    if (held + bytes > budget) return VK_ERROR_OUT_OF_DEVICE_MEMORY;
    held += bytes;
    chunks[next].resize(bytes);
    out.buffer = reinterpret_cast<VkBuffer>(next);
    out.memory = reinterpret_cast<VkDeviceMemory>(next++);
    return VK_SUCCESS;
  }
  void destroy_chunk(const vk::chunk_memory& m) noexcept override {
    const auto id = reinterpret_cast<std::uint64_t>(m.buffer);
    held -= chunks[id].size();
    chunks.erase(id);
  }
};

struct owned_block {
  vk::block b;
  std::vector<std::byte> mirror; // what the block should hold
};

} // namespace

TEST_CASE("vulkan runtime: VkResult failures are kiln::errors naming the call and result",
          "[vulkan][runtime]") {
  try {
    vk::check(VK_ERROR_DEVICE_LOST, "vkQueueSubmit", "llvmpipe");
    FAIL("no error");
  } catch (const kiln::error& e) {
    CHECK(e.op() == "vulkan");
    CHECK(e.reason() == "vkQueueSubmit failed");
    CHECK(e.details() == "VK_ERROR_DEVICE_LOST (-4), device llvmpipe");
  }
  CHECK_NOTHROW(vk::check(VK_SUCCESS, "vkQueueSubmit", "x"));
  CHECK(std::string(vk::result_name(static_cast<VkResult>(-12345))).find("unknown") !=
        std::string::npos);
}

TEST_CASE("vulkan runtime: a missing loader or validation layer is a reason, not a crash",
          "[vulkan][runtime]") {
  vk::instance_options no_loader;
  no_loader.libraries = {"libkiln-no-such-vulkan.so.1"};
  const std::string why = vk::probe_instance(no_loader);
  CHECK(why.find("the Vulkan loader is not installed") != std::string::npos);
  CHECK(why.find("libkiln-no-such-vulkan.so.1") != std::string::npos);
  try {
    vk::instance i(no_loader);
    FAIL("no error");
  } catch (const kiln::error& e) {
    CHECK(e.op() == "vulkan");
  }
  // The layer is looked for before any driver is needed: only the loader must be there.
  if (const auto plain = vk::probe_instance({});
      plain.find("loader is not installed") != std::string::npos) {
    WARN("SKIPPED (layer check): " << plain);
    return;
  }
  vk::instance_options no_layer;
  no_layer.validation = true;
  no_layer.validation_layer = "VK_LAYER_KILN_not_installed";
  const std::string layer_why = vk::probe_instance(no_layer);
  CHECK(layer_why.find("validation layer is not installed") != std::string::npos);
  CHECK(layer_why.find("VK_LAYER_KILN_not_installed") != std::string::npos);
}

TEST_CASE("vulkan runtime: without a driver, the loader's messages are the reason",
          "[vulkan][runtime]") {
  if (vk::probe_instance({}).find("loader is not installed") != std::string::npos) {
    WARN("SKIPPED: " << vk::probe_instance({}));
    return;
  }
  const char* old = std::getenv("VK_ICD_FILENAMES"); // the loader reads it at each instance
  const std::string saved = old ? old : "";
  ::setenv("VK_ICD_FILENAMES", "/nonexistent/kiln_icd.json", 1);
  vk::instance_options o;
  o.validation = true;
  const std::size_t before = vk::validation_message_count();
  const std::string why = vk::probe_instance(o);
  old ? ::setenv("VK_ICD_FILENAMES", saved.c_str(), 1) : ::unsetenv("VK_ICD_FILENAMES");
  CHECK(why.find("vkCreateInstance failed") != std::string::npos);
  CHECK(why.find("kiln_icd.json") != std::string::npos); // the loader said which file
  CHECK(vk::validation_message_count() == before);       // not counted against the run
}

TEST_CASE("vulkan runtime: options from the environment", "[vulkan][runtime]") {
  struct restore { // the variables as they were
    std::vector<std::pair<std::string, std::optional<std::string>>> saved;
    explicit restore(std::initializer_list<const char*> names) {
      for (const char* n : names) {
        const char* v = std::getenv(n);
        saved.emplace_back(n, v ? std::optional<std::string>(v) : std::nullopt);
      }
    }
    ~restore() {
      for (const auto& [n, v] : saved)
        v ? ::setenv(n.c_str(), v->c_str(), 1) : ::unsetenv(n.c_str());
    }
  } keep{"KILN_VK_FORCE_STAGING", "KILN_VK_NO_PUSH_DESCRIPTORS", "KILN_VK_VALIDATION"};
  ::unsetenv("KILN_VK_FORCE_STAGING");
  ::unsetenv("KILN_VK_NO_PUSH_DESCRIPTORS");
  CHECK_FALSE(vk::context_options::from_environment().force_staging);
  CHECK(vk::context_options::from_environment().push_descriptors);
  ::setenv("KILN_VK_FORCE_STAGING", "1", 1);
  ::setenv("KILN_VK_NO_PUSH_DESCRIPTORS", "1", 1);
  CHECK(vk::context_options::from_environment().force_staging);
  CHECK_FALSE(vk::context_options::from_environment().push_descriptors);
  ::setenv("KILN_VK_FORCE_STAGING", "0", 1);
  CHECK_FALSE(vk::context_options::from_environment().force_staging);
  for (const auto& [value, on, sync] :
       {std::tuple{"1", true, false}, std::tuple{"sync", true, true},
        std::tuple{"0", false, false}}) {
    ::setenv("KILN_VK_VALIDATION", value, 1);
    CHECK(vk::instance_options::from_environment().validation == on);
    CHECK(vk::instance_options::from_environment().synchronization_validation == sync);
  }
}

TEST_CASE("vulkan runtime: enumeration lists the device with its features and limits",
          "[vulkan][runtime]") {
  const int index = device_index();
  if (index < 0) return;
  std::string why = "not cleared";
  const auto devices = vk::enumerate_devices(&why);
  CHECK(why.empty());
  const vk::physical_info& d = devices.at(static_cast<std::size_t>(index));
  INFO(d.name);
  CHECK(d.handle != VK_NULL_HANDLE);
  CHECK(d.identity.vendor_id != 0);
  CHECK(d.identity.api_version >= VK_API_VERSION_1_1);
  CHECK(std::any_of(d.identity.pipeline_cache_uuid.begin(), d.identity.pipeline_cache_uuid.end(),
                    [](auto b) { return b != 0; }));
  CHECK(d.limits.max_push_constants >= 128);
  CHECK(d.limits.max_storage_buffers >= 4);
  CHECK(d.limits.max_storage_buffer_range >= (1u << 27));
  CHECK(d.limits.max_workgroup_count_x >= 65535);
  CHECK(d.limits.max_workgroup_size_x >= 128);
  CHECK(d.limits.max_workgroup_invocations >= 128);
  CHECK(std::has_single_bit(d.limits.min_storage_buffer_offset_alignment));
  CHECK(d.limits.subgroup_size >= 1);
  if (d.name.find("llvmpipe") != std::string::npos) { // what lavapipe offers
    CHECK(d.identity.cpu);
    CHECK(d.identity.driver_name == "llvmpipe");
    CHECK(d.features.f64);
    CHECK(d.features.i64);
    CHECK(d.features.i16);
    CHECK(d.features.storage_buffer_16bit);
    CHECK(d.features.push_descriptor);
    CHECK(d.limits.max_push_descriptors >= 32);
  }
  const auto c = vk::context::get(index);
  CHECK(c == vk::context::get(index)); // made once
  CHECK(c->describe().find(d.name) != std::string::npos);
  if (d.identity.cpu) CHECK(c->mapped()); // host memory: mapped unless staging is forced
  CHECK(c->max_buffers_per_kernel() + 1 <= d.limits.max_storage_buffers);
  CHECK(c->alignment() >= 256);
  for (int bad : {-1, static_cast<int>(devices.size()), 999}) {
    try {
      vk::context::get(bad);
      FAIL("no error for vulkan:" << bad);
    } catch (const kiln::error& e) {
      CHECK(e.op() == "device");
      CHECK(e.details().find("vulkan:" + std::to_string(bad)) != std::string::npos);
    }
  }
}

TEST_CASE("vulkan runtime: the arena's blocks never overlap and its stats are exact",
          "[vulkan][runtime]") {
  host_chunks source;
  const VkDeviceSize align = 256, chunk = 1 << 16;
  vk::arena a(source, align, chunk);
  std::vector<vk::block> live;
  std::uint64_t in_use = 0, peak = 0;
  for (int step = 0; step < 3000; ++step) {
    if (live.empty() || draw(0, 99) < 55) {
      const std::size_t n = draw(0, 9) == 0 ? draw(chunk, 3 * chunk) : draw(0, 5000);
      auto b = a.allocate(n);
      REQUIRE(b);
      CHECK(b->requested == n);
      CHECK(b->bytes == std::max<VkDeviceSize>((n + align - 1) / align * align, align));
      CHECK(b->offset % align == 0);
      in_use += b->bytes;
      peak = std::max(peak, in_use);
      live.push_back(*b);
    } else {
      const std::size_t i = draw(0, live.size() - 1);
      a.release(live[i]);
      CHECK(a.live(live[i]) == nullptr);
      in_use -= live[i].bytes;
      live[i] = live.back();
      live.pop_back();
    }
    REQUIRE(a.stats().in_use == in_use);
    REQUIRE(a.stats().peak == peak);
    REQUIRE(a.stats().reserved == source.held);
  }
  // No two live blocks share a byte.
  std::sort(live.begin(), live.end(), [](const auto& x, const auto& y) {
    return std::pair(x.buffer, x.offset) < std::pair(y.buffer, y.offset);
  });
  for (std::size_t i = 1; i < live.size(); ++i)
    if (live[i].buffer == live[i - 1].buffer)
      REQUIRE(live[i - 1].offset + live[i - 1].bytes <= live[i].offset);
  // Released twice: an error, and the arena is unchanged.
  if (!live.empty()) {
    const vk::block gone = live.back();
    live.pop_back();
    a.release(gone);
    CHECK_THROWS_AS(a.release(gone), kiln::error);
  }
  for (const auto& b : live)
    a.release(b);
  CHECK(a.stats().in_use == 0);
  a.release_empty_chunks();
  CHECK(a.stats().reserved == 0);
  CHECK(source.held == 0);
  // Out of memory: nothing (the context then frees its cache and retries).
  source.budget = chunk;
  auto first = a.allocate(100);
  REQUIRE(first);
  CHECK_FALSE(a.allocate(chunk));
  a.release(*first);
  a.release_empty_chunks();
  CHECK(a.allocate(chunk)); // fits once the cached chunk is gone
}

TEST_CASE("vulkan runtime: allocator reuse, stats and empty_cache", "[vulkan][runtime]") {
  const int index = device_index();
  if (index < 0) return;
  vk::context_options o;
  o.chunk_bytes = 1 << 20;
  const auto c = vk::context::create(index, o);
  const VkDeviceSize al = c->alignment();
  auto rounded = [&](std::size_t n) { return std::max<VkDeviceSize>((n + al - 1) / al * al, al); };
  CHECK(c->stats().reserved == 0);
  const std::size_t n = draw(1, 100000);
  vk::block a = c->allocate(n);
  CHECK(a.bytes == rounded(n));
  CHECK(c->stats().in_use == rounded(n));
  CHECK(c->stats().reserved == (1u << 20));
  c->release(a);
  CHECK(c->stats().in_use == 0);
  vk::block again = c->allocate(n); // the same memory comes back
  CHECK(again.buffer == a.buffer);
  CHECK(again.offset == a.offset);
  vk::block zero = c->allocate(0);
  CHECK(zero.bytes == al);
  vk::block big = c->allocate((3u << 20) + 5); // larger than a chunk: its own
  CHECK(big.buffer != again.buffer);
  const std::uint64_t in_use = rounded(n) + al + rounded((3u << 20) + 5);
  CHECK(c->stats().in_use == in_use);
  CHECK(c->stats().peak == in_use);
  CHECK(c->stats().reserved == (1u << 20) + rounded((3u << 20) + 5));
  c->release(big);
  c->release(zero);
  CHECK(c->stats().peak == in_use);
  c->empty_cache(); // the big chunk goes; the one holding `again` stays
  CHECK(c->stats().reserved == (1u << 20));
  CHECK(c->stats().in_use == rounded(n));
  c->release(again);
  c->empty_cache();
  CHECK(c->stats().reserved == 0);
  CHECK(c->stats().in_use == 0);
}

TEST_CASE("vulkan runtime: out of memory frees the cache and retries, then is an error",
          "[vulkan][runtime]") {
  const int index = device_index();
  if (index < 0) return;
  vk::context_options o;
  o.chunk_bytes = 1 << 20;
  o.memory_limit = 4 << 20;
  const auto c = vk::context::create(index, o);
  std::vector<vk::block> blocks;
  for (int i = 0; i < 4; ++i)
    blocks.push_back(c->allocate(1 << 20));
  CHECK(c->stats().reserved == (4u << 20));
  for (const auto& b : blocks)
    c->release(b);
  // Cached chunks fill the limit: this one fits only after they are freed.
  const vk::block two = c->allocate(2 << 20);
  CHECK(c->stats().reserved == (2u << 20));
  const vk::block more = c->allocate(2 << 20);
  try {
    c->allocate(1 << 20);
    FAIL("no error");
  } catch (const kiln::error& e) {
    CHECK(e.op() == "alloc");
    CHECK(e.reason() == "out of device memory");
    CHECK(e.details().find("1048576 bytes requested") != std::string::npos);
  }
  c->release(two);
  c->release(more);
}

TEST_CASE("vulkan runtime: a request beyond maxStorageBufferRange is a kiln::error",
          "[vulkan][runtime]") {
  const int index = device_index();
  if (index < 0) return;
  const auto c = vk::context::get(index);
  const std::uint64_t too_big = c->info().limits.max_storage_buffer_range + 1;
  try {
    c->allocate(too_big);
    FAIL("no error");
  } catch (const kiln::error& e) {
    CHECK(e.op() == "alloc");
    CHECK(e.details().find(std::to_string(too_big)) != std::string::npos);
  }
}

TEST_CASE("vulkan runtime: write, read, copy and fill move the right bytes", "[vulkan][runtime]") {
  const mode m = GENERATE(mode::mapped, mode::staging);
  const auto c = context_for(m);
  if (!c) return;
  INFO(name(m));
  CHECK(c->mapped() == (m == mode::mapped));
  std::vector<std::size_t> sizes = {0, 1, 3, 255, 256, 257, 4096, (3u << 20) / 2};
  for (int i = 0; i < 6; ++i)
    sizes.push_back(draw(1, 200000));
  sizes.push_back((1u << 20) + draw(1, 1 << 20));
  if (m == mode::staging) sizes.push_back((20u << 20) + 12); // more than one staging piece
  std::vector<owned_block> blocks;
  for (std::size_t n : sizes) {
    owned_block ob{c->allocate(n), random_bytes(n)};
    c->write(ob.b, 0, ob.mirror.data(), n);
    blocks.push_back(std::move(ob));
  }
  for (int round = 0; round < 60; ++round) {
    auto& t = blocks[draw(0, blocks.size() - 1)];
    const std::size_t n = t.mirror.size();
    const std::size_t off = draw(0, n), len = draw(0, n - off);
    switch (draw(0, 3)) {
    case 0: { // partial write
      const auto data = random_bytes(len);
      c->write(t.b, off, data.data(), len);
      std::copy(data.begin(), data.end(), t.mirror.begin() + static_cast<std::ptrdiff_t>(off));
      break;
    }
    case 1: { // copy from another block (or the same: overlapping, as memmove)
      auto& s = blocks[draw(0, blocks.size() - 1)];
      const std::size_t k = std::min(len, s.mirror.size());
      const std::size_t soff = draw(0, s.mirror.size() - k);
      c->copy(s.b, soff, t.b, off, k);
      if (k) std::memmove(t.mirror.data() + off, s.mirror.data() + soff, k);
      break;
    }
    case 2: { // fill, 4-byte aligned
      const std::size_t o4 = off / 4 * 4, l4 = std::min(len, n - o4) / 4 * 4;
      const auto pattern = static_cast<std::uint32_t>(draw(0, UINT32_MAX));
      c->fill(t.b, o4, l4, pattern);
      for (std::size_t i = 0; i < l4; ++i)
        t.mirror[o4 + i] = static_cast<std::byte>((pattern >> (8 * (i % 4))) & 0xff);
      break;
    }
    default: { // partial read
      std::vector<std::byte> got(len);
      c->read(t.b, off, got.data(), len);
      REQUIRE(
          std::equal(got.begin(), got.end(), t.mirror.begin() + static_cast<std::ptrdiff_t>(off)));
    }
    }
  }
  for (auto& t : blocks) {
    std::vector<std::byte> got(t.mirror.size());
    c->read(t.b, 0, got.data(), got.size());
    REQUIRE(got == t.mirror);
    c->release(t.b);
  }
  if (m == mode::staging) { // more than one round of staging memory in flight, both ways
    const std::size_t n = (std::size_t{64} << 20) + draw(1, 100000);
    const auto data = random_bytes(n);
    const vk::block big = c->allocate(n);
    c->write(big, 0, data.data(), n);
    std::vector<std::byte> got(n);
    c->read(big, 0, got.data(), n);
    CHECK(got == data);
    c->release(big);
    c->empty_cache();
  }
}

TEST_CASE("vulkan runtime: y = a*x + b with push constants, several workgroup sizes",
          "[vulkan][runtime]") {
  const mode m = GENERATE(mode::mapped, mode::staging, mode::pools);
  const auto c = context_for(m);
  if (!c) return;
  const auto spirv = compile_glsl(saxpy_glsl);
  if (spirv.empty()) return;
  INFO(name(m));
  const std::uint32_t max_wg =
      std::min(c->info().limits.max_workgroup_size_x, c->info().limits.max_workgroup_invocations);
  for (std::uint32_t wg : {1u, 32u, 64u, 100u, 256u, max_wg}) {
    const auto p = c->make_pipeline(spirv, {2, 16, false}, wg);
    CHECK(p->workgroup_size() == wg);
    const std::size_t most = std::size_t{wg} * c->info().limits.max_workgroup_count_x;
    const auto n = static_cast<std::uint32_t>(draw(1, std::min<std::size_t>(100000, most)));
    const auto x = uniform<float>(n, -10, 10);
    const saxpy_params params{uniform<float>(1, -3, 3)[0], uniform<float>(1, -3, 3)[0], n};
    const vk::block bx = c->allocate(n * 4), by = c->allocate(n * 4);
    c->write(bx, 0, x.data(), n * 4);
    const vk::buffer_ref refs[] = {{&bx}, {&by}};
    c->dispatch(*p, refs, bytes_of(params), (n + wg - 1) / wg);
    std::vector<float> y(n);
    c->read(by, 0, y.data(), n * 4);
    std::uint32_t bad = n; // the first wrong element (Catch per element is slow)
    for (std::uint32_t i = 0; i < n && bad == n; ++i)
      if (!close_to(y[i], static_cast<double>(params.a) * x[i] + params.b,
                    std::abs(params.a * x[i]) + std::abs(params.b)))
        bad = i;
    INFO("workgroup " << wg << ", n " << n << ", first wrong element " << bad);
    CHECK(bad == n);
    c->release(bx);
    c->release(by);
  }
}

TEST_CASE("vulkan runtime: parameters bigger than push constants go in a parameter buffer",
          "[vulkan][runtime]") {
  const mode m = GENERATE(mode::mapped, mode::staging_pools);
  const auto c = context_for(m);
  if (!c) return;
  const auto spirv = compile_glsl(R"(#version 450
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Y { float y[]; };
layout(std430, binding = 2) readonly buffer P { uint n; uint k; float c[]; } prm;
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < prm.n) y[i] = x[i] * prm.c[i % prm.k] + prm.c[(i + 1u) % prm.k];
}
)");
  if (spirv.empty()) return;
  INFO(name(m));
  const auto p = c->make_pipeline(spirv, {2, 0, true}, 64);
  for (int round = 0; round < 3; ++round) { // new values each time, from the upload ring
    const std::uint32_t k = c->max_push_bytes() / 4 + static_cast<std::uint32_t>(draw(1, 300));
    const auto n = static_cast<std::uint32_t>(draw(1, 50000));
    const auto coef = uniform<float>(k, -2, 2);
    std::vector<std::uint32_t> params(2 + k);
    params[0] = n;
    params[1] = k;
    std::memcpy(params.data() + 2, coef.data(), k * 4);
    REQUIRE(params.size() * 4 > c->max_push_bytes());
    const auto x = uniform<float>(n, -5, 5);
    const vk::block bx = c->allocate(n * 4), by = c->allocate(n * 4);
    c->write(bx, 0, x.data(), n * 4);
    const vk::buffer_ref refs[] = {{&bx}, {&by}};
    c->dispatch(*p, refs, std::as_bytes(std::span(params)), (n + 63) / 64);
    std::vector<float> y(n);
    c->read(by, 0, y.data(), n * 4);
    for (std::uint32_t i = 0; i < n; ++i) {
      const double a = coef[i % k], b = coef[(i + 1) % k];
      REQUIRE(close_to(y[i], a * x[i] + b, std::abs(a * x[i]) + std::abs(b)));
    }
    c->release(bx);
    c->release(by);
  }
}

TEST_CASE("vulkan runtime: shaders may use float64 and int64 (features enabled)",
          "[vulkan][runtime]") {
  const auto c = context_for(mode::mapped);
  if (!c) return;
  if (!c->info().features.f64 || !c->info().features.i64) {
    WARN("SKIPPED: " << c->info().name << " lacks shaderFloat64 or shaderInt64");
    return;
  }
  const auto spirv = compile_glsl(R"(#version 450
#extension GL_ARB_gpu_shader_int64 : require
layout(local_size_x_id = 0) in;
layout(push_constant) uniform P { uint n; } p;
layout(std430, binding = 0) readonly buffer X { double x[]; };
layout(std430, binding = 1) writeonly buffer Y { double y[]; };
layout(std430, binding = 2) writeonly buffer Z { int64_t z[]; };
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < p.n) {
    y[i] = x[i] * x[i] - 1.0LF / 3.0LF;
    z[i] = int64_t(i) * 3000000019L - 7L;
  }
}
)");
  if (spirv.empty()) return;
  const auto p = c->make_pipeline(spirv, {3, 4, false}, 128);
  const auto n = static_cast<std::uint32_t>(draw(1000, 20000));
  const auto x = uniform<double>(n, -4, 4);
  const vk::block bx = c->allocate(n * 8), by = c->allocate(n * 8), bz = c->allocate(n * 8);
  c->write(bx, 0, x.data(), n * 8);
  const vk::buffer_ref refs[] = {{&bx}, {&by}, {&bz}};
  c->dispatch(*p, refs, std::as_bytes(std::span(&n, 1)), (n + 127) / 128);
  std::vector<double> y(n);
  std::vector<std::int64_t> z(n);
  c->read(by, 0, y.data(), n * 8);
  c->read(bz, 0, z.data(), n * 8);
  for (std::uint32_t i = 0; i < n; ++i) {
    REQUIRE(std::abs(y[i] - (x[i] * x[i] - 1.0 / 3.0)) <= 1e-15 * (x[i] * x[i] + 1));
    REQUIRE(z[i] == static_cast<std::int64_t>(i) * 3000000019LL - 7);
  }
  for (const auto& b : {bx, by, bz})
    c->release(b);
}
