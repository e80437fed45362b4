// Least squares with products: a polynomial of degree 5 fitted to 4000 noisy samples of a
// known one, through the normal equations (X^T X) c = X^T y formed with kiln::matmul and
// solved here by Cholesky, then the ridge-regularized fit found two ways: the normal
// equations with lambda n I added, and Adam on the loss mean((X c - y)^2) + lambda |c|^2
// with kiln::grad. The basis is Chebyshev's on [-1, 1] (well conditioned). Checks the
// coefficients against the known ones and the two ridge fits against each other; exits
// non-zero if either is off.
#include <kiln/kiln.hpp>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

namespace {

// Solves A c = r for a symmetric positive definite A (p x p, row-major) by Cholesky.
std::vector<double> solve_spd(std::vector<double> a, std::vector<double> r, int p) {
  for (int j = 0; j < p; ++j) {
    for (int k = 0; k < j; ++k)
      a[j * p + j] -= a[j * p + k] * a[j * p + k];
    a[j * p + j] = std::sqrt(a[j * p + j]);
    for (int i = j + 1; i < p; ++i) {
      for (int k = 0; k < j; ++k)
        a[i * p + j] -= a[i * p + k] * a[j * p + k];
      a[i * p + j] /= a[j * p + j];
    }
  }
  for (int i = 0; i < p; ++i) { // L z = r
    for (int k = 0; k < i; ++k)
      r[i] -= a[i * p + k] * r[k];
    r[i] /= a[i * p + i];
  }
  for (int i = p - 1; i >= 0; --i) { // L^T c = z
    for (int k = i + 1; k < p; ++k)
      r[i] -= a[k * p + i] * r[k];
    r[i] /= a[i * p + i];
  }
  return r;
}

} // namespace

int main() {
  const std::int64_t n = 4000, p = 6;
  const std::vector<double> truth = {0.5, -1.25, 2.0, 0.75, -0.5, 0.3};
  std::mt19937 gen(7);
  std::uniform_real_distribution<double> u(-1, 1);
  std::normal_distribution<double> noise(0, 0.05);
  std::vector<double> xs(n * p), ys(n);
  for (std::int64_t i = 0; i < n; ++i) {
    const double t = u(gen);
    double t0 = 1, t1 = t, y = 0;
    for (std::int64_t j = 0; j < p; ++j) { // T_j(t) by the three-term recurrence
      const double tj = j == 0 ? t0 : j == 1 ? t1 : 2 * t * t1 - t0;
      if (j >= 2) t0 = t1, t1 = tj;
      xs[i * p + j] = tj;
      y += truth[j] * tj;
    }
    ys[i] = y + noise(gen);
  }
  const auto X = kiln::from(xs, {n, p}), y = kiln::from(ys, {n});

  // The normal equations: two products, X^T read through a transposed view (no copy).
  const kiln::tensor<double> gram = kiln::matmul(X.transpose(), X),
                             rhs = kiln::matmul(X.transpose(), y);
  const std::vector<double> c = solve_spd(gram.to_vector(), rhs.to_vector(), int(p));
  double worst = 0;
  std::printf("coefficient   known     fitted\n");
  for (std::int64_t j = 0; j < p; ++j) {
    std::printf("c%ld        %8.4f  %8.4f\n", long(j), truth[j], c[j]);
    worst = std::max(worst, std::fabs(c[j] - truth[j]));
  }
  // Residual of the fit, one fused pass over the product.
  const auto coef = kiln::from(c, {p});
  const double rms = std::sqrt(kiln::mean(kiln::pow(kiln::matmul(X, coef) - y, 2.0)).item());
  std::printf("rms residual %.4f (noise 0.05)\n", rms);

  // Ridge: the normal equations with lambda n on the diagonal, and gradient steps on the loss.
  const double lambda = 0.01;
  std::vector<double> g = gram.to_vector();
  for (std::int64_t j = 0; j < p; ++j)
    g[j * p + j] += lambda * n;
  const std::vector<double> ridge = solve_spd(g, rhs.to_vector(), int(p));
  auto w = kiln::zeros<double>({p});
  const auto loss = kiln::mean(kiln::pow(kiln::matmul(X, w) - y, 2.0)) + lambda * kiln::sum(w * w);
  auto [dw] = kiln::grad(loss, w);
  kiln::optim::adam<double> opt({w}, {.lr = 0.05});
  for (int s = 0; s < 1500; ++s)
    opt.step(dw);
  const std::vector<double> wd = w.to_vector();
  double ridge_gap = 0;
  std::printf("ridge (lambda %.2f)  normal equations  gradient steps\n", lambda);
  for (std::int64_t j = 0; j < p; ++j) {
    std::printf("c%ld                  %8.4f          %8.4f\n", long(j), ridge[j], wd[j]);
    ridge_gap = std::max(ridge_gap, std::fabs(ridge[j] - wd[j]));
  }
  const bool ok = worst < 0.01 && ridge_gap < 1e-3;
  std::printf("largest coefficient error %.2e, ridge fits apart by %.2e (%s)\n", worst, ridge_gap,
              ok ? "ok" : "too far");
  return ok ? 0 : 1;
}
