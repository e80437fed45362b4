// Captured plans (kiln::capture): a replay computes what the statements compute when run as
// written, bit for bit, on random statement sequences over random shapes, views and argument
// sharing; what a plan refuses, each a kiln::error at the call; what a plan holds.
#include "error_support.hpp"
#include "plan_support.hpp"

#include <atomic>
#include <cstring>
#include <functional>
#include <optional>
#include <sstream>
#include <thread>

namespace {

using kiln::tensor;
using plan_test::drawn;
using plan_test::random_case;
using plan_test::same_bits;

} // namespace

TEST_CASE("plan: replays equal the statements as written bit for bit on random sequences",
          "[plan]") {
  for (int c = 0; c < test::cases(300); ++c) {
    random_case<float>(c);
    if (c % 3 == 0) random_case<double>(c);
  }
}

// A pass over rows of views (a stencil's interior) replays as one kernel call per row of
// its merged space, the operands' addresses stepped from row to row: 2-D and 3-D blocks,
// a row broadcast over rows (a step of 0), a block written from a shifted block of itself.
template <class T>
void stencil_step(tensor<T>& u, tensor<T>& v, tensor<T>& w, const tensor<T>& row,
                  kiln::param<T> r) {
  const std::int64_t m = u.shape()[0], n = u.shape()[1];
  const auto in = [&](const tensor<T>& t, std::int64_t di, std::int64_t dj) {
    return t.narrow(0, 1 + di, m - 2).narrow(1, 1 + dj, n - 2);
  };
  const auto c = in(u, 0, 0);
  in(v, 0, 0) = c + r * (in(u, -1, 0) + in(u, 1, 0) + in(u, 0, -1) + in(u, 0, 1) - T(4) * c);
  in(u, 0, 0) = in(v, 0, 0) * T(0.5) + row;
  u.narrow(1, 1, n - 2) = u.narrow(1, 0, n - 2) + T(1); // (overlapping: the planner's order)
  w.narrow(1, 1, m - 2).narrow(2, 1, n - 2) =
      w.narrow(1, 0, m - 2).narrow(2, 0, n - 2) * r + in(v, 0, 0);
}

template <class T>
void stencil_case(int c) {
  const std::int64_t m = test::draw(3, 40), n = test::draw(3, 70), p = test::draw(1, 4);
  INFO("case " << c << ": " << m << " x " << n << ", 3-D " << p << " x " << m << " x " << n);
  auto plan = kiln::capture(stencil_step<T>, {.name = "stencil"});
  for (int call = 0; call < 3; ++call) {
    tensor<T> a[4] = {drawn<T>({m, n}), drawn<T>({m, n}), drawn<T>({p, m, n}), drawn<T>({n - 2})};
    tensor<T> b[4];
    for (int i = 0; i < 4; ++i)
      b[i] = a[i].clone();
    const T r = T(test::draw(1, 9)) / T(40);
    plan(a[0], a[1], a[2], a[3], r);
    stencil_step<T>(b[0], b[1], b[2], b[3], kiln::param<T>(r));
    for (int i = 0; i < 3; ++i) {
      INFO("call " << call << " argument " << i);
      REQUIRE(same_bits(a[i], b[i]));
    }
  }
  CHECK(plan.recordings() == 1);
}

TEST_CASE("plan: passes over rows of views replay as written bit for bit", "[plan]") {
  for (int c = 0; c < test::cases(60); ++c) {
    stencil_case<double>(c);
    if (c % 2 == 0) stencil_case<float>(c);
  }
}

TEST_CASE("plan: records one step per pass and reduction and replays only those", "[plan]") {
  const auto a = drawn<float>({16}), b = drawn<float>({16}), c = drawn<float>({16});
  tensor<float> z = kiln::zeros<float>({16}), s = kiln::zeros<float>(kiln::shape{});
  int runs = 0;
  auto plan = kiln::capture([&](tensor<float>& z, tensor<float>& s, const tensor<float>& a,
                                const tensor<float>& b, const tensor<float>& c) {
    ++runs; // host code: runs at the capture only
    z = a * b + c;
    s = kiln::sum(z) + kiln::max(a);
    z = z * s;
  });
  plan(z, s, a, b, c);
  CHECK(plan.steps() == 5); // z = ..., sum, max, the pass adding them, z * s
  for (int i = 0; i < 3; ++i)
    plan(z, s, a, b, c);
  CHECK(runs == 1);
  tensor<float> zr = a * b + c, sr = kiln::sum(zr) + kiln::max(a);
  zr = zr * sr;
  // The last replay started from z as the previous one left it: the statements do not read z
  // before writing it, so every replay gives the same values.
  CHECK(same_bits(z, zr));
  CHECK(same_bits(s, sr));
}

TEST_CASE("plan: parameters change between calls and numbers the function captures are constants",
          "[plan]") {
  const auto x = drawn<double>({33});
  tensor<double> y = kiln::zeros<double>({33});
  double k = 3;
  auto plan = kiln::capture([&](tensor<double>& y, const tensor<double>& x, kiln::param<double> dt,
                                kiln::param<float> f) {
    y = x * dt + k + kiln::sum(x * f); // a float parameter promoted in a double tree
  });
  for (const double dt : {0.5, -2.0, 1e-3}) {
    plan(y, x, dt, float(dt * 2));
    k = 100; // a constant of the plan: replays keep 3
    // (A param<float> in a double tree is a float child: as written, the same tree.)
    const tensor<double> r =
        x * kiln::param<double>(dt) + 3.0 + kiln::sum(x * kiln::param<float>(float(dt * 2)));
    CHECK(same_bits(y, r));
    const tensor<double> near = x * dt + 3.0 + kiln::sum(x * double(float(dt * 2)));
    CHECK(kiln::max(kiln::abs(y - near)).item() < 1e-12);
  }
}

TEST_CASE("plan: shapeless plans capture each new shape once and others refuse it", "[plan]") {
  auto body = [](tensor<float>& y, const tensor<float>& x) { y = kiln::exp(x) - kiln::mean(x); };
  auto fixed = kiln::capture(body, {.name = "fixed"});
  auto any = kiln::capture(body, {.name = "any", .shapeless = true});
  for (const std::int64_t n : {5, 17, 5, 1000, 0, 17}) {
    const auto x = drawn<float>({n, 3});
    tensor<float> y = kiln::zeros<float>({n, 3}), r = kiln::exp(x) - kiln::mean(x);
    any(y, x);
    CHECK(same_bits(y, r));
  }
  CHECK(any.recordings() == 4);
  const auto x = drawn<float>({4, 3});
  tensor<float> y = kiln::zeros<float>({4, 3});
  fixed(y, x);
  const auto x2 = drawn<float>({5, 3});
  tensor<float> y2 = kiln::zeros<float>({5, 3});
  expect_error([&] { fixed(y2, x2); }, "plan fixed",
               {"does not match", "argument 1 was captured with shape [4, 3] and is now [5, 3]",
                "shapeless"});
  const auto x3 = drawn<float>({12});
  tensor<float> y3 = kiln::zeros<float>({12});
  expect_error([&] { any(y3, x3); }, "plan any", {"argument 1", "[12]"}); // another rank
  // Another layout of the same shape: a transposed view.
  const auto xt = drawn<float>({3, 4}).transpose();
  expect_error([&] { fixed(y, xt); }, "plan fixed", {"argument 2", "another layout"});
}

TEST_CASE("plan: arguments that share memory must share it as they did at the capture", "[plan]") {
  auto plan =
      kiln::capture([](tensor<float>& a, tensor<float>& b) { a = a + b * 2.0f; }, {.name = "add"});
  tensor<float> u = drawn<float>({64}), v = drawn<float>({64});
  plan(u, v);
  expect_error([&] { plan(u, u); }, "plan add",
               {"argument 2 shares memory with argument 1", "distinct when the plan was captured"});
  auto same =
      kiln::capture([](tensor<float>& a, tensor<float>& b) { a = a + b * 2.0f; }, {.name = "same"});
  tensor<float> ur = u.clone();
  same(u, u);
  ur = ur + ur * 2.0f;
  CHECK(same_bits(u, ur));
  expect_error([&] { same(u, v); }, "plan same",
               {"argument 2 was captured sharing memory with argument 1"});
  // Views of one buffer: the same storage, so the same slot, at the captured offsets.
  tensor<float> buf = drawn<float>({128}), ref = buf.clone();
  auto halves = kiln::capture(
      [](tensor<float>& lo, const tensor<float>& hi) { lo = lo * hi + 1.0f; }, {.name = "halves"});
  for (int i = 0; i < 3; ++i) {
    halves(buf.narrow(0, 0, 64), buf.narrow(0, 64, 64));
    ref.narrow(0, 0, 64) = ref.narrow(0, 0, 64) * ref.narrow(0, 64, 64) + 1.0f;
  }
  CHECK(same_bits(buf, ref));
  // Borrowed memory (another library's array): distinct storages over overlapping bytes.
  std::vector<float> raw = test::uniform<float>(96, -1, 1), raw_ref = raw;
  const auto view = [](std::vector<float>& v, std::int64_t at) {
    return tensor<float>(std::make_shared<kiln::storage>(kiln::dtype::f32, 64, v.data() + at),
                         kiln::layout::contiguous({64}));
  };
  auto apart = kiln::capture(
      [](tensor<float>& lo, const tensor<float>& hi) { lo = lo * hi + 1.0f; }, {.name = "apart"});
  tensor<float> p0 = drawn<float>({64}), p1 = drawn<float>({64});
  apart(p0, p1);
  expect_error([&] { apart(view(raw, 0), view(raw, 32)); }, "plan apart",
               {"borrowed memory overlap"});
  auto overlapping = kiln::capture(
      [](tensor<float>& lo, const tensor<float>& hi) { lo = lo * hi + 1.0f; }, {.name = "ov"});
  for (int i = 0; i < 2; ++i) {
    overlapping(view(raw, 0), view(raw, 32));
    tensor<float> a = view(raw_ref, 0), b = view(raw_ref, 32);
    a = a * b + 1.0f; // the planner's temporary: b overlaps a
  }
  CHECK(raw == raw_ref);
}

TEST_CASE("plan: what a captured function may not do is refused at the capture", "[plan]") {
  tensor<float> x = drawn<float>({8}), y = kiln::zeros<float>({8});
  tensor<float> outer = drawn<float>({8});
  const auto refused = [&](auto&& f, std::initializer_list<std::string> parts) {
    auto p = kiln::capture(f, {.name = "bad"});
    expect_error([&] { p(y, x); }, "plan bad", parts);
    CHECK(p.recordings() == 0);
    CHECK(p.steps() == 0);
  };
  refused([](tensor<float>&, const tensor<float>& x) { (void)x.item(); }, {"item", "host"});
  refused([](tensor<float>&, const tensor<float>& x) { (void)kiln::sum(x).item(); }, {"item"});
  refused([](tensor<float>&, const tensor<float>& x) { (void)x.at({0}); }, {"at"});
  refused([](tensor<float>&, const tensor<float>& x) { (void)(x * 2.0f).to_vector(); },
          {"to_vector"});
  refused(
      [](tensor<float>&, const tensor<float>& x) {
        std::ostringstream s;
        s << x;
      },
      {"print"});
  refused(
      [](tensor<float>& y, const tensor<float>&) {
        y = kiln::from({1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f, 8.f});
      },
      {"from", "host data"});
  refused([](tensor<float>& y, const tensor<float>&) { y = kiln::random::normal<float>({8}, 1); },
          {"random::normal"});
  refused([](tensor<float>& y, const tensor<float>&) { y = kiln::arange<float>(8); }, {"arange"});
  refused([&](tensor<float>& y, const tensor<float>& x) { y = x + outer; },
          {"not an argument", "tensor<f32> of shape [8]", "pass it as an argument"});
  refused([&](tensor<float>& y, const tensor<float>& x) { outer = x * 2.0f + y; },
          {"not an argument"});
  // The function gives an argument other memory, or keeps a handle past the call.
  refused([](tensor<float>& y, const tensor<float>&) { y = kiln::zeros<float>({3}); },
          {"replaced an argument's handle"});
  std::optional<tensor<float>> kept; // (assigning a tensor copies values: emplace keeps a handle)
  refused(
      [&](tensor<float>& y, const tensor<float>& x) {
        kept.emplace(y);
        (void)x;
      },
      {"keeps an argument's handle"});
  refused(
      [&](tensor<float>& y, const tensor<float>& x) {
        tensor<float> t = x * 2.0f;
        y = t + 1.0f;
        kept.emplace(t);
      },
      {"keeps a tensor it made"});
  // A plan inside a captured function.
  auto inner = kiln::capture([](tensor<float>& y, const tensor<float>& x) { y = x; });
  refused([&](tensor<float>& y, const tensor<float>& x) { inner(y, x); }, {"a plan"});
  // An empty argument.
  auto p = kiln::capture([](tensor<float>& y, const tensor<float>& x) { y = x; }, {.name = "e"});
  tensor<float> empty;
  expect_error([&] { p(y, empty); }, "plan e", {"argument 2 has no storage"});
  // A failed capture leaves the plan ready to capture again.
  bool fail = true;
  auto again = kiln::capture(
      [&](tensor<float>& y, const tensor<float>& x) {
        y = x * 3.0f;
        if (fail) (void)y.item();
      },
      {.name = "again"});
  expect_error([&] { again(y, x); }, "plan again", {"item"});
  fail = false;
  again(y, x);
  again(y, x);
  CHECK(same_bits(y, tensor<float>(x * 3.0f)));
  CHECK(again.steps() == 1);
}

TEST_CASE("plan: a plan keeps its temporaries and none of the caller's tensors", "[plan]") {
  std::weak_ptr<kiln::storage> arg_storage;
  auto plan = kiln::capture([](tensor<float>& y, const tensor<float>& x) {
    tensor<float> t = x * x; // the plan's own, reused at every replay
    y = t + kiln::sum(t);
  });
  {
    tensor<float> x = drawn<float>({1000}), y = kiln::zeros<float>({1000});
    arg_storage = x.storage();
    plan(y, x);
  }
  CHECK(arg_storage.expired()); // the caller's tensors died with their handles
  for (int i = 0; i < 3; ++i) {
    tensor<float> x = drawn<float>({1000}), y = kiln::zeros<float>({1000});
    plan(y, x);
    tensor<float> t = x * x, r = t + kiln::sum(t);
    CHECK(same_bits(y, r));
  }
  // Zero elements: nothing to compute, nothing read.
  auto zero = kiln::capture([](tensor<float>& y, const tensor<float>& x) { y = x + kiln::sum(x); });
  tensor<float> x0 = kiln::zeros<float>({0, 4}), y0 = kiln::zeros<float>({0, 4});
  zero(y0, x0);
  zero(y0, x0);
  CHECK(y0.size() == 0);
}

TEST_CASE("plan: one call at a time and sequential calls from other threads work", "[plan]") {
  const auto x = drawn<float>({1 << 16});
  auto plan = kiln::capture(
      [](tensor<float>& y, const tensor<float>& x) { y = kiln::exp(x) + kiln::sum(x); },
      {.name = "shared"});
  tensor<float> y0 = kiln::zeros<float>({1 << 16});
  plan(y0, x);
  const tensor<float> r = kiln::exp(x) + kiln::sum(x);
  std::atomic<int> refused{0}, wrong{0};
  const auto worker = [&] {
    tensor<float> y = kiln::zeros<float>({1 << 16});
    for (int i = 0; i < 50; ++i) {
      try {
        plan(y, x);
        if (!same_bits(y, r)) ++wrong;
      } catch (const kiln::error& e) {
        if (std::string(e.what()).find("already running") == std::string::npos) ++wrong;
        ++refused;
      }
    }
  };
  std::thread t1(worker), t2(worker);
  t1.join();
  t2.join();
  CHECK(wrong == 0); // every call either ran whole or was refused
  std::thread t3([&] {
    tensor<float> y = kiln::zeros<float>({1 << 16});
    plan(y, x);
    CHECK(same_bits(y, r));
  });
  t3.join();
}

TEST_CASE("plan: a gradient step captured equals the step run as written", "[plan]") {
  // A least-squares step: the gradient's adjoint trees are host passes and reductions.
  const std::int64_t n = 200, d = 8;
  const auto X = drawn<double>({n, d}), Y = drawn<double>({n});
  tensor<double> w = kiln::zeros<double>({d}), wr = w.clone();
  tensor<double> l = kiln::zeros<double>(kiln::shape{}), lr = l.clone();
  const auto step = [&](tensor<double>& w, tensor<double>& l, kiln::param<double> rate) {
    const auto r = kiln::sum(X * w, 1) - Y;
    const auto loss = kiln::mean(r * r);
    auto [g] = kiln::grad(loss, w);
    kiln::eval(l = loss, w = w - rate * g);
  };
  auto plan =
      kiln::capture([&](tensor<double>& w, tensor<double>& l, const tensor<double>&,
                        const tensor<double>&, kiln::param<double> rate) { step(w, l, rate); });
  for (int i = 0; i < 20; ++i) {
    plan(w, l, X, Y, 0.05);
    step(wr, lr, kiln::param<double>(0.05));
    REQUIRE(same_bits(w, wr));
    REQUIRE(same_bits(l, lr));
  }
  CHECK(l.item() < 1.0 * kiln::mean(Y * Y).item()); // it descends
}

TEST_CASE("plan: products replay, fused consumers as a pass of their own, in a training step",
          "[plan]") {
  // A layer relu(x @ w + b) and the gradient of a loss through it (products of transposes),
  // Adam on w and b: the captured step against the same statements as written (those fuse
  // the consumer into the product, a plan runs it unfused: equal within the sums' rounding),
  // the forward against a double-precision reference.
  const std::int64_t n = test::draw(20, 90), k = test::draw(5, 40), m = test::draw(3, 30);
  const auto X = drawn<double>({n, k}), T = drawn<double>({n, m});
  tensor<double> w = drawn<double>({k, m}), b = drawn<double>({m});
  tensor<double> wr = w.clone(), br = b.clone();
  tensor<double> y = kiln::zeros<double>({n, m});
  auto forward =
      kiln::capture([](tensor<double>& y, const tensor<double>& x, const tensor<double>& w,
                       const tensor<double>& b,
                       kiln::param<double> s) { y = kiln::relu(kiln::matmul(x, w) * s + b); },
                    {.name = "layer"});
  for (int i = 0; i < 4; ++i) {
    const double s = test::uniform<double>(1, 0.5, 2)[0];
    forward(y, X, w, b, s);
    const auto xv = X.to_vector(), wv = w.to_vector(), bv = b.to_vector(), yv = y.to_vector();
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t c = 0; c < m; ++c) {
        double acc = 0, mag = 0;
        for (std::int64_t q = 0; q < k; ++q) {
          acc += xv[std::size_t(r * k + q)] * wv[std::size_t(q * m + c)];
          mag += std::abs(xv[std::size_t(r * k + q)] * wv[std::size_t(q * m + c)]);
        }
        const double want = std::max(0.0, acc * s + bv[std::size_t(c)]);
        REQUIRE(std::abs(yv[std::size_t(r * m + c)] - want) <= 1e-13 * (mag * s + 1));
      }
  }
  const auto loss_of = [&](const tensor<double>& w, const tensor<double>& b) {
    const auto h = kiln::relu(kiln::matmul(X, w) + b) - T;
    return kiln::mean(h * h);
  };
  const auto loss = loss_of(w, b), loss_r = loss_of(wr, br);
  auto [dw, db] = kiln::grad(loss, w, b);
  auto [dwr, dbr] = kiln::grad(loss_r, wr, br);
  kiln::optim::adam<double> opt({w, b}, {.lr = 0.01}), opt_r({wr, br}, {.lr = 0.01});
  auto step = kiln::capture(
      [&, &dw = dw, &db = db](const tensor<double>&, const tensor<double>&) { opt.step(dw, db); },
      {.name = "layer training step"});
  const double first = tensor<double>(loss).item();
  for (int i = 0; i < 15; ++i) {
    step(X, T);
    opt_r.step(dwr, dbr);
    const auto a = w.to_vector(), r = wr.to_vector();
    for (std::size_t j = 0; j < a.size(); ++j)
      REQUIRE(std::abs(a[j] - r[j]) <= 1e-12 * (1 + std::abs(r[j])));
  }
  CHECK(tensor<double>(loss).item() < first); // it descends
}

TEST_CASE("plan: an optimizer step captured replays its step count and learning rate", "[plan]") {
  // Logistic regression on data the test draws: the gradients are lazy trees built outside
  // the captured function, over the caller's tensors (the data passed as arguments, the
  // parameters the optimizer's own).
  const std::int64_t n = 300, d = 5;
  const auto X = drawn<double>({n, d});
  const auto Y = kiln::cast<double>(kiln::sum(X, 1) > 0.0).eval();
  for (const bool use_adam : {true, false}) {
    INFO((use_adam ? "adam" : "sgd"));
    tensor<double> w = kiln::zeros<double>({d}), b = kiln::zeros<double>(kiln::shape{});
    tensor<double> wr = w.clone(), br = b.clone();
    const auto loss_of = [&](const tensor<double>& w, const tensor<double>& b) {
      const auto z = kiln::sum(X * w, 1) + b;
      return kiln::mean(kiln::softplus(z) - Y * z);
    };
    const auto loss = loss_of(w, b), loss_r = loss_of(wr, br);
    auto [dw, db] = kiln::grad(loss, w, b);
    auto [dwr, dbr] = kiln::grad(loss_r, wr, br);
    kiln::optim::adam<double> adam({w, b}, {.lr = 0.05}), adam_r({wr, br}, {.lr = 0.05});
    kiln::optim::sgd<double> sgd({w, b}, {.lr = 0.5, .momentum = 0.9}),
        sgd_r({wr, br}, {.lr = 0.5, .momentum = 0.9});
    tensor<double> l = kiln::zeros<double>(kiln::shape{}), lr = l.clone();
    auto step = kiln::capture(
        [&, &dw = dw, &db = db](tensor<double>& l, const tensor<double>&, const tensor<double>&) {
          if (use_adam)
            adam.step(dw, db);
          else
            sgd.step(dw, db);
          l = loss;
        },
        {.name = "training step"});
    for (int i = 0; i < 30; ++i) {
      if (i == 12) { // a schedule: the replays read the new rate
        adam.set_lr(0.01), adam_r.set_lr(0.01);
        sgd.set_lr(0.1), sgd_r.set_lr(0.1);
      }
      step(l, X, Y);
      if (use_adam)
        adam_r.step(dwr, dbr);
      else
        sgd_r.step(dwr, dbr);
      lr = loss_r;
      REQUIRE(same_bits(w, wr));
      REQUIRE(same_bits(b, br));
      REQUIRE(same_bits(l, lr));
    }
    if (use_adam) CHECK(adam.steps() == 30);
    CHECK(l.item() < std::log(2.0) * 0.8); // it learns
  }
}
