// Logistic regression trained with kiln::grad and the Adam optimizer on synthetic data: two
// Gaussian classes in 16 dimensions, features as a matrix X [n, d]. The model is written
// with broadcasting and a sum over an axis, p = sigmoid(sum(X * w, 1) + b), the loss is the
// mean binary cross-entropy; each epoch is full-batch gradient steps, printing the loss,
// the accuracy and the estimated time left. Exits non-zero below 95% accuracy. Usage:
// logistic_regression [epochs = 10].
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
  const std::int64_t n = 8000, d = 16;
  // The number of epochs may be given (the test on lavapipe, which runs f64 ~100x slower than
  // the host, trains for fewer).
  const int epochs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 10, steps_per_epoch = 20;

  // Class y in {0, 1}; features ~ N(mu_y, 1) with class means 4.5 apart along a random
  // direction: the best possible accuracy is about 98.8%.
  std::mt19937 gen(3);
  std::normal_distribution<double> normal;
  std::vector<double> dir(d), x(n * d), y(n);
  double norm = 0;
  for (auto& v : dir) {
    v = normal(gen);
    norm += v * v;
  }
  for (auto& v : dir)
    v *= 4.5 / std::sqrt(norm);
  for (std::int64_t i = 0; i < n; ++i) {
    y[i] = double(i % 2);
    for (std::int64_t j = 0; j < d; ++j)
      x[i * d + j] = normal(gen) + (y[i] - 0.5) * dir[j];
  }
  const auto X = kiln::from(x, {n, d}), Y = kiln::from(y, {n});
  auto w = kiln::zeros<double>({d}), b = kiln::zeros<double>({});

  const auto logits = kiln::sum(X * w, 1) + b; // [n]: w broadcast over rows
  // Cross-entropy from logits, stable for large |z|: softplus(z) - y z.
  const auto loss = kiln::mean(kiln::softplus(logits) - Y * logits);
  auto [dw, db] = kiln::grad(loss, w, b); // lazy: each step reads the current w and b

  kiln::optim::adam<double> opt({w, b}, {.lr = 0.05});
  // The step as a plan: the gradients are trees over X, Y, w and b built above; X and Y are
  // the plan's arguments (what it reads), w and b the optimizer's own.
  const bool captured = !(argc > 2 && std::string(argv[2]) == "uncaptured");
  auto train_step = kiln::capture(
      // (dw and db by names of their own: clang 14 does not capture a structured binding.)
      [&opt, &dw = dw, &db = db](const kiln::tensor<double>&, const kiln::tensor<double>&) {
        opt.step(dw, db);
      },
      {.name = "training step"});
  const auto t0 = std::chrono::steady_clock::now();
  double acc = 0;
  kiln::tensor<double> l, gw, gb; // empty handles: the eval below allocates them
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    for (int s = 0; s < steps_per_epoch; ++s)
      if (captured)
        train_step(X, Y);
      else
        opt.step(dw, db);
    kiln::eval(l = loss, gw = dw, gb = db); // the loss and its gradients (three shapes) at once
    const double grad_norm = std::sqrt(kiln::sum(gw * gw).item() + gb.item() * gb.item());
    acc = kiln::mean(kiln::cast<double>((logits > 0.0) == (Y > 0.5))).item();
    const double spent =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("epoch %2d/%d  loss %.4f  |gradient| %.2e  accuracy %.2f%%  ETA %.1f s\n", epoch,
                epochs, l.item(), grad_norm, 100 * acc, spent / epoch * (epochs - epoch));
  }
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("final accuracy %.2f%% (%s), %d steps %s, %.1f ms per epoch\n", 100 * acc,
              acc >= 0.95 ? "ok" : "below 95%", epochs * steps_per_epoch,
              captured ? "replayed from a captured plan" : "run as written", 1e3 * total / epochs);
  return acc >= 0.95 ? 0 : 1;
}
