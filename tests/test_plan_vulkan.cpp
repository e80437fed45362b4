// Captured plans on vulkan:0 (lavapipe here, the validation layer on): replays of random
// statement sequences against the same statements as written on the device, bit for bit
// (the same kernels on the same values); a training step; what a device plan refuses.
#include "vulkan_support.hpp" // first: it registers a Catch listener

#include "error_support.hpp"
#include "plan_support.hpp"

using kiln::tensor;
using plan_test::same_bits;

TEST_CASE("plan on vulkan: replays equal the statements as written on random sequences",
          "[plan][vulkan]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  for (int c = 0; c < 24; ++c)
    plan_test::random_case<float>(c, *dev);
}

TEST_CASE("plan on vulkan: a training step and a stencil replay on the device", "[plan][vulkan]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  const std::int64_t n = 200, d = 6;
  const auto X = plan_test::drawn<float>({n, d}).to(*dev);
  const auto Y = kiln::cast<float>(kiln::sum(X, 1) > 0.0f).eval();
  tensor<float> w = kiln::zeros<float>({d}, *dev), b = kiln::zeros<float>(kiln::shape{}, *dev);
  tensor<float> wr = w.clone(), br = b.clone();
  const auto loss_of = [&](const tensor<float>& w, const tensor<float>& b) {
    const auto z = kiln::sum(X * w, 1) + b;
    return kiln::mean(kiln::softplus(z) - Y * z);
  };
  const auto loss = loss_of(w, b), loss_r = loss_of(wr, br);
  auto [dw, db] = kiln::grad(loss, w, b);
  auto [dwr, dbr] = kiln::grad(loss_r, wr, br);
  kiln::optim::adam<float> opt({w, b}, {.lr = 0.05}), opt_r({wr, br}, {.lr = 0.05});
  auto step = kiln::capture(
      [&, &dw = dw, &db = db](const tensor<float>&, const tensor<float>&) { opt.step(dw, db); },
      {.name = "device training step"});
  for (int i = 0; i < 8; ++i) {
    step(X, Y);
    opt_r.step(dwr, dbr);
    REQUIRE(same_bits(w, wr));
    REQUIRE(same_bits(b, br));
  }
  CHECK(tensor<float>(loss).item() < 0.6f);
  // The heat stencil through narrow views, the arguments' roles traded at every call.
  auto heat = kiln::capture(
      [](tensor<float>& v, const tensor<float>& u, kiln::param<float> r) {
        const std::int64_t m = u.dim(0);
        const auto in = [&](const tensor<float>& t, std::int64_t di, std::int64_t dj) {
          return t.narrow(0, 1 + di, m - 2).narrow(1, 1 + dj, m - 2);
        };
        in(v, 0, 0) = in(u, 0, 0) + r * (in(u, -1, 0) + in(u, 1, 0) + in(u, 0, -1) + in(u, 0, 1) -
                                         4.0f * in(u, 0, 0));
      },
      {.name = "device heat step"});
  tensor<float> u = plan_test::drawn<float>({40, 40}).to(*dev), v = u.clone();
  tensor<float> ur = u.clone(), vr = u.clone();
  for (int s = 0; s < 6; ++s) {
    heat(s % 2 ? u : v, s % 2 ? v : u, 0.2f);
    const std::int64_t m = 40;
    auto& to = s % 2 ? ur : vr;
    auto& from = s % 2 ? vr : ur;
    to.narrow(0, 1, m - 2).narrow(1, 1, m - 2) =
        from.narrow(0, 1, m - 2).narrow(1, 1, m - 2) +
        kiln::param<float>(0.2f) * (from.narrow(0, 0, m - 2).narrow(1, 1, m - 2) +
                                    from.narrow(0, 2, m - 2).narrow(1, 1, m - 2) +
                                    from.narrow(0, 1, m - 2).narrow(1, 0, m - 2) +
                                    from.narrow(0, 1, m - 2).narrow(1, 2, m - 2) -
                                    4.0f * from.narrow(0, 1, m - 2).narrow(1, 1, m - 2));
  }
  CHECK(same_bits(u, ur));
  CHECK(same_bits(v, vr));
}

TEST_CASE("plan on vulkan: another device or a host tensor where the capture saw the device",
          "[plan][vulkan]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  auto plan = kiln::capture(
      [](tensor<float>& y, const tensor<float>& x) { y = kiln::exp(x) * 2.0f; }, {.name = "dev"});
  tensor<float> x = plan_test::drawn<float>({50}).to(*dev), y = kiln::zeros<float>({50}, *dev);
  plan(y, x);
  tensor<float> xh = x.to(kiln::device{}), yh = y.to(kiln::device{});
  expect_error([&] { plan(yh, xh); }, "plan dev", {"argument 1 was captured on vulkan:0", "host"});
  // Reading values inside is refused on a device too; a copy between devices also.
  auto reads = kiln::capture(
      [](tensor<float>& y, const tensor<float>& x) {
        y = x;
        (void)y.to_vector();
      },
      {.name = "reads"});
  expect_error([&] { reads(y, x); }, "plan reads", {"to_vector"});
  auto copies = kiln::capture(
      [](tensor<float>& y, const tensor<float>& x) { y = x.to(kiln::device{}).to(x.device()); },
      {.name = "copies"});
  expect_error([&] { copies(y, x); }, "plan copies", {"to", "between devices"});
  // A plan made on the device still replays after the tensors it saw are gone.
  {
    tensor<float> x2 = plan_test::drawn<float>({50}).to(*dev), y2 = kiln::zeros<float>({50}, *dev);
    plan(y2, x2);
    CHECK(same_bits(y2, tensor<float>(kiln::exp(x2) * 2.0f)));
  }
}
