// Regression tests for the bugs the differential fuzzer (test_fuzz.cpp) found, each cut
// down from the fuzz case named above it (replay: KILN_FUZZ_CASE=<n> test_fuzz --rng-seed <s>).
#include "vulkan_support.hpp" // first: it registers a Catch listener

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace {

std::vector<kiln::device> host_and_vulkan() {
  std::vector<kiln::device> r{kiln::device{}};
  if (const kiln::device* gpu = vulkan_or_skip()) r.push_back(*gpu);
  return r;
}

} // namespace

// --rng-seed 3, case 85 (max of f64 over 4,855,126 elements: the largest element lay past
// the first 64 * 65535); --rng-seed 7, case 5 (sum over both axes of {..., 3}); --rng-seed 1,
// case 5. llvmpipe ends a shader loop after 65,535 iterations, and the reduction kernel
// strided one workgroup of 64 over the whole reduced extent.
TEST_CASE("fuzz regression: reductions see every element past 64 * 65535", "[fuzz][vulkan]") {
  const std::int64_t n = 4855126;
  for (const kiln::device& dev : host_and_vulkan()) {
    INFO("on " << dev.str());
    kiln::tensor<double> x = kiln::zeros<double>({n}, dev);
    x.narrow(0, n - 1, 1) = 2.0;
    CHECK(kiln::max(x).item() == 2.0);
    CHECK(kiln::argmax(x).item() == n - 1);
    CHECK(kiln::mean(x, {0}, true).item() == 2.0 / double(n));
    const auto ones = kiln::ones<std::int32_t>({n / 3, 3}, dev);
    CHECK(kiln::sum(ones, {0, 1}, true).item() == n / 3 * 3);
  }
}

// --rng-seed 8, case 129 (and cases 18, 47): kiln::eval(A = e1, B = e2) where e2 reads,
// through another view, the buffer A is written to. Every output must be computed from the
// values before the call (numpy semantics); the device path checked each output's target
// only against its own expression, so B read A's new values.
TEST_CASE("fuzz regression: a second output reads the buffer the first one writes",
          "[fuzz][vulkan]") {
  const std::int64_t n = 32; // more than one SIMD batch of llvmpipe's invocations
  std::vector<double> vb(2 * n), vx(n);
  for (std::int64_t i = 0; i < 2 * n; ++i)
    vb[i] = double(i);
  for (std::int64_t i = 0; i < n; ++i)
    vx[i] = 1000.0 + double(i);
  for (const kiln::device& dev : host_and_vulkan()) {
    INFO("on " << dev.str());
    const auto buf = kiln::from(vb, kiln::shape{2 * n}, dev);
    const auto x = kiln::from(vx, kiln::shape{n}, dev);
    kiln::tensor<double> A = buf.narrow(0, 0, n);
    kiln::tensor<double> B = kiln::zeros<double>({n}, dev);
    const auto m = buf.narrow(0, 0, n).slice(0, n - 1, -n - 1, -1); // A's elements, reversed
    kiln::eval(A = x * 1.0, B = m + 0.0);
    const auto after = buf.to_vector(), b = B.to_vector();
    for (std::int64_t i = 0; i < n; ++i) {
      CHECK(after[i] == vx[i]);
      CHECK(after[n + i] == vb[n + i]);
      CHECK(b[i] == vb[n - 1 - i]); // the old values of A's elements
    }
  }
}

// --rng-seed 52, case 592 (the product over {333, 189} of a float tree): with two threads
// the chunks' products were multiplied in double: one chunk's product had underflowed to 0,
// another's overflowed to inf, and 0 * inf is NaN (one thread gave 0). Products now keep
// their exponent apart (reduce.hpp, scaled_product; the same in the device kernels): no
// partial product leaves the range, and the thread count does not change the result.
TEST_CASE("fuzz regression: prod does not depend on the host thread count", "[fuzz]") {
  const std::int64_t n = 1 << 21;              // split over threads (a task per 2^19 elements)
  std::vector<float> v(n, 1e-3f);              // the first half multiplies to below double's range
  std::fill(v.begin() + n / 2, v.end(), 1e3f); // the second half to above it
  const auto x = kiln::from(v, kiln::shape{n});
  // The exact product, through logarithms: (1e-3f * 1e3)^(n/2).
  const double want = std::exp(double(n / 2) * std::log1p(double(1e-3f) * 1e3 - 1.0));
  const int threads = kiln::num_threads();
  kiln::set_num_threads(1);
  const float one = kiln::prod(x).item();
  kiln::set_num_threads(2);
  const float two = kiln::prod(x).item();
  kiln::set_num_threads(threads);
  CHECK(test::same_value(one, two));
  CHECK(one == Approx(want).epsilon(1e-6));
  if (const kiln::device* gpu = vulkan_or_skip())
    CHECK(kiln::prod(x.to(*gpu)).item() == Approx(want).epsilon(1e-6));
}

TEST_CASE("prod of factors whose partial products leave double's range, host and device",
          "[reduce][prod]") {
  // Log-uniform factors in [1e-30, 1e30] and near-reciprocals of them, sorted: the running
  // product first falls far below double's range, then climbs back to a value near 1. The
  // exact product is exp(sum log x).
  const std::int64_t n = 1 << 20;
  auto v = test::uniform<double>(static_cast<std::size_t>(n), -30, 30);
  const auto eps = test::uniform<double>(static_cast<std::size_t>(n), -1e-3, 1e-3);
  for (std::size_t i = 0; i < v.size(); i += 2) {
    v[i] = std::pow(10.0, v[i]);
    v[i + 1] = (1 + eps[i]) / v[i];
  }
  long double logs = 0;
  for (const double e : v)
    logs += std::log(static_cast<long double>(e));
  std::sort(v.begin(), v.end());
  const long double want = std::exp(logs);
  for (const kiln::device& d : host_and_vulkan()) {
    INFO(d.str() << ", sum of logs " << static_cast<double>(logs));
    const auto x = kiln::from(v, kiln::shape{n}).to(d);
    const double got = kiln::prod(x).item();
    if (std::isfinite(static_cast<double>(want)) && want != 0)
      CHECK(got == Approx(static_cast<double>(want)).epsilon(1e-9));
    else
      CHECK(got == static_cast<double>(want)); // 0 or inf: as the exact product rounds
    // Over one axis too: 16 outputs of 2^16 factors, each a sorted run.
    const auto rows = kiln::tensor<double>(kiln::prod(x.reshape({16, n / 16}), 1)).to({});
    for (std::int64_t r = 0; r < 16; ++r) {
      long double lr = 0;
      for (std::int64_t j = 0; j < n / 16; ++j)
        lr += std::log(static_cast<long double>(v[static_cast<std::size_t>(r * (n / 16) + j)]));
      const double w = static_cast<double>(std::exp(lr));
      if (std::isfinite(w) && w != 0)
        CHECK(rows.at({r}) == Approx(w).epsilon(1e-9));
      else
        CHECK(rows.at({r}) == w);
    }
  }
}
