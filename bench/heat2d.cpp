// The explicit 2-D heat equation (issue 13, point 4): a 5-point stencil on an n x n f64 grid
// with fixed boundary values, `steps` steps of
//   v[i][j] = u[i][j] + r * (u[i-1][j] + u[i+1][j] + u[i][j-1] + u[i][j+1] - 4 u[i][j])
// over the interior, then u and v trade places. Contenders: a hand loop (1 thread, and 2
// threads each taking half of the rows), Eigen blocks (ArrayXXd::block), xtensor views
// (xt::view with xt::range, xt::noalias), and kiln's `narrow` views with 1 and 2 threads.
// Targets: kiln 1T >= 1.0x the 1-thread hand loop, kiln 2T >= 1.8x it.
//
// Method: every contender runs the same `steps` steps from the same random start; one run
// is one timed sample. Contenders alternate run by run, so a slow moment of the machine
// does not fall on one of them; the figure is the median over `rounds` runs with the
// interquartile range. Every contender's final grid is checked against the 1-thread hand
// loop (the same double-precision sums; only FMA contraction may differ, so 1e-12).
//
// Usage: bench_heat2d [n = 2048] [steps = 20] [rounds = 9]
#include <kiln/kiln.hpp>

#include <Eigen/Core>
#include <xtensor/xnoalias.hpp>
#include <xtensor/xtensor.hpp>
#include <xtensor/xview.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#ifdef __AVX__
#include <immintrin.h>
#endif

namespace {

constexpr double r = 0.2; // stable for r <= 1/4

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(q * double(v.size() - 1) + 0.5)];
}

// The new value at column j of the row c, between the rows up and dn.
inline double point(const double* up, const double* c, const double* dn, std::int64_t j) {
  return c[j] + r * (up[j] + dn[j] + c[j - 1] + c[j + 1] - 4.0 * c[j]);
}

// Rows [r0, r1) of the interior of one step, row-major n x n.
void hand_rows(const double* u, double* v, std::int64_t n, std::int64_t r0, std::int64_t r1) {
  for (std::int64_t i = r0; i < r1; ++i) {
    const double *c = u + i * n, *up = c - n, *dn = c + n;
    double* o = v + i * n;
    for (std::int64_t j = 1; j < n - 1; ++j)
      o[j] = point(up, c, dn, j);
  }
}

// The same rows with streaming stores from the first 32-byte boundary of each row on (what
// kiln does for a pass too large for the cache): tells whether skipping the read for
// ownership pays on this machine.
void hand_rows_nt(const double* u, double* v, std::int64_t n, std::int64_t r0, std::int64_t r1) {
#ifdef __AVX__
  const __m256d rr = _mm256_set1_pd(r), four = _mm256_set1_pd(4.0);
  for (std::int64_t i = r0; i < r1; ++i) {
    const double *c = u + i * n, *up = c - n, *dn = c + n;
    double* o = v + i * n;
    std::int64_t j = 1;
    for (; j < n - 1 && reinterpret_cast<std::uintptr_t>(o + j) % 32 != 0; ++j)
      o[j] = point(up, c, dn, j);
    for (; j + 4 <= n - 1; j += 4) {
      const __m256d cj = _mm256_loadu_pd(c + j);
      const __m256d s = _mm256_sub_pd(
          _mm256_add_pd(_mm256_add_pd(_mm256_loadu_pd(up + j), _mm256_loadu_pd(dn + j)),
                        _mm256_add_pd(_mm256_loadu_pd(c + j - 1), _mm256_loadu_pd(c + j + 1))),
          _mm256_mul_pd(four, cj));
      _mm256_stream_pd(o + j, _mm256_add_pd(cj, _mm256_mul_pd(rr, s)));
    }
    for (; j < n - 1; ++j)
      o[j] = point(up, c, dn, j);
  }
  _mm_sfence();
#else
  hand_rows(u, v, n, r0, r1);
#endif
}

// 64-byte aligned storage for the hand loops, as kiln allocates, so that the loops are
// compared and not where malloc put the rows (a std::vector this large comes from mmap 16
// bytes past a page; on this project's AMD EPYC that changed the loop's speed, unevenly).
template <class T>
struct aligned64 {
  using value_type = T;
  aligned64() = default;
  template <class U>
  aligned64(const aligned64<U>&) noexcept {}
  T* allocate(std::size_t n) {
    return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{64}));
  }
  void deallocate(T* p, std::size_t) noexcept { ::operator delete (p, std::align_val_t{64}); }
  bool operator==(const aligned64&) const noexcept { return true; }
};
using grid_vec = std::vector<double, aligned64<double>>;

struct contender {
  std::string name;
  std::function<void()> reset;           // the start grid into both buffers
  std::function<void()> run;             // `steps` steps
  std::function<const double*()> result; // the last grid written, row-major
  std::vector<double> ms;
};

} // namespace

int main(int argc, char** argv) {
  const std::int64_t n = argc > 1 ? std::atoll(argv[1]) : 2048;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 20;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 9;
  if (n < 3 || steps < 1 || rounds < 1) {
    std::fprintf(stderr, "usage: bench_heat2d [n >= 3] [steps >= 1] [rounds >= 1]\n");
    return 2;
  }
  const auto nn = static_cast<std::size_t>(n * n);
  std::vector<double> start(nn);
  std::mt19937_64 gen(2048);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  for (auto& x : start)
    x = u01(gen);

  std::vector<contender> cs;

  // Hand loops: 1 thread, and 2 threads on halves of the rows (one std::thread per step:
  // ~20 us against a step of milliseconds).
  grid_vec h1a(nn), h1b(nn), h2a(nn), h2b(nn);
  auto hand = [&](grid_vec& a, grid_vec& b, int threads,
                  void (*rows)(const double*, double*, std::int64_t, std::int64_t, std::int64_t) =
                      hand_rows) {
    return [&a, &b, threads, rows, n, steps] {
      double *u = a.data(), *v = b.data();
      for (int s = 0; s < steps; ++s) {
        if (threads == 1) {
          rows(u, v, n, 1, n - 1);
        } else {
          const std::int64_t mid = n / 2;
          std::thread t([=] { rows(u, v, n, mid, n - 1); });
          rows(u, v, n, 1, mid);
          t.join();
        }
        std::swap(u, v);
      }
    };
  };
  auto last = [steps](grid_vec& a, grid_vec& b) {
    return [&a, &b, steps] { return steps % 2 ? b.data() : a.data(); };
  };
  auto reset_vec = [&](grid_vec& a, grid_vec& b) {
    return [&] {
      std::copy(start.begin(), start.end(), a.begin());
      std::copy(start.begin(), start.end(), b.begin());
    };
  };
  cs.push_back({"hand loop 1T", reset_vec(h1a, h1b), hand(h1a, h1b, 1), last(h1a, h1b), {}});
  cs.push_back({"hand loop 2T", reset_vec(h2a, h2b), hand(h2a, h2b, 2), last(h2a, h2b), {}});
  grid_vec n1a(nn), n1b(nn), n2a(nn), n2b(nn);
  cs.push_back({"hand loop NT 1T",
                reset_vec(n1a, n1b),
                hand(n1a, n1b, 1, hand_rows_nt),
                last(n1a, n1b),
                {}});
  cs.push_back({"hand loop NT 2T",
                reset_vec(n2a, n2b),
                hand(n2a, n2b, 2, hand_rows_nt),
                last(n2a, n2b),
                {}});

  // Eigen blocks. Row-major, so the result compares element for element.
  using grid = Eigen::Array<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  grid ea(n, n), eb(n, n);
  const Eigen::Index m = n - 2;
  cs.push_back({"Eigen blocks",
                [&] {
                  ea = Eigen::Map<const grid>(start.data(), n, n);
                  eb = ea;
                },
                [&] {
                  grid *u = &ea, *v = &eb;
                  for (int s = 0; s < steps; ++s) {
                    const auto c = u->block(1, 1, m, m);
                    v->block(1, 1, m, m) =
                        c + r * (u->block(0, 1, m, m) + u->block(2, 1, m, m) +
                                 u->block(1, 0, m, m) + u->block(1, 2, m, m) - 4.0 * c);
                    std::swap(u, v);
                  }
                },
                [&] { return steps % 2 ? eb.data() : ea.data(); },
                {}});

  // xtensor views.
  const std::array<std::size_t, 2> xs{std::size_t(n), std::size_t(n)};
  xt::xtensor<double, 2> xa(xs), xb(xs);
  cs.push_back({"xtensor views",
                [&] {
                  std::copy(start.begin(), start.end(), xa.begin());
                  std::copy(start.begin(), start.end(), xb.begin());
                },
                [&] {
                  using xt::range;
                  xt::xtensor<double, 2>*u = &xa, *v = &xb;
                  auto in = range(1, n - 1), lo = range(0, n - 2), hi = range(2, n);
                  for (int s = 0; s < steps; ++s) {
                    auto c = xt::view(*u, in, in);
                    xt::noalias(xt::view(*v, in, in)) =
                        c + r * (xt::view(*u, lo, in) + xt::view(*u, hi, in) +
                                 xt::view(*u, in, lo) + xt::view(*u, in, hi) - 4.0 * c);
                    std::swap(u, v);
                  }
                },
                [&] { return steps % 2 ? xb.data() : xa.data(); },
                {}});

  // kiln: the interior and its four neighbours are `narrow` views of u; the statement is
  // one fused pass writing the interior of v. std::swap trades the two tensors' handles
  // (a moved-from tensor is empty, and assigning to an empty tensor takes the handle).
  const kiln::shape sh{n, n};
  kiln::tensor<double> ka = kiln::empty<double>(sh), kb = kiln::empty<double>(sh);
  auto kiln_run = [&](int threads) {
    return [&, threads] {
      kiln::set_num_threads(threads);
      kiln::tensor<double> u = ka, v = kb; // handles (shared storage)
      auto interior = [n](const kiln::tensor<double>& t, std::int64_t di, std::int64_t dj) {
        return t.narrow(0, 1 + di, n - 2).narrow(1, 1 + dj, n - 2);
      };
      for (int s = 0; s < steps; ++s) {
        const auto c = interior(u, 0, 0);
        interior(v, 0, 0) = c + r * (interior(u, -1, 0) + interior(u, 1, 0) + interior(u, 0, -1) +
                                     interior(u, 0, 1) - 4.0 * c);
        std::swap(u, v);
      }
    };
  };
  auto kiln_reset = [&] {
    std::copy(start.begin(), start.end(), ka.data());
    std::copy(start.begin(), start.end(), kb.data());
  };
  auto kiln_last = [&] { return steps % 2 ? kb.data() : ka.data(); };
  const int hw = kiln::num_threads();
  cs.push_back({"kiln 1T", kiln_reset, kiln_run(1), kiln_last, {}});
  cs.push_back({"kiln 2T", kiln_reset, kiln_run(2), kiln_last, {}});

  // Warm-up run (kiln's plan cache, page faults of the buffers), then the rounds.
  for (auto& c : cs) {
    c.reset();
    c.run();
  }
  for (int round = 0; round < rounds; ++round)
    for (auto& c : cs) {
      c.reset();
      const auto t0 = std::chrono::steady_clock::now();
      c.run();
      const auto t1 = std::chrono::steady_clock::now();
      c.ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count() / steps);
      // Check after each run: kiln's two contenders share buffers.
      const double *ref = cs[0].result(), *got = c.result();
      for (std::size_t i = 0; i < nn; ++i)
        if (!(std::abs(got[i] - ref[i]) <= 1e-12)) {
          std::fprintf(stderr, "%s: element (%zu, %zu) is %.17g, the hand loop's %.17g\n",
                       c.name.c_str(), i / std::size_t(n), i % std::size_t(n), got[i], ref[i]);
          return 1;
        }
    }
  kiln::set_num_threads(hw);

  const double hand1 = quantile(cs[0].ms, 0.5);
  // Bytes a step moves with ordinary stores: u read once, v read for ownership and written.
  const double bytes = 3.0 * double(n - 2) * double(n - 2) * sizeof(double);
  std::printf("| contender | ms per step | IQR | GB/s (24 B per point) | vs hand loop 1T |\n"
              "|---|---:|---:|---:|---:|\n");
  for (auto& c : cs) {
    const double med = quantile(c.ms, 0.5);
    std::printf("| %s | %.3f | %.3f-%.3f | %.1f | %.2fx |\n", c.name.c_str(), med,
                quantile(c.ms, 0.25), quantile(c.ms, 0.75), bytes / (med * 1e-3) * 1e-9,
                hand1 / med);
  }
  const double k1 = hand1 / quantile(cs[6].ms, 0.5), k2 = hand1 / quantile(cs[7].ms, 0.5);
  std::printf("\n%lld x %lld f64, %d steps, median of %d runs (streaming stores move 16 B per "
              "point: their GB/s is 1.5x what they move). Targets: kiln 1T >= 1.0x the 1-thread "
              "hand loop: %s (%.2fx); kiln 2T >= 1.8x: %s (%.2fx)\n",
              static_cast<long long>(n), static_cast<long long>(n), steps, rounds,
              k1 >= 1.0 ? "met" : "MISSED", k1, k2 >= 1.8 ? "met" : "MISSED", k2);
  return 0;
}
