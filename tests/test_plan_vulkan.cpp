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

namespace {
// Pre-recorded command buffers of vulkan:0 executed and recorded so far.
std::pair<std::uint64_t, std::uint64_t> prerecorded(const kiln::device& dev) {
  const auto be = kiln::backend_for(dev);
  return dynamic_cast<const kiln::jit::vk::vulkan_backend&>(*be).prerecorded();
}
} // namespace

TEST_CASE("plan on vulkan: a step's kernels replay as one pre-recorded command buffer",
          "[plan][vulkan]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  const std::int64_t n = test::draw(100, 5000);
  const auto body = [](tensor<float>& out, const tensor<float>& a, const tensor<float>& b,
                       kiln::param<float> s) {
    out = a * b + s;
    for (int i = 1; i < 20; ++i) // 20 kernels, each reading what the one before wrote
      out = out * b + a * s;
  };
  auto plan = kiln::capture(body, {.name = "twenty kernels"});
  tensor<float> a = plan_test::drawn<float>({n}).to(*dev),
                b = plan_test::drawn<float>({n}).to(*dev);
  tensor<float> o1 = kiln::zeros<float>({n}, *dev), o2 = o1.clone(), r = o1.clone();
  const auto check = [&](tensor<float>& o, const tensor<float>& x, const tensor<float>& y,
                         float s) {
    const auto before = prerecorded(*dev);
    plan(o, x, y, s);
    const auto after = prerecorded(*dev);
    body(r, x, y, kiln::param<float>(s));
    REQUIRE(same_bits(o, r));
    return std::pair{after.first - before.first, after.second - before.second};
  };
  plan(o1, a, b, 0.5f); // the capture: launched as written
  CHECK(plan.steps() == 20);
  // The same memory and scalars: one command buffer executed, nothing recorded.
  CHECK(check(o1, a, b, 0.5f) == std::pair<std::uint64_t, std::uint64_t>{1, 1});
  for (int i = 0; i < 3; ++i)
    CHECK(check(o1, a, b, 0.5f) == std::pair<std::uint64_t, std::uint64_t>{1, 0});
  // Arguments traded between calls (a ping-pong loop): one recording for each binding, kept.
  CHECK(check(o2, b, a, 0.5f).second == 1);
  for (int i = 0; i < 4; ++i) {
    CHECK(check(o1, a, b, 0.5f) == std::pair<std::uint64_t, std::uint64_t>{1, 0});
    CHECK(check(o2, b, a, 0.5f) == std::pair<std::uint64_t, std::uint64_t>{1, 0});
  }
  // A new value of the parameter each call: the kernels read it from a buffer the queue
  // writes, so the buffers recorded for both bindings run again, right, recording nothing.
  for (int i = 0; i < 6; ++i) {
    const float s = test::uniform<float>(1, -2, 2)[0];
    CHECK(check(i % 2 ? o1 : o2, i % 2 ? a : b, i % 2 ? b : a, s) ==
          std::pair<std::uint64_t, std::uint64_t>{1, 0});
  }
  // Several replays with their own values queued before any of them ran (one submission):
  // each reads its own.
  {
    std::vector<tensor<float>> outs;
    std::vector<float> values;
    const auto before = prerecorded(*dev);
    for (int i = 0; i < 5; ++i) {
      values.push_back(test::uniform<float>(1, -2, 2)[0]);
      outs.push_back(kiln::zeros<float>({n}, *dev));
    }
    for (int i = 0; i < 5; ++i) {
      plan(o1, a, b, values[std::size_t(i)]);
      outs[std::size_t(i)] = o1 * 1.0f; // (queued behind it, before the next replay)
    }
    const auto after = prerecorded(*dev);
    CHECK(after.first - before.first == 5);
    for (int i = 0; i < 5; ++i) {
      body(r, a, b, kiln::param<float>(values[std::size_t(i)]));
      REQUIRE(same_bits(outs[std::size_t(i)], tensor<float>(r * 1.0f)));
    }
  }
  // Memory given back to the driver between replays: recorded again.
  kiln::synchronize(*dev);
  {
    // (past 64 MiB: a chunk of its own, which empty_cache destroys)
    tensor<float> spare = kiln::zeros<float>({(std::int64_t{1} << 24) + 1}, *dev);
  }
  kiln::empty_cache(*dev);
  CHECK(check(o1, a, b, 0.5f).second == 1);
  // In place, with a parameter equal to a constant of the expression at the capture (one
  // kernel scalar for both), then not (two: another kernel), then equal again.
  auto inplace = kiln::capture(
      [](tensor<float>& x, const tensor<float>& y, kiln::param<float> s) {
        x = x * s + y * 0.75f;
        x = kiln::exp(-x * x) + y * s;
      },
      {.name = "in place"});
  tensor<float> x = a.clone(), xr = a.clone();
  for (int i = 0; i < 8; ++i) {
    const float s = i < 3 || i == 6 ? 0.75f : test::uniform<float>(1, -1, 1)[0];
    inplace(x, b, s);
    xr = xr * kiln::param<float>(s) + b * 0.75f;
    xr = kiln::exp(-xr * xr) + b * kiln::param<float>(s);
    REQUIRE(same_bits(x, xr));
  }
  // A pass of more distinct views than one kernel binds: its stages' temporaries are the
  // plan's, written again by every replay.
  auto wide = kiln::capture(
      [](tensor<float>& y, const tensor<float>& x) {
        y = x.narrow(0, 0, 8);
        for (std::int64_t k = 1; k < 40; ++k)
          y = y + x.narrow(0, k, 8) * static_cast<float>(k);
      },
      {.name = "many views"});
  auto wide_sum = kiln::capture(
      [](tensor<float>& y, const tensor<float>& x) {
        tensor<float> acc = x.narrow(0, 0, 8) * 1.0f; // (the function's own, on the device)
        y = acc + x.narrow(0, 1, 8) + x.narrow(0, 2, 8) + x.narrow(0, 3, 8) + x.narrow(0, 4, 8) +
            x.narrow(0, 5, 8) + x.narrow(0, 6, 8) + x.narrow(0, 7, 8) + x.narrow(0, 8, 8) +
            x.narrow(0, 9, 8) + x.narrow(0, 10, 8) + x.narrow(0, 11, 8) + x.narrow(0, 12, 8) +
            x.narrow(0, 13, 8) + x.narrow(0, 14, 8) + x.narrow(0, 15, 8) + x.narrow(0, 16, 8) +
            x.narrow(0, 17, 8) + x.narrow(0, 18, 8) + x.narrow(0, 19, 8) + x.narrow(0, 20, 8) +
            x.narrow(0, 21, 8) + x.narrow(0, 22, 8) + x.narrow(0, 23, 8) + x.narrow(0, 24, 8) +
            x.narrow(0, 25, 8) + x.narrow(0, 26, 8) + x.narrow(0, 27, 8) + x.narrow(0, 28, 8) +
            x.narrow(0, 29, 8) + x.narrow(0, 30, 8) + x.narrow(0, 31, 8) + x.narrow(0, 32, 8) +
            x.narrow(0, 33, 8) + x.narrow(0, 34, 8) + x.narrow(0, 35, 8) + x.narrow(0, 36, 8) +
            x.narrow(0, 37, 8) + x.narrow(0, 38, 8) + x.narrow(0, 39, 8) + x.narrow(0, 40, 8);
      },
      {.name = "many views in one pass"});
  for (int i = 0; i < 4; ++i) {
    tensor<float> xs = plan_test::drawn<float>({48}).to(*dev);
    tensor<float> y = kiln::zeros<float>({8}, *dev), yr = y.clone(), y2 = y.clone();
    wide(y, xs);
    wide_sum(y2, xs);
    const auto xv = xs.to_vector();
    const auto yv = y.to_vector(), y2v = y2.to_vector();
    for (std::int64_t j = 0; j < 8; ++j) {
      double want = 0, want2 = 0;
      for (std::int64_t k = 0; k < 40; ++k)
        want += double(xv[std::size_t(j + k)]) * double(k == 0 ? 1 : k);
      for (std::int64_t k = 0; k <= 40; ++k)
        want2 += double(xv[std::size_t(j + k)]);
      CHECK(std::abs(yv[std::size_t(j)] - want) <= 1e-4 * (1 + std::abs(want)) * 40);
      CHECK(std::abs(y2v[std::size_t(j)] - want2) <= 1e-5 * 41 * 4);
    }
  }
  // A plan destroyed while the work it queued may still run: the device lets go of its
  // command buffers once that work has finished.
  {
    auto brief = kiln::capture(body, {.name = "brief"});
    brief(o1, a, b, 0.25f);
    brief(o1, a, b, 0.25f);
  }
  plan(o2, a, b, 0.25f);
  body(r, a, b, kiln::param<float>(0.25f));
  CHECK(same_bits(o2, r));
}

TEST_CASE("plan on vulkan: reductions replay from their recorded launches", "[plan][vulkan]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  // Row sums and a mean over every element (large: partials and a second pass), their
  // operands scaled by a parameter, and a pass reading both.
  const auto body = [](tensor<float>& y, tensor<float>& rows, const tensor<float>& x,
                       kiln::param<float> s) {
    rows = kiln::sum(x * s, 1);
    y = x - kiln::mean(x * x + s) + kiln::max(x * s, 0);
  };
  auto plan = kiln::capture(body, {.name = "reductions"});
  const std::int64_t m = test::draw(600, 900), n = test::draw(700, 1100);
  const tensor<float> x = plan_test::drawn<float>({m, n}).to(*dev);
  tensor<float> y = kiln::zeros<float>({m, n}, *dev), rows = kiln::zeros<float>({m}, *dev);
  tensor<float> yr = y.clone(), rr = rows.clone();
  std::uint64_t recorded_at_fixed = 0;
  for (int i = 0; i < 8; ++i) {
    const float s = i < 4 ? 0.5f : test::uniform<float>(1, -1, 1)[0];
    const auto before = prerecorded(*dev);
    plan(y, rows, x, s);
    const auto after = prerecorded(*dev);
    body(yr, rr, x, kiln::param<float>(s));
    REQUIRE(same_bits(y, yr));
    REQUIRE(same_bits(rows, rr));
    if (i > 0) CHECK(after.first - before.first == 1); // the whole step, one command buffer
    if (i >= 2 && i < 4) recorded_at_fixed += after.second - before.second;
  }
  CHECK(recorded_at_fixed == 0);
  // A training step (gradient reductions, an optimizer's update) replays as one too.
  const std::int64_t rows_n = 300, d = 5;
  const auto X = plan_test::drawn<float>({rows_n, d}).to(*dev);
  const auto Y = kiln::cast<float>(kiln::sum(X, 1) > 0.0f).eval();
  tensor<float> w = kiln::zeros<float>({d}, *dev), b = kiln::zeros<float>(kiln::shape{}, *dev);
  const auto z = kiln::sum(X * w, 1) + b;
  const auto loss = kiln::mean(kiln::softplus(z) - Y * z);
  auto [dw, db] = kiln::grad(loss, w, b);
  kiln::optim::adam<float> opt({w, b}, {.lr = 0.05});
  auto step = kiln::capture(
      [&, &dw = dw, &db = db](const tensor<float>&, const tensor<float>&) { opt.step(dw, db); },
      {.name = "training step"});
  step(X, Y);
  step(X, Y); // (the first replay records)
  const auto before = prerecorded(*dev);
  for (int i = 0; i < 5; ++i)
    step(X, Y);
  const auto after = prerecorded(*dev);
  INFO("steps " << step.steps() << ", command buffers executed " << after.first - before.first
                << " and recorded " << after.second - before.second << " in 5 replays");
  CHECK(after.first - before.first == 5);
  // Its bias-corrected rate changes every step: a parameter, read from a buffer.
  CHECK(after.second - before.second == 0);
}

TEST_CASE("plan on vulkan: a product and its consumer replay on the device", "[plan][vulkan]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  const std::int64_t n = test::draw(20, 90), k = test::draw(5, 40), m = test::draw(3, 30);
  const auto xh = plan_test::drawn<float>({n, k}), wh = plan_test::drawn<float>({k, m}),
             bh = plan_test::drawn<float>({m});
  const auto x = xh.to(*dev), w = wh.to(*dev), b = bh.to(*dev);
  tensor<float> y = kiln::zeros<float>({n, m}, *dev);
  auto layer = kiln::capture([](tensor<float>& y, const tensor<float>& x, const tensor<float>& w,
                                const tensor<float>& b) { y = kiln::relu(kiln::matmul(x, w) + b); },
                             {.name = "device layer"});
  const auto xv = xh.to_vector(), wv = wh.to_vector(), bv = bh.to_vector();
  for (int i = 0; i < 4; ++i) {
    const auto before = prerecorded(*dev);
    layer(y, x, w, b);
    const auto after = prerecorded(*dev);
    if (i > 0) CHECK(after.first - before.first == 1); // the product and the pass, one buffer
    const auto yv = y.to_vector();
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t c = 0; c < m; ++c) {
        double acc = 0, mag = 0;
        for (std::int64_t q = 0; q < k; ++q) {
          acc += double(xv[std::size_t(r * k + q)]) * wv[std::size_t(q * m + c)];
          mag += std::abs(double(xv[std::size_t(r * k + q)]) * wv[std::size_t(q * m + c)]);
        }
        const double want = std::max(0.0, acc + bv[std::size_t(c)]);
        REQUIRE(std::abs(yv[std::size_t(r * m + c)] - want) <= 1e-5 * (mag + 1));
      }
  }
}
