// kiln's Vulkan runtime: the queue's contract. Work is asynchronous and in order (1000
// dispatches without a wait), the ordering rule makes reuse of released memory safe, a
// pipeline dropped while queued work uses it lives until that work is done, threads share
// a context, shutdown leaves nothing behind, every misuse is a kiln::error that leaves the
// context usable; and the host cost of a dispatch and of a round trip, printed.
// The validation layer is on for the whole run and any message fails (support header).
#include "vulkan_runtime_support.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>

using namespace vkt;

namespace {

std::vector<std::uint32_t> saxpy() { return compile_glsl(saxpy_glsl); }

// Runs y = a*x + b over `x` on `c` and returns y.
std::vector<float> run_saxpy(vk::context& c, const vk::pipeline& p, const std::vector<float>& x,
                             float a, float b) {
  const auto n = static_cast<std::uint32_t>(x.size());
  const vk::block bx = c.allocate(n * 4), by = c.allocate(n * 4);
  c.write(bx, 0, x.data(), n * 4);
  const vk::buffer_ref refs[] = {{&bx}, {&by}};
  c.dispatch(p, refs, bytes_of({a, b, n}), (n + p.workgroup_size() - 1) / p.workgroup_size());
  std::vector<float> y(n);
  c.read(by, 0, y.data(), n * 4);
  c.release(bx);
  c.release(by);
  return y;
}

template <class F>
void expect_error(F&& f, const std::string& op, const std::string& reason_part) {
  try {
    f();
    FAIL("no error; expected " << op << ": " << reason_part);
  } catch (const kiln::error& e) {
    CHECK(e.op() == op);
    CHECK_THAT(e.reason(), Catch::Matchers::Contains(reason_part));
  }
}

} // namespace

TEST_CASE("vulkan runtime: 1000 dispatches in a row run without the host waiting",
          "[vulkan][runtime]") {
  const mode m = GENERATE(mode::mapped, mode::pools);
  const auto c = context_for(m);
  if (!c) return;
  const auto spirv = saxpy();
  if (spirv.empty()) return;
  INFO(name(m));
  const auto p = c->make_pipeline(spirv, {2, 16, false}, 64);
  const std::uint32_t n = 1 << 12;
  std::vector<float> x0(n);
  for (auto& v : x0)
    v = static_cast<float>(draw(0, 1000)); // + 1 a thousand times stays exact
  const vk::block a = c->allocate(n * 4), b = c->allocate(n * 4);
  c->write(a, 0, x0.data(), n * 4);
  c->synchronize();
  const auto waits = c->host_waits();
  const auto submitted = c->submitted_epoch();
  const vk::buffer_ref a_to_b[] = {{&a}, {&b}}, b_to_a[] = {{&b}, {&a}};
  const auto t0 = std::chrono::steady_clock::now();
  for (int k = 0; k < 1000; ++k) // ping-pong: each reads what the one before wrote
    c->dispatch(*p, k % 2 ? b_to_a : a_to_b, bytes_of({1.0f, 1.0f, n}), n / 64);
  const double record_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  CHECK(c->host_waits() == waits);                      // nothing waited
  CHECK(c->submitted_epoch() >= submitted + 1000 / 64); // submitted in batches meanwhile
  // Whether the device is still busy now is timing (usually it is, on lavapipe): printed.
  std::printf("[%s] after recording: submitted epoch %llu, completed %llu\n", name(m),
              static_cast<unsigned long long>(c->submitted_epoch()),
              static_cast<unsigned long long>(c->completed_epoch()));
  std::vector<float> got(n);
  const auto t1 = std::chrono::steady_clock::now();
  c->read(a, 0, got.data(), n * 4); // the last dispatch wrote `a`
  const double wait_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count();
  CHECK(c->completed_epoch() == c->submitted_epoch()); // the read submitted the rest, waited
  for (std::uint32_t i = 0; i < n; ++i)
    REQUIRE(got[i] == x0[i] + 1000);
  c->read(b, 0, got.data(), n * 4);
  for (std::uint32_t i = 0; i < n; ++i)
    REQUIRE(got[i] == x0[i] + 999);
  std::printf("[%s] 1000 dispatches of %u elements: recorded in %.1f ms, then the read waited "
              "%.1f ms\n",
              name(m), n, record_ms, wait_ms);
  c->release(a);
  c->release(b);
}

TEST_CASE("vulkan runtime: memory released under queued work is reused safely",
          "[vulkan][runtime]") {
  const mode m = GENERATE(mode::mapped, mode::staging);
  const int index = device_index();
  if (index < 0) return;
  const auto spirv = saxpy();
  if (spirv.empty()) return;
  INFO(name(m));
  vk::context_options o;
  o.force_staging = m == mode::staging;
  const auto c = vk::context::create(index, o); // a fresh arena: reuse is predictable
  const auto p = c->make_pipeline(spirv, {2, 16, false}, 64);
  const std::uint32_t n = 1 << 18;
  const auto x = uniform<float>(n, -1, 1);
  const saxpy_params params{2.0f, 0.5f, n};
  auto check_y = [&](const vk::block& by, const std::vector<float>& from) {
    std::vector<float> y(n);
    c->read(by, 0, y.data(), n * 4);
    for (std::uint32_t i = 0; i < n; ++i)
      REQUIRE(close_to(y[i], 2.0 * from[i] + 0.5, 2.5));
  };
  SECTION("released, allocated again, written by the host") {
    const vk::block bx = c->allocate(n * 4), by = c->allocate(n * 4);
    c->write(bx, 0, x.data(), n * 4);
    const vk::buffer_ref refs[] = {{&bx}, {&by}};
    c->dispatch(*p, refs, bytes_of(params), n / 64); // queued, reads bx
    c->release(bx);
    const vk::block reused = c->allocate(n * 4);
    CHECK(reused.buffer == bx.buffer); // the same memory, so the test means something
    CHECK(reused.offset == bx.offset);
    const std::vector<float> junk(n, -1e30f);
    const auto waits = c->host_waits();
    const auto kernel_epoch = c->submitted_epoch() + 1; // recorded, not even submitted yet
    c->write(reused, 0, junk.data(), n * 4);            // must not reach the queued kernel
    if (m == mode::mapped) // the memcpy came after the kernel had completed
      CHECK(c->completed_epoch() >= kernel_epoch);
    else // a copy queued behind the kernel; the host did not wait
      CHECK(c->host_waits() == waits);
    check_y(by, x);
    c->release(reused);
    c->release(by);
  }
  SECTION("a live block written by the host while a queued kernel reads it") {
    const vk::block bx = c->allocate(n * 4), by = c->allocate(n * 4), bz = c->allocate(n * 4);
    c->write(bx, 0, x.data(), n * 4);
    const vk::buffer_ref first[] = {{&bx}, {&by}}, second[] = {{&bx}, {&bz}};
    c->dispatch(*p, first, bytes_of(params), n / 64);
    const auto x2 = uniform<float>(n, -1, 1);
    c->write(bx, 0, x2.data(), n * 4); // in order: after the first kernel, before the second
    c->dispatch(*p, second, bytes_of(params), n / 64);
    check_y(by, x);
    check_y(bz, x2);
    for (const auto& b : {bx, by, bz})
      c->release(b);
  }
}

TEST_CASE("vulkan runtime: a pipeline dropped while queued work uses it stays until done",
          "[vulkan][runtime]") {
  const auto c = context_for(mode::mapped);
  if (!c) return;
  const auto spirv = saxpy();
  if (spirv.empty()) return;
  const std::uint32_t n = 1 << 18;
  const auto x = uniform<float>(n, -1, 1);
  const vk::block bx = c->allocate(n * 4), by = c->allocate(n * 4);
  c->write(bx, 0, x.data(), n * 4);
  const vk::buffer_ref refs[] = {{&bx}, {&by}};
  for (int k = 0; k < 3; ++k) {
    auto p = c->make_pipeline(spirv, {2, 16, false}, 32u << k);
    c->dispatch(*p, refs, bytes_of({3.0f, -1.0f, n}), n / (32u << k));
    c->flush(); // submitted, likely still running when the pipeline goes
    p.reset();
  }
  std::vector<float> y(n);
  c->read(by, 0, y.data(), n * 4);
  for (std::uint32_t i = 0; i < n; ++i)
    REQUIRE(close_to(y[i], 3.0 * x[i] - 1.0, 4));
  c->release(bx);
  c->release(by);
}

TEST_CASE("vulkan runtime: threads share a context", "[vulkan][runtime]") {
  const auto c = context_for(mode::mapped);
  if (!c) return;
  const auto spirv = saxpy();
  if (spirv.empty()) return;
  const auto p = c->make_pipeline(spirv, {2, 16, false}, 64);
  std::vector<std::vector<float>> inputs;
  for (int t = 0; t < 4; ++t)
    inputs.push_back(uniform<float>(draw(1, 20000), -1, 1));
  std::atomic<int> wrong{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      try {
        for (int k = 0; k < 25; ++k) {
          const float a = static_cast<float>(t + k), b = static_cast<float>(k);
          const auto y = run_saxpy(*c, *p, inputs[static_cast<std::size_t>(t)], a, b);
          for (std::size_t i = 0; i < y.size(); ++i)
            if (!close_to(y[i], double(a) * inputs[std::size_t(t)][i] + b, std::abs(a) + b))
              ++wrong;
        }
      } catch (...) {
        ++errors;
      }
    });
  for (auto& th : threads)
    th.join();
  CHECK(wrong == 0);
  CHECK(errors == 0);
}

TEST_CASE("vulkan runtime: shutdown destroys everything, and later use is an error",
          "[vulkan][runtime]") {
  const int index = device_index();
  if (index < 0) return;
  const auto spirv = saxpy();
  if (spirv.empty()) return;
  const auto c = vk::context::create(index, {});
  auto p = c->make_pipeline(spirv, {2, 16, false}, 64);
  const vk::block bx = c->allocate(4096), by = c->allocate(4096);
  const vk::buffer_ref refs[] = {{&bx}, {&by}};
  c->dispatch(*p, refs, bytes_of({1, 1, 1024}), 16); // still queued at shutdown
  c->shutdown();
  CHECK_FALSE(c->is_open());
  CHECK_NOTHROW(c->release(bx)); // the memory is gone already
  expect_error([&] { c->allocate(16); }, "alloc", "shut down");
  expect_error([&] { c->dispatch(*p, refs, {}, 1); }, "dispatch", "shut down");
  expect_error([&] { c->make_pipeline(spirv, {2, 16, false}, 64); }, "pipeline", "shut down");
  CHECK(c->pipeline_cache_data().empty());
  CHECK_NOTHROW(c->synchronize());
  p.reset(); // its objects went with the device
}

TEST_CASE("vulkan runtime: misuse is a kiln::error and leaves the context usable",
          "[vulkan][runtime]") {
  const auto c = context_for(mode::mapped);
  if (!c) return;
  const auto spirv = saxpy();
  if (spirv.empty()) return;
  const auto p = c->make_pipeline(spirv, {2, 16, false}, 64);
  const vk::block b = c->allocate(1000), y = c->allocate(1000);
  std::vector<std::byte> data(b.bytes + 8);
  SECTION("data movement") {
    expect_error([&] { c->write(b, b.bytes - 3, data.data(), 4); }, "write", "outside");
    expect_error([&] { c->write(b, b.bytes + 1, data.data(), 0); }, "write", "outside");
    expect_error([&] { c->read(b, 0, data.data(), b.bytes + 1); }, "read", "outside");
    expect_error([&] { c->write(b, 0, nullptr, 4); }, "write", "null");
    expect_error([&] { c->read(b, 0, nullptr, 4); }, "read", "null");
    expect_error([&] { c->copy(b, 8, y, 0, y.bytes); }, "copy (source)", "outside");
    expect_error([&] { c->copy(b, 0, y, 8, y.bytes); }, "copy (destination)", "outside");
    expect_error([&] { c->fill(b, 2, 8, 0); }, "fill", "multiples of 4");
    expect_error([&] { c->fill(b, 0, 6, 0); }, "fill", "multiples of 4");
    CHECK_NOTHROW(c->write(b, b.bytes, data.data(), 0)); // empty, at the end: fine
  }
  SECTION("blocks released or from another device") {
    const vk::block gone = c->allocate(64);
    c->release(gone);
    expect_error([&] { c->release(gone); }, "release", "not live");
    expect_error([&] { c->write(gone, 0, data.data(), 4); }, "write", "not live");
    expect_error([&] { c->read(gone, 0, data.data(), 4); }, "read", "not live");
    const auto other = context_for(mode::staging);
    const vk::block foreign = other->allocate(64);
    expect_error([&] { c->write(foreign, 0, data.data(), 4); }, "write", "not live");
    expect_error([&] { c->release(foreign); }, "release", "not live");
    const vk::buffer_ref with_foreign[] = {{&foreign}, {&y}}, with_gone[] = {{&b}, {&gone}},
                         with_null[] = {{nullptr}, {&y}};
    expect_error([&] { c->dispatch(*p, with_foreign, {}, 1); }, "dispatch", "buffer 0");
    expect_error([&] { c->dispatch(*p, with_gone, {}, 1); }, "dispatch", "buffer 1");
    expect_error([&] { c->dispatch(*p, with_null, {}, 1); }, "dispatch", "buffer 0");
    const auto other_p = other->make_pipeline(spirv, {2, 16, false}, 64);
    const vk::buffer_ref refs[] = {{&b}, {&y}};
    expect_error([&] { c->dispatch(*other_p, refs, {}, 1); }, "dispatch", "another device");
    other->release(foreign);
  }
  SECTION("pipelines") {
    const std::vector<std::uint32_t> junk = {1, 2, 3, 4, 5, 6};
    expect_error([&] { c->make_pipeline({}, {2, 16, false}, 64); }, "pipeline", "not a SPIR-V");
    expect_error([&] { c->make_pipeline(junk, {2, 16, false}, 64); }, "pipeline", "not a SPIR-V");
    const auto most = c->info().limits.max_workgroup_size_x;
    expect_error([&] { c->make_pipeline(spirv, {2, 16, false}, 0); }, "pipeline", "workgroup");
    expect_error(
        [&] {
          c->make_pipeline(spirv, {2, 16, false}, most + 1);
        },
        "pipeline", "workgroup");
    expect_error([&] { c->make_pipeline(spirv, {2, 14, false}, 64); }, "pipeline", "push");
    expect_error(
        [&] {
          c->make_pipeline(spirv, {2, c->max_push_bytes() + 4, false}, 64);
        },
        "pipeline", "push");
    const std::uint32_t max_buffers = c->max_buffers_per_kernel();
    expect_error(
        [&] {
          c->make_pipeline(spirv, {max_buffers + 1, 16, true}, 64);
        },
        "pipeline", "too many buffers");
    expect_error(
        [&] {
          c->make_pipeline(spirv, {max_buffers + 2, 16, false}, 64);
        },
        "pipeline", "too many buffers");
  }
  SECTION("dispatch") {
    const vk::buffer_ref one[] = {{&b}}, refs[] = {{&b}, {&y}};
    expect_error([&] { c->dispatch(*p, one, {}, 1); }, "dispatch", "wrong number of buffers");
    const std::vector<std::byte> too_many(20);
    expect_error([&] { c->dispatch(*p, refs, too_many, 1); }, "dispatch", "push constants");
    const auto& most = c->info().limits.max_workgroup_count;
    expect_error([&] { c->dispatch(*p, refs, {}, most[0] + 1); }, "dispatch", "workgroups");
    expect_error([&] { c->dispatch(*p, refs, {}, 1, 1, most[2] + 1); }, "dispatch", "workgroups");
    // No workgroups: no work, no error.
    const std::vector<float> ones(250, 1.0f);
    c->write(y, 0, ones.data(), 1000);
    c->dispatch(*p, refs, bytes_of({0, 0, 250}), 0);
    std::vector<float> back(250);
    c->read(y, 0, back.data(), 1000);
    CHECK(back == ones);
  }
  // Still usable after every error above.
  const auto x = uniform<float>(250, -1, 1);
  const auto out = run_saxpy(*c, *p, x, 2, 3);
  for (std::size_t i = 0; i < x.size(); ++i)
    REQUIRE(close_to(out[i], 2.0 * x[i] + 3, 5));
  c->release(b);
  c->release(y);
}

TEST_CASE("vulkan runtime: the pipeline cache can be saved and seeded", "[vulkan][runtime]") {
  const int index = device_index();
  if (index < 0) return;
  const auto spirv = saxpy();
  if (spirv.empty()) return;
  const auto c = context_for(mode::mapped);
  const auto p = c->make_pipeline(spirv, {2, 16, false}, 64);
  const auto blob = c->pipeline_cache_data();
  REQUIRE(blob.size() >= 16 + VK_UUID_SIZE); // at least the header
  std::uint32_t header[2];
  std::memcpy(header, blob.data(), sizeof header);
  CHECK(header[0] >= 16 + VK_UUID_SIZE); // header length
  CHECK(header[1] == VK_PIPELINE_CACHE_HEADER_VERSION_ONE);
  CHECK(c->seed_pipeline_cache(blob));
  vk::context_options o;
  o.pipeline_cache = blob;
  const auto seeded = vk::context::create(index, o);
  const auto x = uniform<float>(1000, -1, 1);
  const auto y = run_saxpy(*seeded, *seeded->make_pipeline(spirv, {2, 16, false}, 64), x, 1, 1);
  for (std::size_t i = 0; i < x.size(); ++i)
    REQUIRE(close_to(y[i], x[i] + 1.0, 2));
}

TEST_CASE("vulkan runtime: host cost of a dispatch and of a round trip", "[vulkan][runtime]") {
  const auto c = context_for(mode::mapped);
  if (!c) return;
  const auto spirv = saxpy();
  if (spirv.empty()) return;
  const auto p = c->make_pipeline(spirv, {2, 16, false}, 64);
  const vk::block bx = c->allocate(256), by = c->allocate(256);
  const vk::buffer_ref refs[] = {{&bx}, {&by}};
  const saxpy_params params{1, 1, 64};
  using clock = std::chrono::steady_clock;
  std::vector<double> dispatch_ns;
  for (int k = 0; k < 10000; ++k) {
    const auto before = c->submitted_epoch();
    const auto t0 = clock::now();
    c->dispatch(*p, refs, bytes_of(params), 1);
    const auto t1 = clock::now();
    if (c->submitted_epoch() == before) // excluding the dispatches that submitted a batch
      dispatch_ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
  }
  c->synchronize();
  std::vector<double> round_trip_us;
  for (int k = 0; k < 200; ++k) {
    const auto t0 = clock::now();
    c->dispatch(*p, refs, bytes_of(params), 1);
    c->synchronize();
    round_trip_us.push_back(std::chrono::duration<double, std::micro>(clock::now() - t0).count());
  }
  auto median = [](std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  const double d = median(dispatch_ns), r = median(round_trip_us);
  std::printf("[%s] host cost per dispatch (median of %zu, no submits): %.0f ns; "
              "dispatch + submit + wait (median of 200): %.1f us%s\n",
              c->info().name.c_str(), dispatch_ns.size(), d, r,
              vk::instance_options::from_environment().validation ? " (validation layer on)" : "");
  CHECK(dispatch_ns.size() >= 9000);
  CHECK(d < 1e6); // sanity only: timings on a shared 2-core machine are not a test
  c->release(bx);
  c->release(by);
}
