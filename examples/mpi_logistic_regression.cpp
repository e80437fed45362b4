// Logistic regression trained on every rank of an MPI job (kiln/mpi.hpp), data-parallel:
// rank 0 makes the data set (two Gaussian classes, as examples/logistic_regression.cpp) and
// scatters its rows, each rank holds one shard, computes the gradient of its shard's share
// of the loss (kiln::grad: one fused pass per gradient), the gradients are summed across the
// ranks (one allreduce of w's and b's gradients packed together), and every rank takes the
// same Adam step, so the ranks' parameters stay identical.
//
// Then rank 0 trains the same model on the whole data set alone and compares: the ranks sum
// the same terms in another order, so the parameters agree to rounding, not bit for bit; the
// run fails (exit 1) if any differs by more than 1e-9 relative, or if the accuracy is below
// 95%. It prints the time per step and the share of it spent in the allreduce.
//
//   mpirun -np 2 ./mpi_logistic_regression [--rows N] [--dims D] [--steps S] [--no-reference]
#include <kiln/mpi.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;
double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

struct model {
  kiln::tensor<double> w, b;
};

struct timing {
  double total = 0, allreduce = 0;
};

// Trains on (X, Y), a shard of a data set of `rows_total` rows; with `comm` the gradients
// are summed across its ranks, else this is the whole data set.
model train(const kiln::tensor<double>& X, const kiln::tensor<double>& Y, std::int64_t rows_total,
            int steps, MPI_Comm comm, timing& t) {
  const std::int64_t d = X.dim(1);
  model m{kiln::zeros<double>({d}), kiln::zeros<double>({1})};
  const auto logits = kiln::sum(X * m.w, 1) + m.b; // [rows]
  // The shard's share of the mean binary cross-entropy: the ranks' shares add up to it.
  const auto softplus = kiln::maximum(logits, 0.0) + kiln::log1p(kiln::exp(-kiln::abs(logits)));
  const auto share = kiln::sum(softplus - Y * logits) / double(rows_total);
  auto [dw, db] = kiln::grad(share, m.w, m.b);
  kiln::optim::adam<double> opt({m.w, m.b}, {.lr = 0.05});
  kiln::tensor<double> g({d + 1}); // both gradients, in one message
  const auto t0 = clock_type::now();
  for (int s = 0; s < steps; ++s) {
    kiln::eval(g.narrow(0, 0, d) = dw, g.narrow(0, d, 1) = db);
    if (comm != MPI_COMM_NULL) {
      const auto a0 = clock_type::now();
      kiln::mpi::allreduce_in_place(g, kiln::mpi::reduction::sum, comm);
      t.allreduce += seconds_since(a0);
    }
    opt.step(g.narrow(0, 0, d), g.narrow(0, d, 1));
  }
  t.total += seconds_since(t0);
  return m;
}

double accuracy(const model& m, const kiln::tensor<double>& X, const kiln::tensor<double>& Y) {
  const auto logits = kiln::sum(X * m.w, 1) + m.b;
  return kiln::mean(kiln::cast<double>((logits > 0.0) == (Y > 0.5))).item();
}

} // namespace

int main(int argc, char** argv) {
  kiln::mpi::environment env(argc, argv);
  std::int64_t rows = 8000, d = 16;
  int steps = 200;
  bool reference = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--rows" && i + 1 < argc)
      rows = std::atoll(argv[++i]);
    else if (a == "--dims" && i + 1 < argc)
      d = std::atoll(argv[++i]);
    else if (a == "--steps" && i + 1 < argc)
      steps = std::atoi(argv[++i]);
    else if (a == "--no-reference")
      reference = false;
  }
  const int me = kiln::mpi::rank(), ranks = kiln::mpi::size();

  // Rank 0's data set: class y in {0, 1}, features ~ N(mu_y, 1), class means 4.5 apart.
  kiln::tensor<double> X_all, Y_all;
  if (me == 0) {
    std::mt19937 gen(3);
    std::normal_distribution<double> normal;
    std::vector<double> dir(static_cast<std::size_t>(d)), x(static_cast<std::size_t>(rows * d)),
        y(static_cast<std::size_t>(rows));
    double norm = 0;
    for (auto& v : dir) {
      v = normal(gen);
      norm += v * v;
    }
    for (auto& v : dir)
      v *= 4.5 / std::sqrt(norm);
    for (std::int64_t i = 0; i < rows; ++i) {
      y[static_cast<std::size_t>(i)] = double(i % 2);
      for (std::int64_t j = 0; j < d; ++j)
        x[static_cast<std::size_t>(i * d + j)] =
            normal(gen) + (y[static_cast<std::size_t>(i)] - 0.5) * dir[static_cast<std::size_t>(j)];
    }
    X_all = kiln::from(x, {rows, d});
    Y_all = kiln::from(y, {rows});
  }
  const auto X = kiln::mpi::scatter(X_all, 0), Y = kiln::mpi::scatter(Y_all, 0);

  timing t;
  const model m = train(X, Y, rows, steps, MPI_COMM_WORLD, t);
  // Every rank's share of the accuracy, summed.
  const double acc =
      kiln::mpi::allreduce(kiln::full<double>({1}, accuracy(m, X, Y) * double(X.dim(0)))).item() /
      double(rows);
  if (me == 0)
    std::printf("%d rank%s, %lld rows x %lld features, %d steps: %.3f ms per step, %.3f ms "
                "(%.1f%%) of it in the allreduce; accuracy %.2f%%\n",
                ranks, ranks > 1 ? "s" : "", static_cast<long long>(rows),
                static_cast<long long>(d), steps, 1e3 * t.total / steps, 1e3 * t.allreduce / steps,
                t.total > 0 ? 100 * t.allreduce / t.total : 0.0, 100 * acc);
  bool ok = acc >= 0.95;

  if (reference && me == 0) {
    timing alone;
    const model r = train(X_all, Y_all, rows, steps, MPI_COMM_NULL, alone);
    const auto w = m.w.to_vector(), rw = r.w.to_vector();
    double worst = std::fabs(m.b.item() - r.b.item()) / (std::fabs(r.b.item()) + 1);
    for (std::size_t j = 0; j < w.size(); ++j)
      worst = std::max(worst, std::fabs(w[j] - rw[j]) / (std::fabs(rw[j]) + 1));
    std::printf("single process: %.3f ms per step; largest difference of the parameters %.3g "
                "(relative, tolerance 1e-9)\n",
                1e3 * alone.total / steps, worst);
    ok = ok && worst <= 1e-9;
  }
  int all_ok = ok ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (me == 0) std::printf("%s\n", all_ok ? "ok" : "FAILED");
  return all_ok ? 0 : 1;
}
