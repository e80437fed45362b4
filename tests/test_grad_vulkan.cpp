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
  // Two computed outputs of different shapes cannot share a kernel: a clear error, before
  // anything is written.
  kiln::tensor<float> small({5}, *dev);
  small = 3.0f;
  const auto kept = host_values(gx);
  CHECK_THROWS_WITH(kiln::eval(gx = x * 2.0f, small = x.narrow(0, 0, 5) * 2.0f),
                    Catch::Contains("one shape") && Catch::Contains("[500], [5]"));
  CHECK(host_values(gx) == kept);
  CHECK(host_values(small) == std::vector<float>(5, 3.0f));
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
