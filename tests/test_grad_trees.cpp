// Autodiff beyond single ops, against finite differences in f64: broadcasting, views,
// reductions over axes, unused tensors, second order, random trees, fused multi-output
// evaluation, and misuse. Inputs are drawn per run (Catch prints the seed).
#include "grad_support.hpp"

#include <algorithm>
#include <array>

namespace {

using grad_test::check_close;
using grad_test::fd_grad;
using kiln::tensor;
constexpr double tol = 1e-6;

tensor<double> random_tensor(const kiln::shape& s, double lo = -1.5, double hi = 1.5) {
  return grad_test::from(test::uniform<double>(kiln::numel(s), lo, hi), s);
}

std::vector<double> values(const auto& e) { return tensor<double>(e).to_vector(); }

constexpr unsigned mix(unsigned s) { return (s * 2654435761u) ^ (s >> 13) ^ 0x9e3779b9u; }

// A tree shape fixed at compile time by S; which tensor stands at each leaf is drawn at
// run time, so the same tensor recurs in random places and broadcast against others.
template <unsigned S, int D, class V>
auto tree(const V& v, double c) {
  constexpr unsigned h = mix(S);
  if constexpr (D == 0) {
    return v[h % 4];
  } else {
    const auto a = tree<h + 1, D - 1>(v, c);
    const auto b = tree<h + 2, D - 1>(v, c);
    if constexpr (h % 6 == 0)
      return a + b * c;
    else if constexpr (h % 6 == 1)
      return a * b;
    else if constexpr (h % 6 == 2)
      return kiln::sin(a) - b;
    else if constexpr (h % 6 == 3)
      return kiln::tanh(a) * kiln::exp(b * 0.3);
    else if constexpr (h % 6 == 4)
      return a / (1.0 + b * b);
    else
      return kiln::where(a > b, a * c, kiln::cos(b));
  }
}

template <unsigned S>
void random_tree() {
  const tensor<double> x = random_tensor({3, 4}), y = random_tensor({4}), z = random_tensor({3, 1}),
                       k = random_tensor({3, 4});
  // Handles copied, not assigned (assigning a tensor writes values into its storage). A
  // random order, and one slot a repeat of another: a tensor recurs in random places.
  std::array<tensor<double>, 4> pool{x, y, z, k};
  std::shuffle(pool.begin(), pool.end(), test::rng());
  const int a = test::draw(0, 3), b = test::draw(0, 3);
  const std::array<tensor<double>, 4> v{a == 0 ? pool[b] : pool[0], a == 1 ? pool[b] : pool[1],
                                        a == 2 ? pool[b] : pool[2], a == 3 ? pool[b] : pool[3]};
  const double c = test::uniform<double>(1, -2, 2)[0];
  const auto f = kiln::sum(tree<S, 3>(v, c));
  auto [dx, dy, dz] = kiln::grad(f, x, y, z);
  INFO("tree " << S);
  // Not a vacuous pass: some tensor differentiated by is used.
  std::vector<double> all = values(dx), gy = values(dy), gz = values(dz);
  all.insert(all.end(), gy.begin(), gy.end());
  all.insert(all.end(), gz.begin(), gz.end());
  CHECK(std::any_of(all.begin(), all.end(), [](double g) { return g != 0; }));
  // where(a > b, ...) jumps where a = b: elements that close to a jump are left out.
  grad_test::check_close_where_smooth(values(dx), f, x, tol, "d/dx");
  grad_test::check_close_where_smooth(values(dy), f, y, tol, "d/dy");
  grad_test::check_close_where_smooth(values(dz), f, z, tol, "d/dz");
}

} // namespace

TEST_CASE("grad of random expression trees against finite differences", "[grad]") {
  for (int round = 0; round < 3; ++round) {
    random_tree<1>();
    random_tree<2>();
    random_tree<3>();
    random_tree<4>();
  }
}

TEST_CASE("grad of broadcast operands is summed back to their shapes", "[grad]") {
  const auto x = random_tensor({3, 4}), y = random_tensor({4}), z = random_tensor({3, 1});
  const auto f = kiln::sum(x * y + kiln::sin(z) * y * y - z);
  auto [dx, dy, dz] = kiln::grad(f, x, y, z);
  CHECK(dy.shape() == kiln::shape{4});
  CHECK(dz.shape() == kiln::shape{3, 1});
  check_close(values(dx), fd_grad(f, x), tol, "x [3,4]");
  check_close(values(dy), fd_grad(f, y), tol, "y [4]");
  check_close(values(dz), fd_grad(f, z), tol, "z [3,1]");
  // A scalar-shaped tensor broadcast over everything.
  const auto s = random_tensor({});
  const auto g = kiln::sum(kiln::exp(s * x) * y);
  auto [ds] = kiln::grad(g, s);
  check_close(values(ds), fd_grad(g, s), tol, "s []");
}

TEST_CASE("grad flows through views back to the viewed tensor", "[grad]") {
  const auto base = random_tensor({4, 6});
  const auto w1 = random_tensor({6, 4}), w2 = random_tensor({4, 3}), w3 = random_tensor({3});
  const auto f = kiln::sum(kiln::sin(base.transpose()) * w1) +
                 kiln::sum(base.narrow(1, 2, 3) * base.narrow(1, 2, 3) * w2) +
                 kiln::sum(base(1, kiln::range{0, 6, 2}) * w3) +
                 kiln::sum(kiln::exp(base.reshape({2, 12}) * 0.5)) +
                 kiln::sum(base.slice(0, 3, -5, -2).unsqueeze(0).squeeze(0) * 2.0) +
                 kiln::sum(base(0).broadcast_to({5, 6}) * base(3));
  auto [db] = kiln::grad(f, base);
  check_close(values(db), fd_grad(f, base), tol, "base [4,6] through views");
  // With respect to a view: only the elements the view sees, in its shape.
  const auto part = base.narrow(0, 1, 2);
  auto [dp] = kiln::grad(f, part);
  CHECK(dp.shape() == kiln::shape{2, 6});
  const auto all = values(db), mine = values(dp);
  std::vector<double> want(all.begin() + 6, all.begin() + 18);
  check_close(mine, want, 1e-12, "a narrow view of base");
  // permute on rank 3
  const auto c = random_tensor({2, 3, 4}), wc = random_tensor({4, 2, 3});
  const auto h = kiln::sum(kiln::tanh(c.permute({2, 0, 1})) * wc);
  auto [dc] = kiln::grad(h, c);
  check_close(values(dc), fd_grad(h, c), tol, "permute");
}

TEST_CASE("grad through reductions over axes", "[grad]") {
  const auto x = random_tensor({3, 5}), w = random_tensor({3}), v = random_tensor({5});
  const auto f = kiln::sum(kiln::exp(kiln::sum(x, 1) * 0.3) * w) +
                 kiln::sum((x - kiln::mean(x, 0, true)) * (x - kiln::mean(x, 0, true))) +
                 kiln::sum(kiln::max(x, 0) * v) + kiln::sum(kiln::min(x, 1, true) * 2.0) +
                 kiln::sum(kiln::prod(x, 1) * w) + kiln::mean(kiln::sin(x)) +
                 kiln::sum(x + kiln::sum(x * x, 0, true)); // a reduction used broadcast
  auto [dx] = kiln::grad(f, x);
  // max and min have kinks where two elements tie: random elements within a step of one
  // another (a few seeds in a hundred) make the differences there meaningless, not kiln.
  grad_test::check_close_where_smooth(values(dx), f, x, tol, "sum, mean, max, min, prod");
  // Ties of max split the adjoint evenly.
  const auto t = grad_test::from({1.0, 3.0, 3.0, 2.0}, {4});
  auto [dt] = kiln::grad(kiln::max(t) * 2.0, t);
  CHECK(values(dt) == std::vector<double>{0, 1, 1, 0});
}

TEST_CASE("grad with respect to an unused tensor is zeros of its shape", "[grad]") {
  const auto x = random_tensor({4}), u = random_tensor({2, 3});
  const kiln::tensor<float> other = kiln::ones<float>({7});
  auto [du, dx] = kiln::grad(kiln::sum(x * x), u, x);
  CHECK(du.shape() == kiln::shape{2, 3});
  CHECK(values(du) == std::vector<double>(6, 0.0));
  check_close(values(dx), values(x * 2.0), 1e-15, "2x");
  // A tensor of another type than any leaf.
  const kiln::tensor<double> lone = random_tensor({5});
  auto [dl] = kiln::grad(kiln::sum(kiln::cast<double>(other)), lone);
  CHECK(values(dl) == std::vector<double>(5, 0.0));
}

TEST_CASE("grad with respect to a rank-0 tensor leaves the shared zero alone", "[grad]") {
  // The adjoint of a rank-0 tensor used broadcast is summed into storage of its own; it
  // was written into the rank-0 zero that every unused gradient is a view of.
  const auto s = random_tensor({}), x = random_tensor({3, 4}), y = random_tensor({4});
  auto [ds] = kiln::grad(kiln::sum(kiln::exp(s * x) * y), s);
  const auto xv = values(x), yv = values(y);
  double ref = 0;
  for (std::size_t i = 0; i < xv.size(); ++i)
    ref += xv[i] * yv[i % 4] * std::exp(values(s)[0] * xv[i]);
  check_close(values(ds), {ref}, 1e-12, "d/ds");
  // No leaf of f has unused's type, so its gradient is the shared zero, broadcast.
  const kiln::tensor<double> unused = random_tensor({5});
  auto [du] = kiln::grad(kiln::sum(kiln::cast<double>(kiln::ones<float>({7}))), unused);
  CHECK(values(du) == std::vector<double>(5, 0.0));
  CHECK(kiln::autodiff::scalar_zero<double>(kiln::device{}).item() == 0.0);
}

TEST_CASE("zero and one fold away at the type level: adjoint types stay small", "[grad]") {
  const auto z = random_tensor({6});
  kiln::tensor<float> x({6}), y({6});
  x = kiln::cast<float>(random_tensor({6}));
  y = kiln::cast<float>(random_tensor({6}));
  // d sum(z) / dz is the seed itself: no "* 1" node around it.
  auto [plain] = kiln::grad(kiln::sum(z), z);
  using seed_only = kiln::autodiff::adjoint_node<kiln::autodiff::direction::to_wrt, double,
                                                 kiln::scalar_expr<double>>;
  static_assert(std::is_same_v<decltype(plain), seed_only>);
  // The x * y branch does not depend on z: its adjoint is zero and leaves no node.
  auto [folded] = kiln::grad(kiln::sum(kiln::cast<double>(x * y) + z), z);
  static_assert(std::is_same_v<decltype(folded), decltype(plain)>);
  CHECK(values(folded) == std::vector<double>(6, 1.0));
}

TEST_CASE("second order: grad of grad", "[grad]") {
  const auto x = random_tensor({9}, -3, 3);
  auto [d1] = kiln::grad(kiln::sum(kiln::sin(x)), x);
  auto [d2] = kiln::grad(kiln::sum(d1), x);
  check_close(values(d1), values(kiln::cos(x)), 1e-14, "sin' = cos");
  check_close(values(d2), values(-kiln::sin(x)), 1e-14, "sin'' = -sin");
  // Hessian-vector product of f = 1/2 x^T A x (A x written with broadcasting and a sum
  // over an axis): H v = (A + A^T) v / 2.
  constexpr int n = 5;
  const auto a = random_tensor({n, n}), xv = random_tensor({n}), v = random_tensor({n});
  const auto f = 0.5 * kiln::sum(xv * kiln::sum(a * xv.unsqueeze(0), 1));
  auto [g] = kiln::grad(f, xv);
  auto [hv] = kiln::grad(kiln::sum(g * v), xv);
  const auto av = a.to_vector(), vv = v.to_vector(), xs = xv.to_vector();
  std::vector<double> want(n), want_g(n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      want[i] += 0.5 * (av[i * n + j] + av[j * n + i]) * vv[j];
      want_g[i] += 0.5 * (av[i * n + j] + av[j * n + i]) * xs[j];
    }
  check_close(values(g), want_g, 1e-12, "grad of the quadratic form");
  check_close(values(hv), want, 1e-12, "Hessian-vector product");
}

TEST_CASE("forward mode: jvp, and jvp over grad", "[grad]") {
  const auto x = random_tensor({3, 4}), y = random_tensor({4}), dx = random_tensor({3, 4}),
             dy = random_tensor({4});
  const auto e = kiln::sin(x) * y + kiln::exp(y * 0.5);
  const auto t = kiln::jvp(e, {x, dx}, {y, dy});
  CHECK(t.shape() == kiln::shape{3, 4});
  // The directional derivative, by finite differences along (dx, dy).
  const auto xs = x.to_vector(), ys = y.to_vector(), dxs = dx.to_vector(), dys = dy.to_vector();
  std::vector<double> want(12);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j)
      want[i * 4 + j] = grad_test::fd1(
          [&](double h) {
            return std::sin(xs[i * 4 + j] + h * dxs[i * 4 + j]) * (ys[j] + h * dys[j]) +
                   std::exp((ys[j] + h * dys[j]) * 0.5);
          },
          0.0);
  check_close(values(t), want, tol, "jvp");
  // Forward over reverse: the Hessian-vector product of f = sum(exp(x) * y), w.r.t. x.
  auto [g] = kiln::grad(kiln::sum(kiln::exp(x) * y), x);
  const auto hv = kiln::jvp(g, {x, dx});
  check_close(values(hv), values(kiln::exp(x) * y * dx), 1e-12, "jvp over grad");
  CHECK_THROWS_WITH(kiln::jvp(e, {x, dy}), Catch::Contains("tangent does not have"));
}

TEST_CASE("value and gradients in one kiln::eval", "[grad]") {
  const auto x = random_tensor({50}), y = random_tensor({50}), seed = random_tensor({50});
  const auto e = kiln::sin(x) * y + kiln::exp(x * 0.5);
  auto [dx, dy] = kiln::vjp(e, seed, x, y);
  tensor<double> out({50}), gx({50}), gy({50});
  kiln::eval(out = e, gx = dx, gy = dy);
  check_close(out.to_vector(), values(e), 1e-15, "value");
  const auto xs = x.to_vector(), ys = y.to_vector(), ss = seed.to_vector();
  std::vector<double> wx(50), wy(50);
  for (int i = 0; i < 50; ++i) {
    wx[i] = ss[i] * (std::cos(xs[i]) * ys[i] + 0.5 * std::exp(0.5 * xs[i]));
    wy[i] = ss[i] * std::sin(xs[i]);
  }
  check_close(gx.to_vector(), wx, 1e-14, "vjp x");
  check_close(gy.to_vector(), wy, 1e-14, "vjp y");
}

TEST_CASE("a rank-0 loss and its gradients in one kiln::eval", "[grad]") {
  const auto x = random_tensor({7, 9}), y = random_tensor({9});
  const auto f = kiln::sum(kiln::sin(x) * y + kiln::exp(x * 0.5));
  auto [dx, dy] = kiln::grad(f, x, y);
  tensor<double> loss(kiln::shape{}), gx({7, 9}), gy({9});
  kiln::eval(loss = f, gx = dx, gy = dy); // the gradients in one pass, the loss its sum
  const auto xs = x.to_vector(), ys = y.to_vector();
  double want = 0;
  std::vector<double> wx(63), wy(9, 0.0);
  for (int i = 0; i < 7; ++i)
    for (int j = 0; j < 9; ++j) {
      const double v = xs[i * 9 + j];
      want += std::sin(v) * ys[j] + std::exp(v * 0.5);
      wx[i * 9 + j] = std::cos(v) * ys[j] + 0.5 * std::exp(v * 0.5);
      wy[j] += std::sin(v);
    }
  check_close({loss.item()}, {want}, 1e-13, "loss");
  check_close(gx.to_vector(), wx, 1e-13, "d loss / dx");
  check_close(gy.to_vector(), wy, 1e-13, "d loss / dy");
  // Outputs of several shapes whose targets are also inputs of the others: every value is
  // computed from the inputs as they were (through temporaries), then written.
  tensor<double> xw = x.clone(), yw = y.clone();
  kiln::eval(xw = xw * yw, yw = kiln::sum(xw, 0) + yw, loss = kiln::sum(yw));
  const auto xw_v = xw.to_vector(), yw_v = yw.to_vector();
  double ysum = 0;
  for (int j = 0; j < 9; ++j) {
    double col = 0;
    for (int i = 0; i < 7; ++i) {
      CHECK(xw_v[i * 9 + j] == xs[i * 9 + j] * ys[j]);
      col += xs[i * 9 + j];
    }
    CHECK(std::abs(yw_v[j] - (col + ys[j])) <= 1e-13);
    ysum += ys[j];
  }
  CHECK(std::abs(loss.item() - ysum) <= 1e-13);
}

TEST_CASE("autodiff misuse is a clear error", "[grad]") {
  const auto x = random_tensor({3});
  CHECK_THROWS_WITH(kiln::grad(x * 2.0, x), Catch::Contains("not a scalar"));
  CHECK_THROWS_WITH(kiln::vjp(x * 2.0, random_tensor({4}), x),
                    Catch::Contains("seed does not have the expression's shape"));
  CHECK_THROWS_AS(kiln::grad(kiln::sum(x), tensor<double>()), kiln::error);
}
