// The fusion JIT on a Metal device against the host evaluator: one kernel per expression
// type (new sizes and scalars compile nothing), several outputs from one kernel with
// broadcasting and views, the reductions in every stage accumulating in f32, f64 refused
// with a clear error, 40 tensors split into stages within Metal's 31 buffer arguments,
// single-flight compiles and the caching allocator. Skipped with the
// reason where there is no Metal (every platform but Apple's); the `msl-on-cpu:` tests run
// it on the CPU stand-in (metal_support.hpp). The catalog and random trees, shared with the
// other backends, are test_device_catalog_*.cpp and test_device_trees.cpp.
#include "device_exec_checks.hpp"
#include "error_support.hpp"
#include "metal_support.hpp"

#include "kiln/jit/metal/framework.hpp"

#include <cmath>
#include <cstring>
#include <thread>

namespace {

using device_test::made;
using device_test::on_host;

} // namespace

TEST_CASE("metal: a kernel is compiled once per expression type, whatever the sizes and scalars",
          "[metal]") {
  const kiln::device* dev = metal_or_skip();
  if (!dev) return;
  auto check_one = [&](std::int64_t n, float s) {
    const auto h = kiln::random::normal<float>({n}, test::draw(1, 1 << 20));
    const kiln::tensor<float> got = kiln::tanh(h.to(*dev)) * s + 1.0f;
    const auto g = on_host(got), hv = h.to_vector();
    REQUIRE(g.size() == hv.size());
    // Within a few ulp of each term (float tanh and product, then the sum's rounding).
    const double eps = std::numeric_limits<float>::epsilon();
    for (std::size_t i = 0; i < hv.size(); ++i) {
      const double t = std::tanh(double(hv[i])) * s;
      REQUIRE(std::abs(g[i] - (t + 1.0)) <= 8 * eps * (std::abs(t) + 1.0));
    }
  };
  check_one(777, 2.5f);
  const auto before = made();
  for (int k = 0; k < 4; ++k)
    check_one(test::draw(1, 1 << 18), test::uniform<float>(1, -4, 4)[0]);
  CHECK(made() == before);
}

TEST_CASE("metal: several outputs from one kernel, broadcasting, views as leaves and targets",
          "[metal]") {
  if (const kiln::device* dev = metal_or_skip()) device_test::check_outputs_and_views(*dev);
}

TEST_CASE("metal: the reductions on short, long and two-pass rows accumulate in f32 and match "
          "double references",
          "[metal]") {
  const kiln::device* dev = metal_or_skip();
  if (!dev) return;
  for (const std::int64_t cols : {5, 300, 100000}) {
    const std::int64_t rows = cols > 1000 ? 2 : 7;
    const auto ah = kiln::random::uniform<float>({rows, cols}, test::draw(1, 999), -2, 2);
    const auto a = ah.to(*dev);
    const auto av = ah.to_vector();
    std::vector<double> sum(rows), max(rows, -INFINITY), sq(rows);
    std::vector<std::int64_t> amax(rows);
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t j = 0; j < cols; ++j) {
        const double v = av[std::size_t(i * cols + j)];
        sum[i] += v;
        sq[i] += v * v;
        if (v > max[i]) max[i] = v, amax[i] = j;
      }
    INFO(rows << " x " << cols);
    // f32 accumulation: the error grows with the row (pairwise-ish on the device).
    const double tol = 1e-6 * std::sqrt(double(cols)) + 1e-6;
    const auto s = on_host(kiln::tensor<float>(kiln::sum(a, {1})));
    const auto m = on_host(kiln::tensor<float>(kiln::max(a, {1})));
    const auto am = on_host(kiln::tensor<std::int64_t>(kiln::argmax(a, 1)));
    const auto n2 = on_host(kiln::tensor<float>(kiln::norm(a, {1})));
    const auto mean = on_host(kiln::tensor<float>(kiln::mean(a, {1})));
    for (std::int64_t i = 0; i < rows; ++i) {
      CHECK(std::abs(s[i] - sum[i]) <= tol * (double(cols) * 2));
      CHECK(m[i] == max[i]);
      CHECK(am[i] == amax[i]);
      CHECK(std::abs(n2[i] - std::sqrt(sq[i])) <= tol * std::sqrt(sq[i]) * 4);
      CHECK(std::abs(mean[i] - sum[i] / double(cols)) <= tol * 2);
    }
    CHECK(on_host(kiln::tensor<bool>(kiln::any(a > 1.99f, {1}))) ==
          kiln::tensor<bool>(kiln::any(ah > 1.99f, {1})).to_vector());
  }
}

TEST_CASE("metal: f64 tensors and f64 arithmetic are a clear error", "[metal]") {
  const kiln::device* dev = metal_or_skip();
  if (!dev) return;
  CHECK_THROWS_WITH(kiln::zeros<double>({8}, *dev), Catch::Contains("64-bit floats"));
  const auto i = kiln::from(std::vector<std::int32_t>{1, 2, 3}, kiln::shape{3}, *dev);
  // Math on integers computes in double, as on the host: refused here, naming the op.
  CHECK_THROWS_WITH(kiln::tensor<double>(kiln::sin(i)), Catch::Contains("64-bit floats"));
  CHECK_THROWS_WITH(kiln::tensor<float>(kiln::cast<float>(kiln::sin(i))),
                    Catch::Contains("64-bit floats"));
}

TEST_CASE("metal: 40 distinct tensors run as several kernels within Metal's buffer arguments",
          "[metal]") {
  if (const kiln::device* dev = metal_or_skip())
    device_test::check_many_leaves<std::int32_t, 40>(*dev, 37);
}

TEST_CASE("metal: threads needing one new kernel share one compile", "[metal]") {
  if (const kiln::device* dev = metal_or_skip()) device_test::check_single_flight(*dev);
}

TEST_CASE("metal: freed blocks are reused by the caching allocator", "[metal]") {
  if (const kiln::device* dev = metal_or_skip()) device_test::check_arena_reuse(*dev);
}

namespace {

namespace metal = kiln::jit::metal;

// y[i] = 2 y[i] + 1, and -1 where y[i] is NaN: under fast math (Metal's default) the NaN test
// folds away.
const std::string twice_plus_one = R"(#include <metal_stdlib>
using namespace metal;
kernel void kiln_kernel(device float* y [[buffer(0)]], constant uint& n [[buffer(1)]],
                        uint i [[thread_position_in_grid]]) {
  if (i < n) y[i] = isnan(y[i]) ? -1.0f : 2.0f * y[i] + 1.0f;
}
)";

// Runs twice_plus_one's pipeline `p` of `rt` on n random values (some NaN) and checks each.
void check_twice_plus_one(metal::runtime& rt, void* p, std::uint32_t n) {
  std::vector<float> x(n);
  const auto r = kiln::random::normal<float>({n}, test::draw(7, 1 << 20)).to_vector();
  for (std::uint32_t i = 0; i < n; ++i)
    x[i] = i % 97 == 5 ? std::numeric_limits<float>::quiet_NaN() : r[i];
  void* buf = rt.allocate(n * sizeof(float));
  REQUIRE(buf);
  rt.write(buf, 0, x.data(), n * sizeof(float));
  std::byte params[4];
  std::memcpy(params, &n, 4);
  void* const bufs[] = {buf};
  rt.dispatch(p, bufs, params, (n + 255) / 256, 1, 256);
  std::vector<float> y(n, 7.0f);
  rt.read(buf, 0, y.data(), n * sizeof(float)); // waits for the dispatch
  rt.release(buf);
  for (std::uint32_t i = 0; i < n; ++i)
    REQUIRE(y[i] == (std::isnan(x[i]) ? -1.0f : 2.0f * x[i] + 1.0f));
}

} // namespace

TEST_CASE("metal: a runtime that never compiled a kernel makes its pipeline from the disk "
          "cache's binary archive, and refuses damaged or foreign binaries",
          "[metal]") {
  if (!metal_or_skip()) return;
  std::string why;
  const auto& compiled_by = metal::framework_device(why);
  REQUIRE(compiled_by);
  const auto binary = compiled_by->compile(twice_plus_one, "kiln_kernel");
  // A second runtime over the same framework: nothing memoized, as in a new process.
  metal::framework_runtime fresh(metal::framework());
  void* p = fresh.pipeline(binary, "kiln_kernel");
  REQUIRE(p);
  fresh.timer_begin();
  check_twice_plus_one(fresh, p, 1000);
  CHECK(fresh.timer_end_ns() >= 0);

  metal::framework_runtime other(metal::framework());
  auto damaged = binary; // the archive's first byte: Metal no longer reads it as one
  damaged[8 + 8 + twice_plus_one.size()] ^= std::byte{0x5a};
  CHECK(other.pipeline(damaged, "kiln_kernel") == nullptr);
  auto truncated = binary;
  truncated.resize(12); // the magic and half the source's length
  CHECK(other.pipeline(truncated, "kiln_kernel") == nullptr);
  const std::vector<std::byte> foreign(64, std::byte{0x7f});
  CHECK(other.pipeline(foreign, "kiln_kernel") == nullptr);
  // Another kernel's archive under this source: an archive miss, so compiled again.
  metal::archived_kernel a, b;
  REQUIRE(a.parse(binary));
  REQUIRE(b.parse(compiled_by->compile(twice_plus_one + "// another kernel\n", "kiln_kernel")));
  a.archive = b.archive;
  CHECK(other.pipeline(a.bytes(), "kiln_kernel") == nullptr);
}

TEST_CASE("metal: the runtime's compile errors carry the compiler's log and the source",
          "[metal]") {
  if (!metal_or_skip()) return;
  std::string why;
  const auto& rt = metal::framework_device(why);
  REQUIRE(rt);
  const std::string bad = "#include <metal_stdlib>\nkernel void kiln_kernel(device float* y "
                          "[[buffer(0)]]) { y[0] = undeclared_name; }\n";
  expect_error([&] { rt->compile(bad, "kiln_kernel"); }, "jit",
               {"Metal compiler rejected", "undeclared_name"});
  expect_error([&] { rt->compile(twice_plus_one, "no_such_kernel"); }, "jit",
               {"no such kernel", "no_such_kernel"});
}

TEST_CASE("metal: a dispatch that fails on the device is an error at the next wait, not lost, "
          "and a threadgroup larger than the pipeline allows is refused",
          "[metal]") {
  if (!metal_or_skip()) return;
  std::string why;
  const auto& rt = metal::framework_device(why);
  REQUIRE(rt);
  void* p = rt->pipeline(rt->compile(twice_plus_one, "kiln_kernel"), "kiln_kernel");
  REQUIRE(p);
  void* buf = rt->allocate(1024);
  REQUIRE(buf);
  std::uint32_t n = 16;
  std::byte params[4];
  std::memcpy(params, &n, 4);
  void* const bufs[] = {buf};
  expect_error([&] { rt->dispatch(p, bufs, params, 1, 1, 4096); }, "metal",
               {"larger than its pipeline allows", "4096 threads"});
  // Half the threads at a barrier the other half never reach: the stand-in fails that
  // dispatch, as a GPU's command buffer would report an error.
  const std::string diverging = R"(#include <metal_stdlib>
using namespace metal;
kernel void kiln_kernel(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  if (i % 2 == 0) threadgroup_barrier(mem_flags::mem_threadgroup);
  y[i] = 1.0f;
}
)";
  void* bad = rt->pipeline(rt->compile(diverging, "kiln_kernel"), "kiln_kernel");
  REQUIRE(bad);
  rt->dispatch(bad, bufs, params, 1, 1, 64);
  expect_error([&] { rt->synchronize(); }, "metal", {"kernel failed on the device"});
  rt->synchronize();                 // reported once
  check_twice_plus_one(*rt, p, 300); // and the queue goes on
  rt->release(buf);
}

TEST_CASE("metal: more memory than one Metal buffer holds is a clear out-of-memory error",
          "[metal]") {
  const kiln::device* dev = metal_or_skip();
  if (!dev) return;
  // 2^36 bytes is the stand-in's maxBufferLength.
  expect_error([&] { (void)kiln::zeros<float>({std::int64_t{1} << 35}, *dev); }, "zeros",
               {"out of device memory", "137438953472 bytes"});
}

TEST_CASE("metal: a Metal framework that does not load says why", "[metal]") {
  const auto l = metal::objc::load("/nonexistent/libMetal-stand-in.so");
  CHECK_FALSE(l.ok());
  CHECK(l.why_not.find("cannot be loaded") != std::string::npos);
  CHECK(l.why_not.find("/nonexistent/libMetal-stand-in.so") != std::string::npos);
}

TEST_CASE("metal: a captured plan replays its recorded launches, bit for bit", "[metal]") {
  if (const kiln::device* dev = metal_or_skip()) device_test::check_plan_replay(*dev);
}
