// kiln::eval computes every output from the values before the call (numpy's semantics),
// whatever the outputs' targets share with the inputs and with each other: one planner
// decides for the host and for a device (include/kiln/eval/assign.hpp). Each case runs on
// the host and on vulkan:0 (lavapipe, validation layer on) against a reference computed
// from copies of the values taken before the call.
#include "vulkan_support.hpp"

#include <functional>

namespace {

using vec = std::vector<float>;

kiln::tensor<float> random_on(const kiln::shape& s, const kiln::device& d) {
  return kiln::random::uniform<float>(s, test::draw(1, 1 << 30), -8, 8).to(d);
}

vec values(const kiln::tensor<float>& t) { return t.to(kiln::device{}).to_vector(); }

// Runs `body` on the host, then on vulkan:0 where there is one.
void on_every_device(const std::function<void(const kiln::device&)>& body) {
  {
    INFO("host");
    body(kiln::device{});
  }
  if (const kiln::device* gpu = vulkan_or_skip()) {
    INFO(gpu->str());
    body(*gpu);
  }
}

// The elements of an n x n row-major matrix, transposed.
vec transposed(const vec& v, std::int64_t n) {
  vec t(v.size());
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j)
      t[static_cast<std::size_t>(j * n + i)] = v[static_cast<std::size_t>(i * n + j)];
  return t;
}

vec reversed(vec v) {
  std::reverse(v.begin(), v.end());
  return v;
}

} // namespace

TEST_CASE("eval: a swap through transposes computes both outputs from the old values",
          "[eval][alias]") {
  on_every_device([](const kiln::device& d) {
    const std::int64_t n = test::draw(2, 300);
    auto a = random_on({n, n}, d), b = random_on({n, n}, d);
    const vec a0 = values(a), b0 = values(b);
    kiln::eval(a = b.transpose() + 0.0f, b = a.transpose() + 0.0f);
    CHECK(values(a) == transposed(b0, n));
    CHECK(values(b) == transposed(a0, n));
  });
}

TEST_CASE("eval: a swap through reversed slices computes both outputs from the old values",
          "[eval][alias]") {
  on_every_device([](const kiln::device& d) {
    const std::int64_t n = test::draw(1, 100000);
    auto x = random_on({n}, d), y = random_on({n}, d);
    const vec x0 = values(x), y0 = values(y);
    kiln::eval(x = y.slice(0, n - 1, -n - 1, -1) + 0.0f, y = x.slice(0, n - 1, -n - 1, -1) + 0.0f);
    CHECK(values(x) == reversed(y0));
    CHECK(values(y) == reversed(x0));
  });
}

TEST_CASE("eval: shifted narrows of one tensor as target and inputs", "[eval][alias]") {
  on_every_device([](const kiln::device& d) {
    const std::int64_t n = test::draw(3, 50000);
    auto x = random_on({n}, d);
    kiln::tensor<float> y({n - 1}, d);
    const vec x0 = values(x);
    // x[1:] = x[:-1] + 1 and y = 2 x[1:], both from the old x.
    kiln::eval(x.narrow(0, 1, n - 1) = x.narrow(0, 0, n - 1) + 1.0f,
               y = x.narrow(0, 1, n - 1) * 2.0f);
    vec wx = x0, wy(static_cast<std::size_t>(n - 1));
    for (std::int64_t i = 1; i < n; ++i)
      wx[static_cast<std::size_t>(i)] = x0[static_cast<std::size_t>(i - 1)] + 1.0f;
    for (std::int64_t i = 0; i + 1 < n; ++i)
      wy[static_cast<std::size_t>(i)] = x0[static_cast<std::size_t>(i + 1)] * 2.0f;
    CHECK(values(x) == wx);
    CHECK(values(y) == wy);
  });
}

TEST_CASE("eval: outputs reading each other's targets", "[eval][alias]") {
  on_every_device([](const kiln::device& d) {
    const std::int64_t n = test::draw(1, 20000);
    auto a = random_on({n}, d), b = random_on({n}, d);
    const vec a0 = values(a), b0 = values(b);
    // Same layout: each element is read before it is written, in one pass.
    kiln::eval(a = b + 1.0f, b = a * 2.0f);
    vec wa(a0.size()), wb(a0.size());
    for (std::size_t i = 0; i < a0.size(); ++i) {
      wa[i] = b0[i] + 1.0f;
      wb[i] = a0[i] * 2.0f;
    }
    CHECK(values(a) == wa);
    CHECK(values(b) == wb);
    // Another layout: b reversed is read while b is written.
    const vec a1 = values(a), b1 = values(b);
    kiln::eval(a = b.slice(0, n - 1, -n - 1, -1) - a, b = a + b);
    const vec rb1 = reversed(b1);
    for (std::size_t i = 0; i < a1.size(); ++i) {
      wa[i] = rb1[i] - a1[i];
      wb[i] = a1[i] + b1[i];
    }
    CHECK(values(a) == wa);
    CHECK(values(b) == wb);
  });
}

TEST_CASE("eval: an output that is a view of another output's input", "[eval][alias]") {
  on_every_device([](const kiln::device& d) {
    // Square: on a GPU device the outputs of one eval share a shape.
    const std::int64_t r = test::draw(1, 200), c = r;
    auto x = random_on({r, c}, d), w = random_on({c, r}, d);
    kiln::tensor<float> z({r, c}, d);
    const vec x0 = values(x), w0 = values(w);
    // z reads x; the second target is x seen transposed.
    kiln::eval(z = x * 2.0f, x.transpose() = w + 1.0f);
    vec wz(x0.size()), wx(x0.size());
    for (std::int64_t i = 0; i < r; ++i)
      for (std::int64_t j = 0; j < c; ++j) {
        const auto k = static_cast<std::size_t>(i * c + j);
        wz[k] = x0[k] * 2.0f;
        wx[k] = w0[static_cast<std::size_t>(j * r + i)] + 1.0f;
      }
    CHECK(values(z) == wz);
    CHECK(values(x) == wx);
  });
}

TEST_CASE("eval: a single assignment through an overlapping view", "[eval][alias]") {
  on_every_device([](const kiln::device& d) {
    const std::int64_t n = test::draw(2, 300);
    auto a = random_on({n, n}, d);
    const vec a0 = values(a);
    a = a.transpose() * 1.0f; // read transposed, written in place: through a temporary
    CHECK(values(a) == transposed(a0, n));
  });
}
