// A two-layer network trained with Adam on data it makes: two interleaved half-moons in the
// plane (noise 0.15), features lifted to 8 dims by a fixed random matrix. The layers are
// products: h = gelu(x W1 + b1) (on the host the product's kernel applies gelu(. + b1) to each
// finished strip of x W1: one pass), logits = h w2 + b2; the loss is the mean binary
// cross-entropy from logits. Each epoch is a few full-batch steps; it prints the loss, the
// accuracy and the time. Runs on the default device (KILN_DEVICE, e.g. vulkan:0). Exits
// non-zero below 97% accuracy (after fewer than 3 epochs: a loss not below 0.3, a third of
// the untrained one). The step (gradients and Adam's update) is a captured plan, replayed
// each step (`uncaptured`: the statements run as written). Usage: mlp [epochs = 12]
// [uncaptured].
#include <kiln/kiln.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  const std::int64_t n = 2048, d = 8, hidden = 32;
  const int epochs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 12, steps_per_epoch = 25;

  // The moons: class 0 on the upper half circle, class 1 on the lower one shifted by (1, 0.5).
  std::mt19937 gen(5);
  std::normal_distribution<float> noise(0.0f, 0.15f);
  std::uniform_real_distribution<float> angle(0.0f, 3.14159265f);
  std::vector<float> lift(2 * d), x(n * d), y(n);
  for (auto& v : lift)
    v = noise(gen) / 0.15f;
  for (std::int64_t i = 0; i < n; ++i) {
    const float t = angle(gen), c = float(i % 2);
    const float p0 = c == 0 ? std::cos(t) : 1 - std::cos(t),
                p1 = c == 0 ? std::sin(t) : 0.5f - std::sin(t);
    const float q0 = p0 + noise(gen), q1 = p1 + noise(gen);
    y[i] = c;
    for (std::int64_t j = 0; j < d; ++j)
      x[i * d + j] = q0 * lift[j] + q1 * lift[d + j];
  }
  const kiln::device dev = kiln::default_device();
  const auto X = kiln::from(x, {n, d}).to(dev), Y = kiln::from(y, {n}).to(dev);
  // Weights drawn with the variance 1 / fan-in.
  auto W1 = (kiln::random::normal<float>({d, hidden}, 11) * float(1 / std::sqrt(double(d))))
                .eval()
                .to(dev);
  auto w2 = (kiln::random::normal<float>({hidden}, 12) * float(1 / std::sqrt(double(hidden))))
                .eval()
                .to(dev);
  auto b1 = kiln::zeros<float>({hidden}, dev), b2 = kiln::zeros<float>({}, dev);

  const auto h = kiln::gelu(kiln::matmul(X, W1) + b1); // [n, hidden]
  const auto logits = kiln::matmul(h, w2) + b2;        // [n]
  const auto loss = kiln::mean(kiln::softplus(logits) - Y * logits);
  auto [dW1, db1, dw2, db2] = kiln::grad(loss, W1, b1, w2, b2);

  kiln::optim::adam<float> opt({W1, b1, w2, b2}, {.lr = 0.02});
  // The step as a plan over the data: the gradient trees read X and Y (its arguments) and the
  // optimizer's own weights; products run unfused inside a plan (their consumers are passes).
  const bool captured = !(argc > 2 && std::string(argv[2]) == "uncaptured");
  auto train_step = kiln::capture(
      [&opt, &dW1 = dW1, &db1 = db1, &dw2 = dw2, &db2 = db2](
          const kiln::tensor<float>&, const kiln::tensor<float>&) { opt.step(dW1, db1, dw2, db2); },
      {.name = "mlp training step"});
  const auto t0 = std::chrono::steady_clock::now();
  double acc = 0, l = 0;
  std::printf("a 2-layer network (%ld -> %ld -> 1) on %s\n", long(d), long(hidden),
              dev.str().c_str());
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    for (int s = 0; s < steps_per_epoch; ++s)
      if (captured)
        train_step(X, Y);
      else
        opt.step(dW1, db1, dw2, db2);
    l = kiln::tensor<float>(loss).item();
    acc = kiln::mean(kiln::cast<float>((logits > 0.0f) == (Y > 0.5f))).item();
    const double spent =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("epoch %2d/%d  loss %.4f  accuracy %.2f%%  %.2f s\n", epoch, epochs, l, 100 * acc,
                spent);
  }
  const bool ok = epochs >= 3 ? acc >= 0.97 : l < 0.3;
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("final accuracy %.2f%%, loss %.4f (%s), %d steps %s, %.1f ms per epoch\n", 100 * acc,
              l,
              ok            ? "ok"
              : epochs >= 3 ? "below 97%"
                            : "loss not below 0.3",
              epochs * steps_per_epoch,
              captured ? "replayed from a captured plan" : "run as written", 1e3 * total / epochs);
  return ok ? 0 : 1;
}
