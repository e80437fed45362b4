// The explicit 2-D heat equation with kiln views: a square plate of n x n points (f64), its
// edges held at fixed temperatures, its interior stepped by the 5-point stencil
//   u'[i][j] = u[i][j] + r * (u[i-1][j] + u[i+1][j] + u[i][j-1] + u[i][j+1] - 4 u[i][j])
// (r = alpha dt / dx^2 <= 1/4 keeps the scheme stable). The interior and its four neighbours
// are `narrow` views of one tensor: each step is one statement, one fused pass with no
// temporaries, that writes the interior of the other tensor; then the two trade places.
// The final plate is checked against a plain double loop; the program exits non-zero on a
// mismatch. Usage: heat2d [n = 2048] [steps = 20]. KILN_NUM_THREADS picks the thread count
// (default: every core); KILN_DEVICE=vulkan:0 or cuda:0 runs it there.
#include <kiln/kiln.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <utility>
#include <vector>

int main(int argc, char** argv) {
  const std::int64_t n = argc > 1 ? std::atoll(argv[1]) : 2048;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 20;
  if (n < 3 || steps < 0) {
    std::fprintf(stderr, "usage: heat2d [n >= 3] [steps >= 0]\n");
    return 2;
  }
  const double r = 0.2;

  // A cold plate with random noise inside, its top edge hot (1) and the others cold (0).
  const auto nn = static_cast<std::size_t>(n * n);
  std::vector<double> start(nn, 0.0);
  std::mt19937_64 gen(1);
  std::uniform_real_distribution<double> noise(0.0, 0.1);
  for (std::int64_t i = 1; i < n - 1; ++i)
    for (std::int64_t j = 1; j < n - 1; ++j)
      start[std::size_t(i * n + j)] = noise(gen);
  std::fill_n(start.begin(), n, 1.0);

  const kiln::device dev = kiln::default_device();
  kiln::tensor<double> u = kiln::from(start, kiln::shape{n, n}).to(dev);
  kiln::tensor<double> v = u.clone(); // its own storage: the edges of both stay fixed
  // The interior moved by (di, dj): rows 1 + di .. n - 2 + di, columns likewise.
  auto interior = [n](const kiln::tensor<double>& t, std::int64_t di, std::int64_t dj) {
    return t.narrow(0, 1 + di, n - 2).narrow(1, 1 + dj, n - 2);
  };

  const auto t0 = std::chrono::steady_clock::now();
  for (int s = 0; s < steps; ++s) {
    const auto c = interior(u, 0, 0);
    interior(v, 0, 0) = c + r * (interior(u, -1, 0) + interior(u, 1, 0) + interior(u, 0, -1) +
                                 interior(u, 0, 1) - 4.0 * c);
    std::swap(u, v); // trades the handles (no copy): u is now the newest plate
  }
  kiln::synchronize(dev); // a device queues the passes: time them to the end
  const double kiln_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  // The reference: the same steps as a plain double loop on the host.
  std::vector<double> a = start, b = start;
  const auto t1 = std::chrono::steady_clock::now();
  for (int s = 0; s < steps; ++s) {
    for (std::int64_t i = 1; i < n - 1; ++i)
      for (std::int64_t j = 1; j < n - 1; ++j) {
        const double* p = a.data() + i * n + j;
        b[std::size_t(i * n + j)] = p[0] + r * (p[-n] + p[n] + p[-1] + p[1] - 4.0 * p[0]);
      }
    std::swap(a, b);
  }
  const double loop_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count();

  // Both sides add the same terms in the same order; only FMA contraction may differ, and
  // the scheme does not amplify errors (each point is a convex mix of its neighbours).
  const kiln::tensor<double> host = u.to(kiln::device{});
  const double* got = host.data();
  double worst = 0, heat = 0;
  for (std::size_t i = 0; i < nn; ++i) {
    worst = std::max(worst, std::abs(got[i] - a[i]));
    heat += got[i];
  }
  const bool ok = worst <= 1e-12;
  std::printf("heat2d: %lld x %lld plate, %d steps on %s (%d host thread(s)): kiln %.3f ms per "
              "step, plain loop (1 thread) %.3f ms per step\n",
              static_cast<long long>(n), static_cast<long long>(n), steps, dev.str().c_str(),
              kiln::num_threads(), kiln_ms / std::max(steps, 1), loop_ms / std::max(steps, 1));
  std::printf("mean temperature %.9f; largest difference from the double loop %.3g: %s\n",
              heat / double(nn), worst, ok ? "agree" : "MISMATCH");
  return ok ? 0 : 1;
}
