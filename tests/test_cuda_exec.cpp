// The fusion JIT on a CUDA device against the host evaluator: kernels specialized on types
// and access pattern only (new sizes and scalars compile nothing), several outputs from one
// kernel with broadcasting and views, all nine reductions, 16-bit floats, 64-bit counts of
// kernels, a 200-leaf expression split into stages, the disk cache and caching allocator.
// Skipped with the reason where no GPU or driver is found (cuda_support.hpp); the catalog
// and random trees, shared with Vulkan, are test_device_catalog_*.cpp and test_device_trees.cpp.
#include "cuda_support.hpp"
#include "device_exec_checks.hpp"

#include <cmath>
#include <limits>
#include <thread>

namespace {

using device_test::made;
using device_test::on_host;

// x * s[0] + ... + x * s[2^D - 1] as a balanced tree: one leaf and 2^D scalar parameters
// (the two halves share a type, so D instantiations, not 2^D).
template <int D, class X>
auto scaled_tree(const X& x, const double* s) {
  if constexpr (D == 0)
    return x * s[0];
  else
    return scaled_tree<D - 1>(x, s) + scaled_tree<D - 1>(x, s + (1 << (D - 1)));
}

} // namespace

TEST_CASE("cuda: 512 scalars in one kernel past the classic 4 KiB of parameters", "[cuda]") {
  const kiln::device* dev = cuda_or_skip();
  if (!dev) return;
  const auto s = test::uniform<double>(512, -2, 2);
  const auto xh = kiln::random::normal<double>({1000}, test::draw(1, 1 << 20));
  const auto xs = xh.to_vector();
  try {
    const kiln::tensor<double> got = scaled_tree<9>(xh.to(*dev), s.data());
    const auto g = on_host(got);
    REQUIRE(g.size() == xs.size());
    for (std::size_t i = 0; i < xs.size(); ++i) {
      long double want = 0, mag = 0;
      for (double sk : s) {
        want += static_cast<long double>(xs[i]) * sk;
        mag += std::abs(static_cast<long double>(xs[i]) * sk);
      }
      REQUIRE(std::abs(g[i] - static_cast<double>(want)) <= 1e-14 * static_cast<double>(mag));
    }
  } catch (const kiln::error& e) {
    // Only a device without large kernel parameters (before sm_70, or a driver or NVRTC
    // older than 12.1) may refuse it, and then with the limit named.
    INFO(e.what());
    CHECK(std::string(e.what()).find("the limit is 4096") != std::string::npos);
    WARN("this device has only 4 KiB of kernel parameters: " << e.what());
  }
}

TEST_CASE("cuda: a kernel is compiled once per expression type, whatever the sizes and scalars",
          "[cuda]") {
  const kiln::device* dev = cuda_or_skip();
  if (!dev) return;
  auto check_one = [&](std::int64_t n, double s) {
    const auto h = kiln::random::normal<double>({n}, test::draw(1, 1 << 20));
    const kiln::tensor<double> got = kiln::tanh(h.to(*dev)) * s + 1.0;
    const kiln::tensor<double> want = kiln::tanh(h) * s + 1.0;
    const auto g = on_host(got), w = want.to_vector();
    // Within a few ulp of each term: NVRTC contracts tanh(h) * s + 1 into one fma (measured
    // on an H200: 8 ulp of a result near 0, where the two terms cancel).
    const double eps = std::numeric_limits<double>::epsilon();
    for (std::size_t i = 0; i < w.size(); ++i)
      REQUIRE(std::abs(g[i] - w[i]) <= 4 * eps * (std::abs(w[i] - 1.0) + 1.0));
  };
  check_one(777, 2.5);
  const auto before = made();
  for (int k = 0; k < 5; ++k)
    check_one(test::draw(1, 1 << 20), test::uniform<double>(1, -4, 4)[0]);
  CHECK(made() == before);
}

TEST_CASE("cuda: several outputs from one kernel, broadcasting, views as leaves and targets",
          "[cuda]") {
  if (const kiln::device* dev = cuda_or_skip()) device_test::check_outputs_and_views(*dev);
}

TEST_CASE("cuda: the nine reductions on short and long rows, chained on the device", "[cuda]") {
  const kiln::device* dev = cuda_or_skip();
  if (!dev) return;
  for (const std::int64_t cols : {5, 300}) { // a thread per output, a block per output
    const auto ah = kiln::random::uniform<float>({7, cols}, test::draw(1, 999), -2, 2);
    const auto a = ah.to(*dev);
    auto close = [](const std::vector<float>& g, const std::vector<float>& w) {
      REQUIRE(g.size() == w.size());
      for (std::size_t i = 0; i < w.size(); ++i)
        CHECK(std::abs(g[i] - w[i]) <= 1e-5f * (1 + std::abs(w[i])));
    };
    close(on_host(kiln::tensor<float>(kiln::sum(a * 2.0f, {1}))),
          kiln::tensor<float>(kiln::sum(ah * 2.0f, {1})).to_vector());
    close(on_host(kiln::tensor<float>(kiln::mean(a, {1}))),
          kiln::tensor<float>(kiln::mean(ah, {1})).to_vector());
    close(on_host(kiln::tensor<float>(kiln::prod(a * 0.5f + 1.0f, {1}))),
          kiln::tensor<float>(kiln::prod(ah * 0.5f + 1.0f, {1})).to_vector());
    CHECK(on_host(kiln::tensor<float>(kiln::max(a, {1}))) ==
          kiln::tensor<float>(kiln::max(ah, {1})).to_vector());
    CHECK(on_host(kiln::tensor<float>(kiln::min(a, {0}))) ==
          kiln::tensor<float>(kiln::min(ah, {0})).to_vector());
    CHECK(on_host(kiln::tensor<std::int64_t>(kiln::argmax(a, 1))) ==
          kiln::tensor<std::int64_t>(kiln::argmax(ah, 1)).to_vector());
    CHECK(on_host(kiln::tensor<std::int64_t>(kiln::argmin(a, 1))) ==
          kiln::tensor<std::int64_t>(kiln::argmin(ah, 1)).to_vector());
    CHECK(on_host(kiln::tensor<bool>(kiln::all(a > -1.5f, {1}))) ==
          kiln::tensor<bool>(kiln::all(ah > -1.5f, {1})).to_vector());
    CHECK(on_host(kiln::tensor<bool>(kiln::any(a > 1.9f, {1}))) ==
          kiln::tensor<bool>(kiln::any(ah > 1.9f, {1})).to_vector());
    // A reduction feeding an elementwise kernel, no host round trip in between.
    const kiln::tensor<float> centered = a - kiln::mean(a, {1}, true);
    close(on_host(centered), kiln::tensor<float>(ah - kiln::mean(ah, {1}, true)).to_vector());
  }
}

TEST_CASE("cuda: logsumexp, var, stddev, the norms and count_nonzero, short, long and two-pass "
          "rows, and a gradient",
          "[cuda]") {
  const kiln::device* dev = cuda_or_skip();
  if (!dev) return;
  // A thread per output, a block per output, and partials merged in a second pass.
  for (const std::int64_t cols : {5, 300, 300000}) {
    const auto ah = kiln::random::uniform<float>({3, cols}, test::draw(1, 999), -3, 3);
    const auto bh = kiln::random::uniform<double>({3, cols}, test::draw(1, 999), -3, 3);
    const auto a = ah.to(*dev);
    const auto b = bh.to(*dev);
    auto close = [](const auto& got, const auto& want, double tol) {
      const auto g = on_host(got), w = want.to_vector();
      REQUIRE(g.size() == w.size());
      for (std::size_t i = 0; i < w.size(); ++i)
        CHECK(std::abs(double(g[i]) - double(w[i])) <= tol * (1 + std::abs(double(w[i]))));
    };
    using F = kiln::tensor<float>;
    using D = kiln::tensor<double>;
    close(F(kiln::logsumexp(a, {1})), F(kiln::logsumexp(ah, {1})), 1e-6);
    close(F(kiln::var(a, {1}, kiln::ddof(1))), F(kiln::var(ah, {1}, kiln::ddof(1))), 1e-6);
    close(F(kiln::stddev(a, {0})), F(kiln::stddev(ah, {0})), 1e-6);
    close(F(kiln::norm(a, {1})), F(kiln::norm(ah, {1})), 1e-6);
    close(F(kiln::norm<1>(a, {1})), F(kiln::norm<1>(ah, {1})), 1e-6);
    close(F(kiln::norm<kiln::inf_norm>(a, {1})), F(kiln::norm<kiln::inf_norm>(ah, {1})), 0);
    close(kiln::tensor<std::int64_t>(kiln::count_nonzero(a > 1.0f, {1})),
          kiln::tensor<std::int64_t>(kiln::count_nonzero(ah > 1.0f, {1})), 0);
    close(D(kiln::logsumexp(b, {1})), D(kiln::logsumexp(bh, {1})), 1e-12);
    close(D(kiln::var(b, {1})), D(kiln::var(bh, {1})), 1e-12);
    close(D(kiln::norm(b, {1})), D(kiln::norm(bh, {1})), 1e-12);
  }
  const auto xh = kiln::random::uniform<float>({4, 50}, test::draw(1, 999), -2, 2);
  const auto x = xh.to(*dev);
  auto f = [](const auto& v) {
    return kiln::sum(kiln::logsumexp(v, {1}) + kiln::stddev(v, {1}) + kiln::norm(v, {1}));
  };
  auto [gd] = kiln::grad(f(x), x);
  auto [gh] = kiln::grad(f(xh), xh);
  const auto vd = on_host(kiln::tensor<float>(gd));
  const auto vh = kiln::tensor<float>(gh).to_vector();
  for (std::size_t i = 0; i < vd.size(); ++i)
    CHECK(std::abs(vd[i] - vh[i]) <= 1e-5f * (1 + std::abs(vh[i])));
}

TEST_CASE("cuda: 200 distinct leaves run as several kernels within the parameter space", "[cuda]") {
  if (const kiln::device* dev = cuda_or_skip())
    device_test::check_many_leaves<std::int64_t, 200>(*dev, 41);
}

TEST_CASE("cuda: threads needing one new kernel share one compile", "[cuda]") {
  if (const kiln::device* dev = cuda_or_skip()) device_test::check_single_flight(*dev);
}

TEST_CASE("cuda: freed blocks are reused by the caching allocator", "[cuda]") {
  if (const kiln::device* dev = cuda_or_skip()) device_test::check_arena_reuse(*dev);
}

// With the driver's stream-ordered pool (a GPU, or the stand-in given a memory size by
// KILN_CUDA_ON_CPU_POOL_BYTES; the CTest test "cuda-on-cpu: the driver's pool ...") and with
// kiln's own caching arena (the stand-in's default), memory_stats tells what is held, freed
// blocks included, and empty_cache gives it back. Where the device's size is known (the
// stand-in's pool), an allocation that fits only once the kept blocks are given back succeeds,
// and one past the device's memory is a kiln::error.
TEST_CASE("cuda: memory_stats counts the blocks kept after a free, empty_cache gives them back, "
          "an allocation that needs them succeeds",
          "[cuda][pool]") {
  const kiln::device* dev = cuda_or_skip();
  if (!dev) return;
  constexpr std::int64_t mib = 1 << 20;
  kiln::synchronize(*dev);
  kiln::empty_cache(*dev);
  const auto start = kiln::memory_stats(*dev);
  {
    const auto t = kiln::full<float>({10 * mib / 4}, 1.5f, *dev); // 10 MiB
    kiln::synchronize(*dev);
    CHECK(kiln::memory_stats(*dev).in_use >= start.in_use + 10 * mib);
  }
  kiln::synchronize(*dev);
  const auto kept = kiln::memory_stats(*dev);
  INFO("start in use " << start.in_use << ", reserved " << start.reserved << "; after the free "
                       << kept.in_use << ", " << kept.reserved);
  CHECK(kept.in_use == start.in_use);
  // The freed block is kept for the next statement. (A GPU's pool reserves in chunks, and a
  // chunk that still backs a live block is not given back: hence no exact figures there.)
  CHECK(kept.reserved >= kept.in_use + 10 * mib);
  kiln::empty_cache(*dev);
  const auto emptied = kiln::memory_stats(*dev);
  INFO("after empty_cache " << emptied.in_use << ", " << emptied.reserved);
  CHECK(emptied.reserved <= kept.reserved);
  if (cuda_test::on_cpu()) {
    CHECK(emptied.reserved < kept.reserved);
    CHECK(emptied.reserved <= emptied.in_use + 10 * mib);
  }

  const char* size = std::getenv("KILN_CUDA_ON_CPU_POOL_BYTES");
  if (!cuda_test::on_cpu() || !size || !*size) return;
  const auto device_bytes = std::int64_t(std::strtoull(size, nullptr, 10));
  REQUIRE(device_bytes == 64 * mib); // as tests/CMakeLists.txt sets it
  {
    const auto a = kiln::full<float>({40 * mib / 4}, 2.0f, *dev);
    kiln::synchronize(*dev);
  }
  kiln::synchronize(*dev);
  CHECK(kiln::memory_stats(*dev).reserved >= kiln::memory_stats(*dev).in_use + 40 * mib);
  // 40 MiB kept by the pool and 48 asked for: only after the pool gives its blocks back.
  std::vector<float> v(std::size_t(48 * mib / 4));
  for (std::size_t i = 0; i < v.size(); i += 4099)
    v[i] = float(i % 977) * 0.25f;
  const auto b = kiln::from(v, kiln::shape{std::int64_t(v.size())}, *dev);
  CHECK(b.to_vector() == v);
  // 48 MiB more while b lives: past the device's 64, an error naming the allocation.
  CHECK_THROWS_WITH(kiln::tensor<float>(b * 2.0f),
                    Catch::Contains("cuMemAllocAsync of 50331648 bytes failed"));
  CHECK(b.to_vector() == v); // b untouched
}

TEST_CASE("cuda: a captured plan replays its recorded launches, bit for bit", "[cuda]") {
  if (const kiln::device* dev = cuda_or_skip()) device_test::check_plan_replay(*dev);
}

TEST_CASE("cuda: a plan's replay is one CUDA graph, its nodes set where arguments change",
          "[cuda]") {
  const kiln::device* dev = cuda_or_skip();
  if (!dev) return;
  using kiln::tensor;
  const auto counts = [&] {
    return dynamic_cast<const kiln::jit::cuda::cuda_backend&>(*kiln::backend_for(*dev)).graphs();
  };
  // Four kernels: two passes, a row sum, a pass reading it.
  const auto body = [](tensor<float>& y, tensor<float>& rows, const tensor<float>& a,
                       const tensor<float>& b, kiln::param<float> s) {
    y = a * b + s;
    y = kiln::exp(-y * y) * b + a * s;
    rows = kiln::sum(y * s, 1);
    y = y - rows.unsqueeze(1);
  };
  auto plan = kiln::capture(body, {.name = "cuda graph"});
  const std::int64_t m = test::draw(2, 30), n = test::draw(3, 500);
  const tensor<float> a = kiln::random::uniform<float>({m, n}, std::uint64_t(test::draw(1, 999)),
                                                       -1, 1, *dev),
                      b = kiln::random::uniform<float>({m, n}, std::uint64_t(test::draw(1, 999)),
                                                       -1, 1, *dev);
  tensor<float> y = kiln::zeros<float>({m, n}, *dev), rows = kiln::zeros<float>({m}, *dev);
  tensor<float> yr = y.clone(), rr = rows.clone();
  struct delta {
    std::uint64_t made, launched, set;
  };
  const auto call = [&](const tensor<float>& x, const tensor<float>& w, float s) {
    const auto before = counts();
    plan(y, rows, x, w, s);
    const auto after = counts();
    body(yr, rr, x, w, kiln::param<float>(s));
    REQUIRE(y.to_vector() == yr.to_vector());
    REQUIRE(rows.to_vector() == rr.to_vector());
    return delta{after.made - before.made, after.launched - before.launched,
                 after.nodes_set - before.nodes_set};
  };
  call(a, b, 0.5f); // the capture: launched as written
  REQUIRE(plan.steps() >= 4);
  const delta first = call(a, b, 0.5f);
  CHECK(first.made == 1);
  CHECK(first.launched == 1);
  const delta same = call(a, b, 0.5f); // nothing changed: the graph launched again as it is
  CHECK(same.made == 0);
  CHECK(same.launched == 1);
  CHECK(same.set == 0);
  for (int i = 0; i < 4; ++i) { // a new scalar, the arguments' roles traded: nodes set
    const delta d = call(i % 2 ? b : a, i % 2 ? a : b, test::uniform<float>(1, -2, 2)[0]);
    CHECK(d.made == 0);
    CHECK(d.launched == 1);
    CHECK(d.set >= 1);
  }
  // Replays queued one after another with their own scalars, read afterwards: each launch
  // ran with the arguments it was given (nodes set while earlier launches were queued).
  std::vector<float> values;
  std::vector<tensor<float>> outs;
  for (int i = 0; i < 4; ++i) {
    values.push_back(test::uniform<float>(1, -2, 2)[0]);
    plan(y, rows, a, b, values.back());
    outs.push_back(y * 1.0f);
  }
  for (int i = 0; i < 4; ++i) {
    body(yr, rr, a, b, kiln::param<float>(values[std::size_t(i)]));
    REQUIRE(outs[std::size_t(i)].to_vector() == tensor<float>(yr * 1.0f).to_vector());
  }
}
