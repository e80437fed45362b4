// Products (issue 33): kiln::matmul with numpy's semantics, dot and outer, over shapes and
// dtypes drawn at random (vectors, batches that broadcast, transposed and strided views,
// operands that are expressions, extents 0 and 1, extents past every tile and block), against
// products computed here in double from the operands' values; errors naming both shapes;
// products inside expressions and reductions, and a target that is an operand.
#include "vulkan_support.hpp" // first: it registers a Catch listener

#include "cuda_support.hpp"
#include "device_stand_in.hpp"
#include "grad_support.hpp"
#include "matmul_support.hpp"
#include "metal_support.hpp"
#include "support.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

// This file tests kiln's own kernel: the BLAS provider, which would take plain products by
// default where one loads, is off here (test_matmul_blas runs both).
[[maybe_unused]] static const kiln::blas_use own_kernel_only =
    kiln::set_blas_use(kiln::blas_use::never);

namespace {

using namespace matmul_test;

// Shapes of a numpy matmul: ranks 1 to 4, batch dims that broadcast.
std::pair<kiln::shape, kiln::shape> shapes() {
  const int ra = test::draw(1, 4), rb = test::draw(1, 4);
  const std::int64_t m = extent(), n = extent(), k = extent();
  kiln::shape a, b;
  const int na = std::max(0, ra - 2), nbt = std::max(0, rb - 2);
  for (int d = 0; d < std::max(na, nbt); ++d) {
    const std::int64_t e = test::draw(1, 3);
    const int which = test::draw(0, 3); // 0: a has 1, 1: b has 1, else equal
    if (d >= std::max(na, nbt) - na) a.push_back(which == 0 ? 1 : e);
    if (d >= std::max(na, nbt) - nbt) b.push_back(which == 1 ? 1 : e);
  }
  if (ra >= 2) a.push_back(m);
  a.push_back(k);
  b.push_back(k);
  if (rb >= 2) b.push_back(n);
  return {a, b};
}

template <class T>
void random_products(const kiln::device& dev, int draws) {
  for (int i = 0; i < draws; ++i) {
    const auto [sa, sb] = shapes();
    const auto a = operand<T>(sa, dev), b = operand<T>(sb, dev);
    const std::string what = std::string(kiln::name(kiln::dtype_of<T>())) + " " + sa.str() + " @ " +
                             sb.str() + " on " + dev.str();
    const product want = reference(read(a), read(b));
    check(kiln::tensor<T>(kiln::matmul(a, b)), want, what);
    // Operands that are expressions (computed while packed, on the host).
    if (test::draw(0, 2) == 0) {
      const auto ea = a + a;
      const auto eb = b * b - b;
      check(kiln::tensor<T>(kiln::matmul(ea, b)), reference(read(ea), read(b)), what + " (a + a)");
      check(kiln::tensor<T>(kiln::matmul(a, eb)), reference(read(a), read(eb)),
            what + " (b * b - b)");
    }
  }
}

// Gradients through products of random shapes (vectors, batches that broadcast, an operand
// read transposed) against central finite differences: f = sum(C * r) + sum(tanh(C)).
void random_gradients(int draws) {
  for (int i = 0; i < draws; ++i) {
    auto [sa, sb] = shapes();
    // Small extents: finite differences evaluate f twice per element and step.
    auto shrink = [](kiln::shape& s) {
      for (auto& e : s)
        e = std::min<std::int64_t>(e, 5);
    };
    shrink(sa);
    shrink(sb);
    if (sa.size() >= 2 && sb.size() >= 2) sb[sb.size() - 2] = sa[sa.size() - 1];
    if (sa.size() == 1) sa[0] = sb[std::max(0, sb.size() - 2)];
    if (sb.size() == 1) sb[0] = sa[sa.size() - 1];
    const kiln::tensor<double> x =
        kiln::from(test::uniform<double>(std::size_t(kiln::numel(sa)), -1, 1), sa);
    // b is read through a transposed view of y where it has two dims, half of the time.
    const bool t = sb.size() >= 2 && test::draw(0, 1) == 1;
    kiln::shape sy = sb;
    if (t) std::swap(sy[sy.size() - 1], sy[sy.size() - 2]);
    const kiln::tensor<double> y =
        kiln::from(test::uniform<double>(std::size_t(kiln::numel(sy)), -1, 1), sy);
    kiln::tensor<double> b = y;
    if (t) {
      kiln::layout l = y.layout();
      std::swap(l.shape[sy.size() - 1], l.shape[sy.size() - 2]);
      std::swap(l.strides[sy.size() - 1], l.strides[sy.size() - 2]);
      b = kiln::tensor<double>(y.storage(), l);
    }
    const kiln::shape sc = kiln::matmul(x, b).shape();
    const kiln::tensor<double> r =
        kiln::from(test::uniform<double>(std::size_t(kiln::numel(sc)), -1, 1), sc);
    const auto f = kiln::sum(kiln::matmul(x, b) * r) + kiln::sum(kiln::tanh(kiln::matmul(x, b)));
    auto [dx, dy] = kiln::grad(f, x, y);
    const std::string what = sa.str() + " @ " + sb.str() + (t ? " (b transposed)" : "");
    if (x.size() == 0 || y.size() == 0) { // empty: the gradients are empty too
      CHECK(kiln::tensor<double>(dx).shape() == sa);
      CHECK(kiln::tensor<double>(dy).shape() == sy);
      continue;
    }
    grad_test::check_close(read(kiln::tensor<double>(dx)).v, grad_test::fd_grad(f, x), 1e-7,
                           "d/dx " + what);
    grad_test::check_close(read(kiln::tensor<double>(dy)).v, grad_test::fd_grad(f, y), 1e-7,
                           "d/dy " + what);
  }
}

// NaN and infinities in the operands propagate as in the exact sums (a NaN row, an infinite
// column, inf - inf = NaN); integer products accumulate in i64 and wrap to the result type.
template <class T>
void specials(const kiln::device& dev) {
  const std::int64_t m = 19, k = 23, n = 37;
  auto av = test::uniform<T>(m * k, -1, 1), bv = test::uniform<T>(k * n, -1, 1);
  av[2 * k + 3] = std::numeric_limits<T>::quiet_NaN();
  bv[1 * n + 4] = std::numeric_limits<T>::infinity();
  bv[5 * n + 4] = -std::numeric_limits<T>::infinity(); // column 4: inf - inf where both meet
  bv[7 * n + 9] = std::numeric_limits<T>::infinity();
  av[6 * k + 7] = T(0); // 0 * inf = NaN in row 6, column 9
  const auto a = kiln::from(av, {m, k}).to(dev), b = kiln::from(bv, {k, n}).to(dev);
  check(kiln::tensor<T>(kiln::matmul(a, b)), reference(read(a), read(b)),
        "NaN and infinities on " + dev.str());
}

// x [n, d], w [d, h], b [h] drawn at random, and z = x w + b in double loops.
struct layer {
  std::int64_t n, d, h;
  std::vector<double> xv, wv, bv, z;
  kiln::tensor<double> x, w, b;
  layer(std::int64_t n_, std::int64_t d_, std::int64_t h_)
      : n(n_), d(d_), h(h_), xv(test::uniform<double>(n * d, -1, 1)),
        wv(test::uniform<double>(d * h, -1, 1)), bv(test::uniform<double>(h, -1, 1)), z(n * h),
        x(kiln::from(xv, {n, d})), w(kiln::from(wv, {d, h})), b(kiln::from(bv, {h})) {
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < h; ++j) {
        double s = bv[j];
        for (std::int64_t q = 0; q < d; ++q)
          s += xv[i * d + q] * wv[q * h + j];
        z[i * h + j] = s;
      }
  }
};

} // namespace

TEST_CASE("matmul: gradients over random shapes match finite differences", "[host]") {
  random_gradients(40);
}

TEST_CASE("matmul: gradients of dot, outer, operand expressions, second order and jvp", "[host]") {
  using grad_test::check_close;
  using grad_test::fd_grad;
  const std::int64_t n = 6;
  const auto u = grad_test::from(test::uniform<double>(n, -1, 1), {n}),
             v = grad_test::from(test::uniform<double>(n, -1, 1), {n});
  {
    const auto f = kiln::dot(u, v) * kiln::dot(u, u);
    auto [du, dv] = kiln::grad(f, u, v);
    check_close(read(kiln::tensor<double>(du)).v, fd_grad(f, u), 1e-8, "dot: d/du");
    check_close(read(kiln::tensor<double>(dv)).v, fd_grad(f, v), 1e-8, "dot: d/dv");
  }
  {
    const auto f = kiln::sum(kiln::sin(kiln::outer(u, v)));
    auto [du, dv] = kiln::grad(f, u, v);
    check_close(read(kiln::tensor<double>(du)).v, fd_grad(f, u), 1e-8, "outer: d/du");
    check_close(read(kiln::tensor<double>(dv)).v, fd_grad(f, v), 1e-8, "outer: d/dv");
  }
  const auto x = grad_test::from(test::uniform<double>(4 * 5, -1, 1), {4, 5}),
             w = grad_test::from(test::uniform<double>(5 * 3, -1, 1), {5, 3}),
             m = grad_test::from(test::integers<double>(4 * 5, 0, 1), {4, 5});
  {
    // An operand that is an expression (read while packed), its adjoint through relu.
    const auto f = kiln::sum(kiln::pow(kiln::matmul(kiln::relu(x) * m, w), 2.0));
    auto [dx, dw] = kiln::grad(f, x, w);
    grad_test::check_close_where_smooth(read(kiln::tensor<double>(dx)).v, f, x, 1e-7,
                                        "relu(x) * m: d/dx");
    check_close(read(kiln::tensor<double>(dw)).v, fd_grad(f, w), 1e-7, "relu(x) * m: d/dw");
  }
  {
    // Second order: the gradient of sum(dx * s), dx the gradient of a loss through a product.
    const auto s = grad_test::from(test::uniform<double>(4 * 5, -1, 1), {4, 5});
    const auto loss = kiln::sum(kiln::tanh(kiln::matmul(x, w)));
    auto [dx] = kiln::grad(loss, x);
    const auto h = kiln::sum(dx * s);
    auto [hw, hx] = kiln::grad(h, w, x);
    check_close(read(kiln::tensor<double>(hw)).v, fd_grad(h, w), 1e-7, "second order: d/dw");
    check_close(read(kiln::tensor<double>(hx)).v, fd_grad(h, x), 1e-7, "second order: d/dx");
  }
  {
    // Forward mode: J dw of matmul(x, w) against a finite difference along dw.
    const auto dwv = grad_test::from(test::uniform<double>(5 * 3, -1, 1), {5, 3});
    const kiln::tensor<double> t = kiln::jvp(kiln::tanh(kiln::matmul(x, w)), {w, dwv});
    const std::vector<double> w0 = w.to_vector(), d0 = dwv.to_vector();
    auto at = [&](double e) {
      for (std::size_t i = 0; i < w0.size(); ++i)
        w.data()[i] = w0[i] + e * d0[i];
      const std::vector<double> r =
          kiln::tensor<double>(kiln::tanh(kiln::matmul(x, w))).to_vector();
      for (std::size_t i = 0; i < w0.size(); ++i)
        w.data()[i] = w0[i];
      return r;
    };
    const auto hi = at(1e-4), lo = at(-1e-4);
    std::vector<double> want(hi.size());
    for (std::size_t i = 0; i < hi.size(); ++i)
      want[i] = (hi[i] - lo[i]) / 2e-4;
    check_close(read(t).v, want, 1e-6, "jvp");
  }
}

// A two-layer network's loss, mean((tanh(x W1 + b1) w2 + b2 - y)^2), and its gradients,
// against the formulas written out in loops.
TEST_CASE("matmul: a two-layer network's gradients match the analytic formulas", "[host]") {
  const std::int64_t n = 9, d = 7, h = 5;
  const auto xv = test::uniform<double>(n * d, -1, 1), w1v = test::uniform<double>(d * h, -1, 1),
             b1v = test::uniform<double>(h, -1, 1), w2v = test::uniform<double>(h, -1, 1),
             yv = test::uniform<double>(n, -1, 1);
  const double b2v = 0.3;
  const auto x = grad_test::from(xv, {n, d}), w1 = grad_test::from(w1v, {d, h}),
             b1 = grad_test::from(b1v, {h}), w2 = grad_test::from(w2v, {h}),
             y = grad_test::from(yv, {n});
  kiln::tensor<double> b2 = kiln::zeros<double>({});
  b2 = b2v;
  const auto a = kiln::tanh(kiln::matmul(x, w1) + b1);
  const auto loss = kiln::mean(kiln::pow(kiln::matmul(a, w2) + b2 - y, 2.0));
  auto [dw1, db1, dw2, db2] = kiln::grad(loss, w1, b1, w2, b2);

  std::vector<double> gw1(d * h, 0), gb1(h, 0), gw2(h, 0);
  double gb2 = 0, l = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    std::vector<double> act(h);
    double out = b2v;
    for (std::int64_t j = 0; j < h; ++j) {
      double z = b1v[j];
      for (std::int64_t q = 0; q < d; ++q)
        z += xv[i * d + q] * w1v[q * h + j];
      act[j] = std::tanh(z);
      out += act[j] * w2v[j];
    }
    const double e = out - yv[i];
    l += e * e / n;
    const double de = 2 * e / n;
    gb2 += de;
    for (std::int64_t j = 0; j < h; ++j) {
      gw2[j] += de * act[j];
      const double dz = de * w2v[j] * (1 - act[j] * act[j]);
      gb1[j] += dz;
      for (std::int64_t q = 0; q < d; ++q)
        gw1[q * h + j] += dz * xv[i * d + q];
    }
  }
  using grad_test::check_close;
  check_close(std::vector<double>{kiln::tensor<double>(loss).item()}, {l}, 1e-12, "loss");
  check_close(read(kiln::tensor<double>(dw1)).v, gw1, 1e-12, "dW1");
  check_close(read(kiln::tensor<double>(db1)).v, gb1, 1e-12, "db1");
  check_close(read(kiln::tensor<double>(dw2)).v, gw2, 1e-12, "dw2");
  check_close(std::vector<double>{kiln::tensor<double>(db2).item()}, {gb2}, 1e-12, "db2");
}

TEST_CASE("matmul: numpy semantics over random shapes, layouts and dtypes on the host", "[host]") {
  const kiln::device host;
  random_products<double>(host, 120);
  random_products<float>(host, 120);
  random_products<std::int32_t>(host, 60);
  random_products<kiln::half>(host, 40);
}

// Products large enough to split over the threads (at least 2^22 multiply-adds: 700 x 100 x
// 70 is 4.9M), with row counts that deal unevenly into cache blocks (1024 rows in blocks of
// 336: the blocks are then made smaller, as many as a multiple of the threads), on 2 and 3
// threads, plain and with a fused epilogue on whole-row strips and on 256-column ones.
TEST_CASE("matmul: rows split evenly over the threads and each row computed once", "[host]") {
  const int was = kiln::thread_pool::instance().threads();
  for (const int threads : {2, 3}) {
    kiln::thread_pool::instance().set_threads(threads);
    for (int i = 0; i < 4; ++i) {
      const std::int64_t m = i == 0 ? 1024 : test::draw(700, 1100), k = test::draw(70, 130),
                         n = i == 3 ? test::draw(4100, 4400) : test::draw(100, 300);
      const auto a = operand<float>({m, k}, kiln::device{}), b = operand<float>({k, n}, {});
      const auto bias = operand<float>({n}, {});
      const std::string what = std::to_string(threads) + " threads, " + std::to_string(m) + " x " +
                               std::to_string(n) + " x " + std::to_string(k);
      const product want = reference(read(a), read(b));
      check(kiln::tensor<float>(kiln::matmul(a, b)), want, what);
      kiln::tensor<float> y = kiln::zeros<float>({m, n});
      y = kiln::matmul(a, b) + bias;
      check(y, plus_row(want, read(bias)), what + ", + bias fused");
    }
  }
  kiln::thread_pool::instance().set_threads(was);
}

TEST_CASE("matmul: numpy semantics over random shapes and layouts on each GPU device",
          "[vulkan][cuda][metal]") {
  for (const kiln::device* dev : {vulkan_or_skip(), cuda_or_skip(), metal_or_skip()}) {
    if (!dev) continue;
    // On the CPU stand-ins every new kernel is a host compile (~1-2 s): fewer draws there.
    const bool stand_in = test::stand_in(*dev);
    random_products<float>(*dev, stand_in ? 4 : 12);
    if (!stand_in) random_products<std::int32_t>(*dev, 4);
    specials<float>(*dev);
    // A product inside an expression and its gradient, f32 on the device against f64 here.
    const std::int64_t n = 6, d = 5, h = 4;
    const auto xv = test::uniform<double>(n * d, -1, 1), wv = test::uniform<double>(d * h, -1, 1);
    const auto xd = kiln::from(xv, {n, d}), wd = kiln::from(wv, {d, h});
    const auto x = kiln::cast<float>(xd).eval().to(*dev), w = kiln::cast<float>(wd).eval().to(*dev);
    const auto f = kiln::sum(kiln::tanh(kiln::matmul(x, w)));
    auto [dw] = kiln::grad(f, w);
    const kiln::tensor<float> g = dw;
    REQUIRE(g.device() == *dev);
    const auto fh = kiln::sum(kiln::tanh(kiln::matmul(xd, wd)));
    auto [dwh] = kiln::grad(fh, wd);
    grad_test::check_close(read(g).v, read(kiln::tensor<double>(dwh)).v, 1e-5,
                           "d/dw on " + dev->str());
  }
}

TEST_CASE("matmul: NaN and infinities propagate, integers accumulate in i64 and wrap", "[host]") {
  specials<float>(kiln::device{});
  specials<double>(kiln::device{});
  // 3 * 2^30 fits no int32, but the sum of the three products accumulates in i64 and is
  // converted once: (3 * 2^30 + 5) wraps to the same int32 as C++ converts it.
  const auto a = kiln::from(std::vector<std::int32_t>{1 << 15, 1 << 15, 1 << 15, 5}, {1, 4});
  const auto b = kiln::from(std::vector<std::int32_t>{1 << 15, 1 << 15, 1 << 15, 1}, {4, 1});
  const std::int64_t want = 3 * (std::int64_t(1) << 30) + 5;
  CHECK(kiln::tensor<std::int32_t>(kiln::matmul(a, b)).item() == static_cast<std::int32_t>(want));
  CHECK(kiln::tensor<std::int64_t>(kiln::matmul(kiln::cast<std::int64_t>(a), b)).item() == want);
}

TEST_CASE("matmul: bad shapes are a kiln::error naming both shapes and the contracted dims, "
          "where the node is built",
          "[host]") {
  const auto a = kiln::zeros<float>({3, 4}), b = kiln::zeros<float>({5, 2}),
             c = kiln::zeros<float>({2, 3, 4}), d = kiln::zeros<float>({3, 4, 2}),
             s = kiln::zeros<float>({}), v = kiln::zeros<float>({5});
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const kiln::error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string k = message([&] { (void)kiln::matmul(a, b); });
  CHECK_THAT(k, Catch::Contains("matmul") && Catch::Contains("[3, 4]") &&
                    Catch::Contains("[5, 2]") && Catch::Contains("contracted dims differ") &&
                    Catch::Contains("4 from a's dim -1") && Catch::Contains("5 from b's dim -2"));
  CHECK_THAT(message([&] { (void)kiln::matmul(a + 1.0f, v); }),
             Catch::Contains("contracted dims differ") && Catch::Contains("[5]"));
  CHECK_THAT(message([&] { (void)kiln::matmul(c, d); }),
             Catch::Contains("batch dims do not broadcast") && Catch::Contains("[2] vs [3]"));
  CHECK_THAT(message([&] { (void)kiln::matmul(s, a); }),
             Catch::Contains("too few dims") && Catch::Contains("rank-0"));
  CHECK_THAT(message([&] { (void)kiln::dot(c, a); }), Catch::Contains("rank 1 or 2"));
  CHECK_THAT(message([&] { (void)kiln::outer(a, v); }), Catch::Contains("vectors"));
  CHECK_THAT(message([&] { (void)kiln::matmul(kiln::tensor<float>(), a); }),
             Catch::Contains("empty"));
}

TEST_CASE("matmul: inside expressions and reductions, and into one of its operands", "[host]") {
  const layer L(37, 29, 21);
  const std::int64_t d = L.d, h = L.h;
  const auto &x = L.x, &w = L.w, &b = L.b;
  const auto& z = L.z;
  std::vector<double> y(z.size()), col(h, 0.0);
  for (std::size_t i = 0; i < z.size(); ++i) {
    y[i] = 0.5 * z[i] * std::erfc(-z[i] / std::sqrt(2.0));
    col[i % h] += z[i];
  }
  using grad_test::check_close;
  check_close(read(kiln::tensor<double>(kiln::gelu(kiln::matmul(x, w) + b))).v, y, 1e-12,
              "gelu(x w + b)");
  check_close(read(kiln::tensor<double>(kiln::sum(kiln::matmul(x, w) + b, 0))).v, col, 1e-12,
              "sum(x w + b, 0)");
  // kiln::eval of the pre-activation and the activation from one expression tree.
  const auto pre = kiln::matmul(x, w) + b;
  kiln::tensor<double> p, q;
  kiln::eval(p = pre, q = kiln::gelu(pre));
  check_close(read(p).v, z, 1e-12, "eval: pre");
  check_close(read(q).v, y, 1e-12, "eval: gelu(pre)");
  // A target that is an operand: the product is computed before the target is written.
  const auto sq = kiln::from(test::uniform<double>(d * d, -1, 1), {d, d});
  const std::vector<double> s0 = sq.to_vector();
  std::vector<double> want(d * d, 0.0);
  for (std::int64_t i = 0; i < d; ++i)
    for (std::int64_t j = 0; j < d; ++j)
      for (std::int64_t q2 = 0; q2 < d; ++q2)
        want[i * d + j] += s0[i * d + q2] * s0[q2 * d + j];
  kiln::tensor<double> t = sq.clone();
  t = kiln::matmul(t, t);
  check_close(read(t).v, want, 1e-12, "t = t @ t");
  kiln::tensor<double> u = sq.clone();
  u = kiln::matmul(u, u.transpose()) * 0.5 + u;
  std::vector<double> want2(d * d, 0.0);
  for (std::int64_t i = 0; i < d; ++i)
    for (std::int64_t j = 0; j < d; ++j) {
      double s = 0;
      for (std::int64_t q2 = 0; q2 < d; ++q2)
        s += s0[i * d + q2] * s0[j * d + q2];
      want2[i * d + j] = s * 0.5 + s0[i * d + j];
    }
  check_close(read(u).v, want2, 1e-12, "u = u u^T / 2 + u");
}

// Products fused with the elementwise work around them (point 2 of issue 33): the host
// kernel's counts say how many products ran and how many ran with the statement's pass as
// their epilogue; the values are checked against double loops either way.
TEST_CASE("matmul: the consuming expression is the product's epilogue on the host, and a "
          "product mentioned several times is computed once",
          "[host]") {
  auto& counts = kiln::detail::host_gemm_counts();
  const layer L(300, 70, 600); // several row blocks and strips, two threads
  const std::int64_t n = L.n, d = L.d, h = L.h;
  const auto &x = L.x, &w = L.w, &b = L.b;
  const auto &z = L.z, &xv = L.xv, &wv = L.wv, &bv = L.bv;
  auto gelu = [](double v) { return 0.5 * v * std::erfc(-v / std::sqrt(2.0)); };
  std::vector<double> y(z.size()), yt(z.size());
  for (std::size_t i = 0; i < z.size(); ++i) {
    y[i] = gelu(z[i]);
    yt[i] = 0.5 * z[i] * (1 + std::tanh(0.7978845608 * (z[i] + 0.044715 * z[i] * z[i] * z[i])));
  }
  using grad_test::check_close;
  auto run = [&](auto&& statement, std::uint64_t products, std::uint64_t fused) {
    const std::uint64_t p0 = counts.products, f0 = counts.fused;
    statement();
    CHECK(counts.products - p0 == products);
    CHECK(counts.fused - f0 == fused);
  };
  kiln::tensor<double> out = kiln::zeros<double>({n, h}), pre = kiln::zeros<double>({n, h});
  run([&] { out = kiln::gelu(kiln::matmul(x, w) + b); }, 1, 1);
  check_close(read(out).v, y, 1e-12, "gelu(x w + b)");
  // Written out, the product is mentioned four times: computed once.
  run(
      [&] {
        const auto zz = kiln::matmul(x, w) + b;
        out = 0.5 * zz * (1.0 + kiln::tanh(0.7978845608 * (zz + 0.044715 * zz * zz * zz)));
      },
      1, 1);
  check_close(read(out).v, yt, 1e-9, "tanh gelu written out");
  // The pre-activation and the activation, one product and one epilogue for both.
  run(
      [&] {
        const auto zz = kiln::matmul(x, w) + b;
        kiln::eval(pre = zz, out = kiln::gelu(zz));
      },
      1, 1);
  check_close(read(pre).v, z, 1e-12, "eval: pre");
  check_close(read(out).v, y, 1e-12, "eval: gelu(pre)");
  // alpha * product + beta * c, in place into c (c is read at each element before written).
  kiln::tensor<double> c = kiln::from(z, {n, h});
  run([&] { c = 2.0 * kiln::matmul(x, w) - 0.5 * c; }, 1, 1);
  std::vector<double> want(z.size());
  for (std::size_t i = 0; i < z.size(); ++i)
    want[i] = 2.0 * (z[i] - bv[i % h]) - 0.5 * z[i];
  check_close(read(c).v, want, 1e-12, "c = 2 x w - c / 2");
  // A target that is an operand of the product is not fused (the kernel still reads it).
  const auto sq = kiln::from(test::uniform<double>(d * d, -1, 1), {d, d});
  const std::vector<double> s0 = sq.to_vector();
  run([&] { sq.narrow(0, 0, d) = kiln::relu(kiln::matmul(sq, sq)); }, 1, 0);
  std::vector<double> want2(d * d, 0.0);
  for (std::int64_t i = 0; i < d; ++i)
    for (std::int64_t j = 0; j < d; ++j) {
      for (std::int64_t q = 0; q < d; ++q)
        want2[i * d + j] += s0[i * d + q] * s0[q * d + j];
      want2[i * d + j] = std::max(0.0, want2[i * d + j]);
    }
  check_close(read(sq).v, want2, 1e-12, "sq = relu(sq sq)");
  // A result in f16 converts after the product: not fused, right all the same.
  const auto xh = kiln::cast<kiln::half>(x).eval(), wh = kiln::cast<kiln::half>(w).eval();
  kiln::tensor<kiln::half> oh = kiln::zeros<kiln::half>({n, h});
  run([&] { oh = kiln::relu(kiln::matmul(xh, wh)); }, 1, 0);
  // A product whose result is broadcast by the statement cannot be its epilogue.
  kiln::tensor<double> wide = kiln::zeros<double>({3, n, h});
  run([&] { wide = kiln::matmul(x, w) + kiln::zeros<double>({3, 1, 1}); }, 1, 0);
  check_close(
      read(kiln::tensor<double>(wide.narrow(0, 2, 1).squeeze(0))).v,
      [&] {
        std::vector<double> v(z.size());
        for (std::size_t i = 0; i < z.size(); ++i)
          v[i] = z[i] - bv[i % h];
        return v;
      }(),
      1e-12, "broadcast result");
  // A layer's loss and gradients in one kiln::eval: the forward product, which the loss and
  // both adjoints mention, is computed once; dW is one more product.
  {
    const auto r = kiln::from(test::uniform<double>(n * h, -1, 1), {n, h});
    const auto loss = kiln::sum(kiln::gelu(kiln::matmul(x, w) + b) * r);
    // (named, not bound: clang 14 cannot capture a structured binding in a lambda)
    const auto grads = kiln::grad(loss, w, b);
    const auto& dw = std::get<0>(grads);
    const auto& db = std::get<1>(grads);
    kiln::tensor<double> l, gw, gb;
    run([&] { kiln::eval(l = loss, gw = dw, gb = db); }, 2, 0);
    const values rv = read(r);
    std::vector<double> gz(n * h);
    double lw = 0;
    for (std::size_t i = 0; i < z.size(); ++i) {
      const double v = z[i], pdf = std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
      lw += gelu(v) * rv.v[i];
      gz[i] = rv.v[i] * (0.5 * std::erfc(-v / std::sqrt(2.0)) + v * pdf);
    }
    std::vector<double> gwant(d * h, 0.0), bwant(h, 0.0);
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < h; ++j) {
        bwant[j] += gz[i * h + j];
        for (std::int64_t q = 0; q < d; ++q)
          gwant[q * h + j] += xv[i * d + q] * gz[i * h + j];
      }
    check_close(std::vector<double>{l.item()}, {lw}, 1e-10, "layer: loss");
    check_close(read(gw).v, gwant, 1e-10, "layer: dW");
    check_close(read(gb).v, bwant, 1e-10, "layer: db");
  }
  // Batches, one epilogue over every batch element's strips.
  const auto xb = kiln::from(test::uniform<double>(3 * 20 * d, -1, 1), {3, 20, d});
  kiln::tensor<double> ob = kiln::zeros<double>({3, 20, h});
  run([&] { ob = kiln::tanh(kiln::matmul(xb, w) + b); }, 1, 1);
  const values xbv = read(xb);
  std::vector<double> wantb;
  for (std::int64_t e = 0; e < 3 * 20; ++e)
    for (std::int64_t j = 0; j < h; ++j) {
      double s = bv[j];
      for (std::int64_t q = 0; q < d; ++q)
        s += xbv.v[e * d + q] * wv[q * h + j];
      wantb.push_back(std::tanh(s));
    }
  check_close(read(ob).v, wantb, 1e-12, "tanh(xb w + b)");
}

// A fused product whose one output can hold it (contiguous, of its shape and dtype, read by
// no other leaf) is computed into that output and the epilogue runs there in place; the
// counts say where, and each value is checked against double loops, with the cases that
// must keep the product's temporary.
TEST_CASE("matmul: a fused product is computed into its output where no other leaf reads it",
          "[host]") {
  const layer L(260, 90, 530);
  const std::int64_t n = L.n, h = L.h;
  const auto &x = L.x, &w = L.w, &b = L.b;
  const auto &z = L.z, &bv = L.bv;
  using grad_test::check_close;
  const auto run = [](auto&& statement, std::uint64_t fused, std::uint64_t in_output,
                      const char* what) {
    matmul_test::check_counts(statement, 1, fused, in_output, what);
  };
  auto want = [&](auto f) {
    std::vector<double> v(z.size());
    for (std::size_t i = 0; i < z.size(); ++i)
      v[i] = f(z[i], i);
    return v;
  };
  auto relu = [](double v) { return std::max(0.0, v); };
  kiln::tensor<double> out = kiln::zeros<double>({n, h});
  run([&] { out = kiln::tanh(kiln::matmul(x, w) + b); }, 1, 1, "tanh(x w + b)");
  check_close(read(out).v, want([](double v, std::size_t) { return std::tanh(v); }), 1e-12,
              "tanh(x w + b)");
  // A target inside a larger tensor (an offset): the rest of it is left alone.
  kiln::tensor<double> big = kiln::zeros<double>({3, n, h});
  run([&] { big.narrow(0, 1, 1).squeeze(0) = kiln::relu(kiln::matmul(x, w) + b); }, 1, 1,
      "into big[1]");
  const values bigv = read(big);
  const std::vector<double> mid(bigv.v.begin() + n * h, bigv.v.begin() + 2 * n * h);
  check_close(mid, want([&](double v, std::size_t) { return relu(v); }), 1e-12, "big[1]");
  CHECK(std::all_of(bigv.v.begin(), bigv.v.begin() + n * h, [](double v) { return v == 0; }));
  CHECK(std::all_of(bigv.v.begin() + 2 * n * h, bigv.v.end(), [](double v) { return v == 0; }));
  // The target is also a leaf: its old values are read, so the product keeps its temporary.
  const std::vector<double> old = read(out).v;
  run([&] { out = kiln::relu(kiln::matmul(x, w)) + out; }, 1, 0, "relu(x w) + out");
  check_close(read(out).v,
              want([&](double v, std::size_t i) { return relu(v - bv[i % h]) + old[i]; }), 1e-12,
              "relu(x w) + out");
  // A target stored transposed, or two outputs: the temporary too.
  kiln::tensor<double> ot = kiln::zeros<double>({h, n});
  run([&] { ot.transpose() = kiln::relu(kiln::matmul(x, w) + b); }, 1, 0, "transposed target");
  check_close(read(kiln::tensor<double>(ot.transpose().clone())).v,
              want([&](double v, std::size_t) { return relu(v); }), 1e-12, "transposed target");
  kiln::tensor<double> pre = kiln::zeros<double>({n, h});
  run(
      [&] {
        const auto zz = kiln::matmul(x, w) + b;
        kiln::eval(pre = zz, out = kiln::relu(zz));
      },
      1, 0, "two outputs");
  check_close(read(pre).v, z, 1e-12, "eval: pre");
  check_close(read(out).v, want([&](double v, std::size_t) { return relu(v); }), 1e-12,
              "eval: relu");
  // A product shared with a statement nested in this one (an einsum's operand expression is
  // evaluated on the way, a statement of its own, whose product may be computed into its own
  // output): each mention gets the product's values, whichever the compiler materializes
  // first (both orders written).
  {
    const auto cv = test::uniform<double>(h * h, -1, 1);
    const auto c = kiln::from(cv, {h, h});
    std::vector<double> twice(z.size(), 0.0);
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t q = 0; q < h; ++q) {
        const double zq = 2 * (z[i * h + q] - bv[q]);
        for (std::int64_t j = 0; j < h; ++j)
          twice[i * h + j] += zq * cv[q * h + j];
      }
    const auto nested = want([&](double v, std::size_t i) { return twice[i] + v - bv[i % h]; });
    out = kiln::einsum("ij,jk->ik", kiln::matmul(x, w) * 2.0, c) + kiln::matmul(x, w);
    check_close(read(out).v, nested, 1e-10, "einsum(x w * 2, c) + x w");
    out = kiln::matmul(x, w) + kiln::einsum("ij,jk->ik", kiln::matmul(x, w) * 2.0, c);
    check_close(read(out).v, nested, 1e-10, "x w + einsum(x w * 2, c)");
  }
  // A target of another dtype: fused (the pass converts), into the temporary.
  kiln::tensor<float> of = kiln::zeros<float>({n, h});
  run([&] { of = kiln::relu(kiln::matmul(x, w) + b); }, 1, 0, "f32 target of an f64 product");
  check_close(read(of).v, want([&](double v, std::size_t) { return relu(v); }), 1e-6, "f32 target");
}

TEST_CASE("matmul: a product of more than 2^31 elements on the host", "[host][big]") {
  // 65,536 x 32,769 u8 outputs (2^31 + 2^16 bytes, past every 32-bit index), K = 2, values
  // small enough that nothing wraps: the sum of all outputs is sum_k (sum_i a_ik)(sum_j b_kj),
  // and the last row, whose elements sit past 2^31, is checked element by element.
  const std::int64_t m = 65536, n = 32769, k = 2;
  const auto av = test::integers<std::uint8_t>(std::size_t(m * k), 0, 7);
  const auto bv = test::integers<std::uint8_t>(std::size_t(k * n), 0, 7);
  const auto a = kiln::from(av, {m, k}), b = kiln::from(bv, {k, n});
  kiln::tensor<std::uint8_t> c = kiln::matmul(a, b);
  REQUIRE(c.size() > (std::int64_t{1} << 31));
  std::int64_t want = 0;
  for (std::int64_t q = 0; q < k; ++q) {
    std::int64_t sa = 0, sb = 0;
    for (std::int64_t i = 0; i < m; ++i)
      sa += av[std::size_t(i * k + q)];
    for (std::int64_t j = 0; j < n; ++j)
      sb += bv[std::size_t(q * n + j)];
    want += sa * sb;
  }
  CHECK(kiln::sum(kiln::cast<std::int64_t>(c)).item() == want);
  const auto last = c.narrow(0, m - 1, 1).eval().to_vector();
  std::size_t bad = 0;
  for (std::int64_t j = 0; j < n; ++j) {
    std::int64_t s = 0;
    for (std::int64_t q = 0; q < k; ++q)
      s += std::int64_t(av[std::size_t((m - 1) * k + q)]) * bv[std::size_t(q * n + j)];
    bad += last[std::size_t(j)] != s;
  }
  CHECK(bad == 0);
}

TEST_CASE("matmul: an integer product larger than its accumulators' chunk, batched, against "
          "double loops",
          "[host]") {
  // [2, 6000, 3] @ [3, 1500] in i32 accumulates 144 MB of i64: the host computes it by chunks
  // of rows of one batch element (two per element here, the second partial), B read transposed.
  const std::int64_t nb = 2, m = 6000, k = 3, n = 1500;
  const auto av = test::integers<std::int32_t>(std::size_t(nb * m * k), -1000, 1000);
  const auto bv = test::integers<std::int32_t>(std::size_t(n * k), -1000, 1000);
  const auto a = kiln::from(av, {nb, m, k});
  const auto bt = kiln::from(bv, {n, k}); // b = bt^T
  const kiln::tensor<std::int32_t> c = kiln::matmul(a, bt.transpose());
  REQUIRE(c.shape() == kiln::shape{nb, m, n});
  const auto cv = c.to_vector();
  std::size_t bad = 0;
  for (std::int64_t e = 0; e < nb; ++e)
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        std::int64_t s = 0;
        for (std::int64_t q = 0; q < k; ++q)
          s += std::int64_t(av[std::size_t((e * m + i) * k + q)]) * bv[std::size_t(j * k + q)];
        bad += cv[std::size_t((e * m + i) * n + j)] != s;
      }
  CHECK(bad == 0);
  // Many small batch elements: chunks of whole elements (209 of 320 KB, then the rest).
  const std::int64_t e2 = 300, m2 = 200, n2 = 200;
  const auto xv = test::integers<std::int32_t>(std::size_t(e2 * m2 * k), -1000, 1000);
  const auto yv = test::integers<std::int32_t>(std::size_t(k * n2), -1000, 1000);
  const kiln::tensor<std::int32_t> z =
      kiln::matmul(kiln::from(xv, {e2, m2, k}), kiln::from(yv, {k, n2}));
  const auto zv = z.to_vector();
  std::size_t bad2 = 0;
  for (std::int64_t e = 0; e < e2; ++e)
    for (std::int64_t i = 0; i < m2; ++i)
      for (std::int64_t j = 0; j < n2; ++j) {
        std::int64_t s = 0;
        for (std::int64_t q = 0; q < k; ++q)
          s += std::int64_t(xv[std::size_t((e * m2 + i) * k + q)]) * yv[std::size_t(q * n2 + j)];
        bad2 += zv[std::size_t((e * m2 + i) * n2 + j)] != s;
      }
  CHECK(bad2 == 0);
}
