// The fusion JIT on a Metal device against the host evaluator: one kernel per expression
// type (new sizes and scalars compile nothing), several outputs from one kernel with
// broadcasting and views, the reductions in every stage accumulating in f32, f64 refused
// with a clear error, 40 tensors split into stages within Metal's 31 buffer arguments,
// single-flight compiles and the caching allocator. Skipped with the
// reason where there is no Metal (every platform but Apple's); the `msl-on-cpu:` tests run
// it on the CPU stand-in (metal_support.hpp). The catalog and random trees, shared with the
// other backends, are test_device_catalog_*.cpp and test_device_trees.cpp.
#include "device_exec_checks.hpp"
#include "metal_support.hpp"

#include <cmath>
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
  const kiln::device* dev = metal_or_skip();
  if (!dev) return;
  const auto xh = kiln::random::uniform<float>({9, 4}, test::draw(1, 99), -3, 3);
  const auto rh = kiln::random::uniform<float>({4}, test::draw(1, 99), -3, 3);
  const auto x = xh.to(*dev), r = rh.to(*dev);
  auto o1 = kiln::full<float>({9, 4}, NAN, *dev);
  auto o2 = kiln::full<kiln::half>({9, 4}, kiln::half(1.0f), *dev);
  auto o3 = kiln::full<bool>({9, 4}, true, *dev);
  const auto before = made();
  kiln::eval(o1 = kiln::maximum(x, r) - r, o2 = kiln::cast<kiln::half>(x * r), o3 = x > r);
  CHECK(made() <= before + 1);
  CHECK(on_host(o1) == kiln::tensor<float>(kiln::maximum(xh, rh) - rh).to_vector());
  CHECK(on_host(o2) == kiln::tensor<kiln::half>(kiln::cast<kiln::half>(xh * rh)).to_vector());
  CHECK(on_host(o3) == kiln::tensor<bool>(xh > rh).to_vector());
  auto t = kiln::zeros<float>({4, 12}, *dev);
  auto th = kiln::zeros<float>({4, 12});
  t.slice(1, 0, 12, 3) = x.transpose().narrow(1, 2, 4) + 0.5f;
  th.slice(1, 0, 12, 3) = xh.transpose().narrow(1, 2, 4) + 0.5f;
  CHECK(on_host(t) == th.to_vector());
  t = t * 4.0f - 1.0f;
  th = th * 4.0f - 1.0f;
  CHECK(on_host(t) == th.to_vector());
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
