// One kiln::eval with outputs of several shapes on each GPU device (issue 37): the README's
// training pattern (a rank-0 loss, a weight gradient and a rank-0 bias gradient), gradients of
// every rank beside a rank-0 loss, outputs of three shapes where one target is another
// output's input, a two-layer network's training step. Each is checked against double loops written
// here, and the device's results against the host's; outputs that share a shape share a kernel.
#include "vulkan_support.hpp" // first: it registers a Catch listener

#include "cuda_support.hpp"
#include "grad_support.hpp"
#include "metal_support.hpp"

#include <cmath>
#include <vector>

namespace {

// A tensor's values on the host, in double (grad_support.hpp compares doubles).
template <class T>
std::vector<double> read(const kiln::tensor<T>& t) {
  const std::vector<T> v = t.to(kiln::device{}).to_vector();
  return std::vector<double>(v.begin(), v.end());
}

using grad_test::check_close; // relative to max(1, |want|), the worst element reported

// The program: logistic loss of z = sum(x * w, 1) + b, its gradients in w and b,
// filled by one kiln::eval on `dev`.
void logistic(const kiln::device& dev) {
  const std::int64_t n = 16, d = 8;
  const auto xv = test::uniform<float>(n * d, -2, 2), wv = test::uniform<float>(d, -1, 1);
  const auto yv = test::integers<float>(n, 0, 1);
  const float bv = test::uniform<float>(1, -0.5, 0.5)[0];
  const kiln::tensor<float> x = kiln::from(xv, {n, d}).to(dev), w = kiln::from(wv, {d}).to(dev),
                            y = kiln::from(yv, {n}).to(dev);
  kiln::tensor<float> b = kiln::zeros<float>({}, dev);
  b = bv;
  const auto z = kiln::sum(x * w, 1) + b;
  const auto loss = kiln::mean(kiln::log(1.0f + kiln::exp(-z * (2.0f * y - 1.0f))));
  auto [dw, db] = kiln::grad(loss, w, b);
  kiln::tensor<float> l = kiln::zeros<float>({}, dev), gw = kiln::zeros<float>({d}, dev),
                      gb = kiln::zeros<float>({}, dev);
  kiln::eval(l = loss, gw = dw, gb = db);
  REQUIRE(l.device() == dev);

  // d/dz_i of mean(log(1 + e^(-z_i s_i))), s_i = 2 y_i - 1: -s_i sigmoid(-z_i s_i) / n.
  double want_l = 0, want_b = 0;
  std::vector<double> want_w(d, 0.0);
  for (std::int64_t i = 0; i < n; ++i) {
    double zi = bv;
    for (std::int64_t j = 0; j < d; ++j)
      zi += double(xv[i * d + j]) * wv[j];
    const double s = 2.0 * yv[i] - 1, m = -zi * s;
    want_l += std::log1p(std::exp(m)) / n;
    const double dz = -s / (1 + std::exp(-m)) / n;
    want_b += dz;
    for (std::int64_t j = 0; j < d; ++j)
      want_w[j] += dz * xv[i * d + j];
  }
  check_close(read(l), {want_l}, 1e-5, "loss");
  check_close(read(gw), want_w, 1e-5, "dw");
  check_close(read(gb), {want_b}, 1e-5, "db");
}

// loss = sum(tanh(t * m * v)) + a^2 sum(v) over t [3, 4, 5], m [4, 5], v [5], a []: the
// loss and its gradients in all four (ranks 0 to 3) from one kiln::eval, five shapes.
void every_rank(const kiln::device& dev) {
  const std::int64_t I = 3, J = 4, K = 5;
  const auto tv = test::uniform<float>(I * J * K, -1.5, 1.5),
             mv = test::uniform<float>(J * K, -1.5, 1.5), vv = test::uniform<float>(K, -1.5, 1.5);
  const float av = test::uniform<float>(1, -2, 2)[0];
  const kiln::tensor<float> t = kiln::from(tv, {I, J, K}).to(dev),
                            m = kiln::from(mv, {J, K}).to(dev), v = kiln::from(vv, {K}).to(dev);
  kiln::tensor<float> a = kiln::zeros<float>({}, dev);
  a = av;
  const auto loss = kiln::sum(kiln::tanh(t * m * v)) + a * a * kiln::sum(v);
  auto [da, dv, dm, dt] = kiln::grad(loss, a, v, m, t);
  kiln::tensor<float> l = kiln::zeros<float>({}, dev), ga = kiln::zeros<float>({}, dev),
                      gv = kiln::zeros<float>({K}, dev), gm = kiln::zeros<float>({J, K}, dev),
                      gt = kiln::zeros<float>({I, J, K}, dev);
  kiln::eval(l = loss, gt = dt, ga = da, gm = dm, gv = dv);

  double want_l = 0, sum_v = 0;
  std::vector<double> want_v(K, 0.0), want_m(J * K, 0.0), want_t(I * J * K, 0.0);
  for (std::int64_t k = 0; k < K; ++k)
    sum_v += vv[k];
  for (std::int64_t i = 0; i < I; ++i)
    for (std::int64_t j = 0; j < J; ++j)
      for (std::int64_t k = 0; k < K; ++k) {
        const double tt = tv[(i * J + j) * K + k], mm = mv[j * K + k], v0 = vv[k];
        const double th = std::tanh(tt * mm * v0), s = 1 - th * th;
        want_l += th;
        want_t[(i * J + j) * K + k] = s * mm * v0;
        want_m[j * K + k] += s * tt * v0;
        want_v[k] += s * tt * mm;
      }
  want_l += double(av) * av * sum_v;
  for (auto& g : want_v)
    g += double(av) * av;
  check_close(read(l), {want_l}, 1e-5, "loss");
  check_close(read(ga), {2.0 * av * sum_v}, 1e-5, "da (rank 0)");
  check_close(read(gv), want_v, 1e-5, "dv (rank 1)");
  check_close(read(gm), want_m, 1e-5, "dm (rank 2)");
  check_close(read(gt), want_t, 1e-5, "dt (rank 3)");
}

// Outputs of three shapes computed from the values before the call, where p is both a target
// and every output's input, and q a target and an input of p's.
void aliasing(const kiln::device& dev) {
  const std::int64_t R = 4, C = 5;
  const auto pv = test::uniform<float>(R * C, -3, 3), qv = test::uniform<float>(C, -3, 3);
  kiln::tensor<float> p = kiln::from(pv, {R, C}).to(dev), q = kiln::from(qv, {C}).to(dev),
                      s = kiln::zeros<float>({}, dev);
  kiln::eval(q = kiln::sum(p, 0) * 0.5f, p = p * 2.0f + q, s = kiln::sum(q) + kiln::max(p));

  std::vector<double> want_q(C, 0.0), want_p(R * C);
  double sum_q = 0, max_p = -INFINITY;
  for (std::int64_t c = 0; c < C; ++c)
    sum_q += qv[c];
  for (std::int64_t r = 0; r < R; ++r)
    for (std::int64_t c = 0; c < C; ++c) {
      want_q[c] += 0.5 * pv[r * C + c];
      want_p[r * C + c] = 2.0 * pv[r * C + c] + qv[c];
      max_p = std::max(max_p, double(pv[r * C + c]));
    }
  check_close(read(q), want_q, 1e-5, "q = sum(p, 0) * 0.5");
  check_close(read(p), want_p, 1e-6, "p = p * 2 + q");
  check_close(read(s), {sum_q + max_p}, 1e-5, "s = sum(q) + max(p)");
}

// Outputs that share a shape share a kernel: five outputs of three shapes (new expression
// types, so nothing was lowered before) lower three passes on a device, and a second call none.
void grouping(const kiln::device& dev) {
  const std::int64_t R = 6, C = 7;
  const auto xv = test::uniform<float>(R * C, -1, 1), vv = test::uniform<float>(C, -1, 1),
             uv = test::uniform<float>(R, -1, 1);
  const kiln::tensor<float> x = kiln::from(xv, {R, C}).to(dev), v = kiln::from(vv, {C}).to(dev),
                            u = kiln::from(uv, {R, 1}).to(dev);
  kiln::tensor<float> o1 = kiln::zeros<float>({R, C}, dev), o2 = kiln::zeros<float>({C}, dev),
                      o3 = kiln::zeros<float>({R, C}, dev), o4 = kiln::zeros<float>({C}, dev),
                      o5 = kiln::zeros<float>({R, 1}, dev);
  for (int round = 0; round < 2; ++round) {
    const auto before = kiln::jit::lowering_count().load();
    kiln::eval(o1 = x * 3.0f - v, o2 = v * v + 0.25f, o3 = kiln::abs(x) + v * 2.0f, o4 = 1.5f - v,
               o5 = u * 2.0f + 1.0f);
    const auto lowered = kiln::jit::lowering_count().load() - before;
    if (!dev.is_host()) CHECK(lowered == (round == 0 ? 3u : 0u)); // the host lowers nothing
  }
  std::vector<double> w1(R * C), w2(C), w3(R * C), w4(C), w5(R);
  for (std::int64_t r = 0; r < R; ++r)
    w5[r] = 2.0 * uv[r] + 1.0;
  for (std::int64_t c = 0; c < C; ++c) {
    w2[c] = double(vv[c]) * vv[c] + 0.25;
    w4[c] = 1.5 - vv[c];
    for (std::int64_t r = 0; r < R; ++r) {
      w1[r * C + c] = 3.0 * xv[r * C + c] - vv[c];
      w3[r * C + c] = std::abs(xv[r * C + c]) + 2.0 * vv[c];
    }
  }
  check_close(read(o1), w1, 1e-6, "o1");
  check_close(read(o2), w2, 1e-6, "o2");
  check_close(read(o3), w3, 1e-6, "o3");
  check_close(read(o4), w4, 1e-6, "o4");
  check_close(read(o5), w5, 1e-6, "o5");
}

// A two-layer network's training step written with broadcasting (h = tanh(x W1 + b1) as a sum
// over an axis, z = h w2 + b2, a logistic loss): the loss and the gradients of W1 [d, k],
// b1 [k], w2 [k] and b2 [] from one kiln::eval, on `dev` in f32 against the host in f64; then
// Adam steps on `dev` lower the loss.
template <class T>
struct mlp {
  kiln::tensor<T> x, y, W1, b1, w2, b2;
  mlp(const kiln::device& dev, std::uint64_t seed, std::int64_t n, std::int64_t d, std::int64_t k)
      : x(kiln::random::normal<T>({n, d}, seed).to(dev)),
        y(kiln::cast<T>(kiln::random::uniform<T>({n}, seed + 1) > T(0.5)).eval().to(dev)),
        W1((kiln::random::normal<T>({d, k}, seed + 2) * T(0.5)).eval().to(dev)),
        b1(kiln::random::normal<T>({k}, seed + 3).to(dev)),
        w2(kiln::random::normal<T>({k}, seed + 4).to(dev)), b2(kiln::zeros<T>({}, dev)) {}
  auto loss() const {
    const auto h = kiln::tanh(kiln::sum(x.unsqueeze(2) * W1, 1) + b1); // [n, k]
    const auto z = kiln::sum(h * w2, 1) + b2;                          // [n]
    return kiln::mean(kiln::softplus(z) - y * z);
  }
  // The loss and the four gradients, as host vectors.
  std::vector<std::vector<double>> step_values() const {
    const auto f = loss();
    auto [dW1, db1, dw2, db2] = kiln::grad(f, W1, b1, w2, b2);
    const kiln::device dev = x.device();
    kiln::tensor<T> l = kiln::zeros<T>({}, dev), g1 = kiln::zeros<T>(W1.shape(), dev),
                    g2 = kiln::zeros<T>(b1.shape(), dev), g3 = kiln::zeros<T>(w2.shape(), dev),
                    g4 = kiln::zeros<T>({}, dev);
    kiln::eval(l = f, g1 = dW1, g2 = db1, g3 = dw2, g4 = db2);
    return {read(l), read(g1), read(g2), read(g3), read(g4)};
  }
};

void mlp_training(const kiln::device& dev) {
  const std::uint64_t seed = std::uint64_t(test::draw(1, 1 << 20));
  const mlp<float> m(dev, seed, 64, 6, 5);
  const mlp<double> ref(kiln::device{}, seed, 64, 6, 5);
  const auto got = m.step_values(), want = ref.step_values();
  const char* names[] = {"loss", "dW1", "db1", "dw2", "db2"};
  for (std::size_t i = 0; i < got.size(); ++i)
    check_close(got[i], want[i], 2e-5, names[i]);
  // Training on the device: Adam's steps read the gradients lazily (each step one eval per
  // parameter), and the loss falls.
  mlp<float> t(dev, seed, 64, 6, 5);
  const auto f = t.loss();
  auto [dW1, db1, dw2, db2] = kiln::grad(f, t.W1, t.b1, t.w2, t.b2);
  kiln::optim::adam<float> opt({t.W1, t.b1, t.w2, t.b2}, {.lr = 0.05});
  const float first = f.item();
  for (int s = 0; s < 30; ++s)
    opt.step(dW1, db1, dw2, db2);
  CHECK(t.W1.device() == dev);
  CHECK(f.item() < 0.8f * first);
}

void all_cases(const kiln::device& dev) {
  INFO("on " << dev.str());
  for (int k = 0; k < 3; ++k) { // new random values each round, the same kernels
    logistic(dev);
    every_rank(dev);
    aliasing(dev);
  }
  grouping(dev);
  // The training step on the host and vulkan:0 (issue 37 asks for vulkan:0): under
  // cuda-on-cpu and msl-on-cpu each of its ~40 kernels is compiled by the host compiler
  // (250 s for this case alone), and the cases above already run there.
  if (dev.is_host() || dev.kind() == kiln::device_kind::vulkan) mlp_training(dev);
}

} // namespace

TEST_CASE("eval: outputs of several shapes on the host match double loops", "[host]") {
  all_cases(kiln::device{});
}

TEST_CASE("eval: outputs of several shapes on each GPU device match double loops, one kernel "
          "per shape",
          "[vulkan][cuda][metal]") {
  for (const kiln::device* dev : {vulkan_or_skip(), cuda_or_skip(), metal_or_skip()})
    if (dev) all_cases(*dev);
}
