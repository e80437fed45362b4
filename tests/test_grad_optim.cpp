// Optimizers as fused updates against a plain-loop reference for a few steps, gradient
// clipping and learning-rate schedules. The loss is sum(w (p - c)^2) + sum(sin(q)), so the
// gradients 2 w (p - c) and cos(q) are known in closed form for the reference.
#include "grad_support.hpp"

namespace {

using kiln::tensor;
constexpr int n = 23;

struct problem {
  std::vector<double> w = test::uniform<double>(n, 0.5, 2), c = test::uniform<double>(n, -1, 1),
                      p0 = test::uniform<double>(n, -2, 2), q0 = test::uniform<double>(n, -2, 2);
  tensor<double> W = grad_test::from(w, {n}), C = grad_test::from(c, {n}),
                 P = grad_test::from(p0, {n}), Q = grad_test::from(q0, {n});
  auto loss() const { return kiln::sum(W * (P - C) * (P - C)) + kiln::sum(kiln::sin(Q)); }
  double gp(int i, const std::vector<double>& p) const { return 2 * w[i] * (p[i] - c[i]); }
};

} // namespace

TEST_CASE("SGD with momentum, Nesterov and weight decay against a plain loop", "[grad]") {
  for (bool nesterov : {false, true}) {
    problem pr;
    const kiln::optim::sgd_options o{
        .lr = 0.05, .momentum = 0.9, .weight_decay = 0.01, .nesterov = nesterov};
    kiln::optim::sgd<double> opt({pr.P, pr.Q}, o);
    auto [dp, dq] = kiln::grad(pr.loss(), pr.P, pr.Q); // lazy: reads P and Q as they change
    std::vector<double> p = pr.p0, q = pr.q0, vp(n), vq(n);
    for (int step = 0; step < 4; ++step) {
      opt.step(dp, dq);
      for (int i = 0; i < n; ++i) {
        const double gp = pr.gp(i, p) + o.weight_decay * p[i];
        const double gq = std::cos(q[i]) + o.weight_decay * q[i];
        vp[i] = o.momentum * vp[i] + gp;
        vq[i] = o.momentum * vq[i] + gq;
        p[i] -= o.lr * (nesterov ? gp + o.momentum * vp[i] : vp[i]);
        q[i] -= o.lr * (nesterov ? gq + o.momentum * vq[i] : vq[i]);
      }
    }
    INFO("nesterov " << nesterov);
    grad_test::check_close(pr.P.to_vector(), p, 1e-12, "p");
    grad_test::check_close(pr.Q.to_vector(), q, 1e-12, "q");
  }
}

TEST_CASE("Adam and AdamW against a plain loop", "[grad]") {
  for (bool decoupled : {false, true}) {
    problem pr;
    const kiln::optim::adam_options o{.lr = 0.03, .weight_decay = 0.05, .decoupled = decoupled};
    kiln::optim::adam<double> opt({pr.P}, o);
    auto [dp] = kiln::grad(pr.loss(), pr.P);
    std::vector<double> p = pr.p0, m(n), v(n);
    for (int t = 1; t <= 5; ++t) {
      opt.step(dp);
      for (int i = 0; i < n; ++i) {
        double g = pr.gp(i, p);
        if (!decoupled) g += o.weight_decay * p[i];
        m[i] = o.beta1 * m[i] + (1 - o.beta1) * g;
        v[i] = o.beta2 * v[i] + (1 - o.beta2) * g * g;
        const double mh = m[i] / (1 - std::pow(o.beta1, t)), vh = v[i] / (1 - std::pow(o.beta2, t));
        if (decoupled) p[i] *= 1 - o.lr * o.weight_decay;
        p[i] -= o.lr * mh / (std::sqrt(vh) + o.eps);
      }
    }
    INFO("decoupled " << decoupled);
    grad_test::check_close(pr.P.to_vector(), p, 1e-12, "p");
  }
}

TEST_CASE("gradient clipping and learning-rate schedules", "[grad]") {
  problem pr;
  auto [dp, dq] = kiln::grad(pr.loss(), pr.P, pr.Q);
  const auto gp = tensor<double>(dp).to_vector(), gq = tensor<double>(dq).to_vector();
  double sq = 0;
  for (int i = 0; i < n; ++i)
    sq += gp[i] * gp[i] + gq[i] * gq[i];
  const double scale = kiln::optim::clip_scale(0.5, dp, dq);
  CHECK(scale == Approx(0.5 / std::sqrt(sq)).epsilon(1e-12));
  CHECK(kiln::optim::clip_scale(1e9, dp, dq) == 1.0);
  const auto clipped = tensor<double>(kiln::optim::clip_by_value(dp, 0.3)).to_vector();
  for (int i = 0; i < n; ++i)
    CHECK(clipped[i] == std::clamp(gp[i], -0.3, 0.3));
  CHECK(kiln::optim::step_lr(0.1, 25, 10, 0.5) == Approx(0.025));
  CHECK(kiln::optim::cosine_lr(0.1, 0, 100) == Approx(0.1));
  CHECK(kiln::optim::cosine_lr(0.1, 50, 100) == Approx(0.05));
  CHECK(kiln::optim::cosine_lr(0.1, 100, 100, 0.01) == Approx(0.01));
  CHECK(kiln::optim::warmup_lr(0.1, 0, 4) == Approx(0.025));
  CHECK(kiln::optim::warmup_lr(0.1, 3, 4) == Approx(0.1));
  CHECK(kiln::optim::warmup_lr(0.1, 10, 4, [](long t) { return 1.0 / double(t); }) == Approx(0.1));
}
