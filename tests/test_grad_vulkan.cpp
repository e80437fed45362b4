// Adjoint expressions on the Vulkan device (lavapipe runs it on the CPU here): the value
// and its gradients in one generated kernel, broadcasting and views (reductions and
// scatters on the device), and second order, against the host.
#include "vulkan_support.hpp"

namespace {

std::uint64_t kernels_made() {
  return kiln::jit::compile_count().load() + kiln::jit::disk_hit_count().load();
}

std::vector<float> host_values(const auto& e) {
  return kiln::tensor<float>(e).to(kiln::device{}).to_vector();
}

void check_near(const std::vector<float>& got, const std::vector<float>& want, float tol) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    REQUIRE(std::abs(got[i] - want[i]) <= tol * std::max(1.0f, std::abs(want[i])));
  }
}

} // namespace

TEST_CASE("vulkan: value and gradients of an elementwise expression in one kernel", "[grad]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  const auto xh = kiln::random::uniform<float>({1000}, test::draw(1, 1000), -2, 2);
  const auto yh = kiln::random::uniform<float>({1000}, test::draw(1, 1000), -2, 2);
  const auto sh = kiln::random::uniform<float>({1000}, test::draw(1, 1000), -1, 1);
  const auto x = xh.to(*dev), y = yh.to(*dev), s = sh.to(*dev);
  auto expr = [](const auto& a, const auto& b) { return kiln::sin(a) * b + kiln::exp(a * 0.5f); };
  auto [dx, dy] = kiln::vjp(expr(x, y), s, x, y);
  kiln::tensor<float> out({1000}, *dev), gx({1000}, *dev), gy({1000}, *dev);
  kiln::tensor<float> warm(kiln::shape{}, *dev);
  warm = 0.0f; // the rank-0 zero an adjoint materializes with: its fill kernel, made first
  (void)warm.item();
  const auto before = kernels_made();
  kiln::eval(out = expr(x, y), gx = dx, gy = dy);
  CHECK(kernels_made() == before + 1); // three outputs, one kernel
  auto [hx, hy] = kiln::vjp(expr(xh, yh), sh, xh, yh);
  check_near(host_values(out), host_values(expr(xh, yh)), 1e-5f);
  check_near(host_values(gx), host_values(hx), 1e-5f);
  check_near(host_values(gy), host_values(hy), 1e-5f);
}

TEST_CASE("vulkan: a rank-0 loss and its gradients in one kiln::eval", "[grad]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  const auto xh = kiln::random::uniform<float>({500}, test::draw(1, 1000), -2, 2);
  const auto yh = kiln::random::uniform<float>({500}, test::draw(1, 1000), -2, 2);
  const auto x = xh.to(*dev), y = yh.to(*dev);
  auto f = [](const auto& a, const auto& b) { return kiln::sum(kiln::sin(a) * b + a * a); };
  auto [dx, dy] = kiln::grad(f(x, y), x, y);
  kiln::tensor<float> loss(kiln::shape{}, *dev), gx({500}, *dev), gy({500}, *dev);
  kiln::eval(loss = f(x, y), gx = dx, gy = dy);
  auto [hx, hy] = kiln::grad(f(xh, yh), xh, yh);
  const float want = kiln::tensor<float>(f(xh, yh)).item();
  CHECK(loss.device() == *dev);
  CHECK(std::abs(loss.item() - want) <= 1e-4f * (1 + std::abs(want)));
  check_near(host_values(gx), host_values(hx), 1e-5f);
  check_near(host_values(gy), host_values(hy), 1e-5f);
  // Two computed outputs of different shapes: one kernel each, as on the host (issue 37).
  kiln::tensor<float> small({5}, *dev);
  small = 3.0f;
  kiln::eval(gx = x * 2.0f, small = x.narrow(0, 0, 5) * 2.0f + small);
  const auto xs = host_values(xh);
  const auto g = host_values(gx), sm = host_values(small);
  for (std::size_t i = 0; i < xs.size(); ++i)
    CHECK(g[i] == 2.0f * xs[i]);
  for (std::size_t i = 0; i < 5; ++i)
    CHECK(sm[i] == 2.0f * xs[i] + 3.0f);
}

TEST_CASE("vulkan: grad through broadcasting, views, reductions and second order", "[grad]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  const auto ah = kiln::random::uniform<float>({3, 4}, test::draw(1, 1000), -1, 1);
  const auto bh = kiln::random::uniform<float>({4}, test::draw(1, 1000), -1, 1);
  const auto a = ah.to(*dev), b = bh.to(*dev);
  auto f = [](const auto& p, const auto& q) {
    return kiln::sum(kiln::tanh(p * q) + p.transpose().transpose() * 0.5f) +
           kiln::sum(kiln::exp(kiln::sum(p, 1) * 0.3f));
  };
  auto [da, db] = kiln::grad(f(a, b), a, b);
  auto [ha, hb] = kiln::grad(f(ah, bh), ah, bh);
  check_near(host_values(da), host_values(ha), 1e-5f);
  check_near(host_values(db), host_values(hb), 1e-5f);
  auto [d1] = kiln::grad(kiln::sum(kiln::sin(b)), b);
  auto [d2] = kiln::grad(kiln::sum(d1), b);
  check_near(host_values(d2), host_values(-kiln::sin(bh)), 1e-5f);
}

// Optimizer steps on device parameters: the update kernels run there and the state (SGD's
// velocity, Adam's moments) is made there; values against a plain loop in double.
TEST_CASE("vulkan: SGD and Adam steps on device parameters against a plain loop", "[grad]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  constexpr int n = 300;
  const auto w = test::uniform<double>(n, 0.5, 2), c = test::uniform<double>(n, -1, 1),
             p0 = test::uniform<double>(n, -2, 2), q0 = test::uniform<double>(n, -2, 2);
  auto on_device = [&](const std::vector<double>& v) {
    return kiln::from(std::vector<float>(v.begin(), v.end()), kiln::shape{n}).to(*dev);
  };
  auto check_params = [&](const kiln::tensor<float>& t, const std::vector<double>& want) {
    CHECK(t.device() == *dev);
    const auto got = t.to(kiln::device{}).to_vector();
    for (int i = 0; i < n; ++i) {
      INFO("element " << i);
      REQUIRE(std::abs(got[i] - want[i]) <= 1e-4 * std::max(1.0, std::abs(want[i])));
    }
  };
  for (const bool adam : {false, true}) {
    INFO((adam ? "AdamW" : "SGD, Nesterov momentum, weight decay"));
    const auto W = on_device(w), C = on_device(c), P = on_device(p0), Q = on_device(q0);
    auto [dp, dq] = kiln::grad(kiln::sum(W * (P - C) * (P - C)) + kiln::sum(kiln::sin(Q)), P, Q);
    std::vector<double> p = p0, q = q0, mp(n), mq(n), vp(n), vq(n);
    const double lr = 0.05, mu = 0.9, wd = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-8;
    kiln::optim::sgd<float> sgd({P, Q},
                                {.lr = lr, .momentum = mu, .weight_decay = wd, .nesterov = true});
    kiln::optim::adam<float> adamw({P, Q}, {.lr = lr, .weight_decay = wd, .decoupled = true});
    for (int t = 1; t <= 3; ++t) {
      if (adam)
        adamw.step(dp, dq);
      else
        sgd.step(dp, dq);
      for (int i = 0; i < n; ++i)
        for (auto [x, m, v, g] : {std::tuple<double&, double&, double&, double>{
                                      p[i], mp[i], vp[i], 2 * w[i] * (p[i] - c[i])},
                                  {q[i], mq[i], vq[i], std::cos(q[i])}}) {
          if (adam) {
            m = b1 * m + (1 - b1) * g;
            v = b2 * v + (1 - b2) * g * g;
            x *= 1 - lr * wd;
            x -= lr * (m / (1 - std::pow(b1, t))) / (std::sqrt(v / (1 - std::pow(b2, t))) + eps);
          } else {
            g += wd * x;
            m = mu * m + g;
            x -= lr * (g + mu * m);
          }
        }
    }
    check_params(P, p);
    check_params(Q, q);
    const auto& state = adam ? adamw.first_moments() : sgd.velocity();
    for (const auto& s : state)
      CHECK(s.device() == *dev);
    if (adam)
      for (const auto& s : adamw.second_moments())
        CHECK(s.device() == *dev);
  }
}
