// Host cost of one statement `z = a * b + c` on small f32 tensors (issue 13, point 3): kiln
// (a cached evaluation: building the nodes, checking shapes, devices and aliasing, the fused
// pass), Eigen (ArrayXf), xtensor (xt::xtensor<float, 1>, noalias) and a hand loop, at 1, 16,
// 256 and 4096 elements, in ns per statement. Target: kiln <= 1.5x Eigen at 16 elements.
//
// Method: per size and contender, warm-up statements, then `rounds` rounds each timing
// enough statements to take ~0.2 ms (steady_clock); the figure is the median of the rounds'
// means, with the interquartile range. Contenders alternate round by round, so a slow
// moment of the machine does not fall on one of them. A compiler barrier after every
// statement keeps the optimizer from merging repeated statements. One thread: run pinned,
// `taskset -c 1 ./bench_small_tensors`. Every result is checked against a double loop.
//
// Usage: bench_small_tensors [rounds = 101]
#include <kiln/kiln.hpp>

#include <Eigen/Core>
#include <xtensor/xadapt.hpp>
#include <xtensor/xnoalias.hpp>
#include <xtensor/xtensor.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

inline void barrier(const void* p) { asm volatile("" : : "r"(p) : "memory"); }

struct contender {
  std::string name;
  std::function<void(int)> run; // `reps` statements
  std::function<const float*()> result;
  std::vector<double> ns;
};

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(q * double(v.size() - 1) + 0.5)];
}

} // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 101;
  if (rounds < 3) {
    std::fprintf(stderr, "usage: bench_small_tensors [rounds >= 3]\n");
    return 2;
  }
  std::printf("| elements | kiln ns | Eigen ns | xtensor ns | hand loop ns | kiln / Eigen | "
              "kiln / xtensor | kiln / hand |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  bool target_met = true;
  for (const int n : {1, 16, 256, 4096}) {
    std::mt19937 gen(42u + unsigned(n));
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    const auto un = std::size_t(n);
    std::vector<float> av(un), bv(un), cv(un);
    for (int i = 0; i < n; ++i)
      av[std::size_t(i)] = u(gen), bv[std::size_t(i)] = u(gen), cv[std::size_t(i)] = u(gen);
    const kiln::shape s{n};
    const kiln::tensor<float> ka = kiln::from(av, s), kb = kiln::from(bv, s),
                              kc = kiln::from(cv, s);
    kiln::tensor<float> kz = kiln::zeros<float>(s);
    Eigen::ArrayXf ea = Eigen::Map<Eigen::ArrayXf>(av.data(), n),
                   eb = Eigen::Map<Eigen::ArrayXf>(bv.data(), n),
                   ec = Eigen::Map<Eigen::ArrayXf>(cv.data(), n), ez = Eigen::ArrayXf::Zero(n);
    const std::vector<std::size_t> xs{std::size_t(n)};
    xt::xtensor<float, 1> xa = xt::adapt(av, xs), xb = xt::adapt(bv, xs), xc = xt::adapt(cv, xs),
                          xz = xt::zeros<float>(xs);
    std::vector<float> hz(un);

    std::vector<contender> cs;
    cs.push_back({"kiln",
                  [&](int reps) {
                    for (int r = 0; r < reps; ++r) {
                      kz = ka * kb + kc;
                      barrier(&kz);
                    }
                  },
                  [&] { return kz.data(); },
                  {}});
    cs.push_back({"Eigen",
                  [&](int reps) {
                    for (int r = 0; r < reps; ++r) {
                      ez = ea * eb + ec;
                      barrier(ez.data());
                    }
                  },
                  [&] { return ez.data(); },
                  {}});
    cs.push_back({"xtensor",
                  [&](int reps) {
                    for (int r = 0; r < reps; ++r) {
                      xt::noalias(xz) = xa * xb + xc;
                      barrier(xz.data());
                    }
                  },
                  [&] { return xz.data(); },
                  {}});
    cs.push_back({"hand loop",
                  [&](int reps) {
                    const float *a = av.data(), *b = bv.data(), *c = cv.data();
                    float* z = hz.data();
                    for (int r = 0; r < reps; ++r) {
                      for (int i = 0; i < n; ++i)
                        z[i] = a[i] * b[i] + c[i];
                      barrier(z);
                    }
                  },
                  [&] { return hz.data(); },
                  {}});

    // Statements per round: ~0.2 ms of the slowest contender, measured once.
    int reps = 1;
    for (auto& c : cs) {
      c.run(2000); // warm-up: caches, kiln's kernel cache, branch predictors
      int r = 16;
      for (;;) {
        const auto t0 = std::chrono::steady_clock::now();
        c.run(r);
        const double us =
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                .count();
        if (us > 200 || r > (1 << 24)) break;
        r *= 2;
      }
      reps = std::max(reps, r);
    }
    for (int round = 0; round < rounds; ++round)
      for (auto& c : cs) {
        const auto t0 = std::chrono::steady_clock::now();
        c.run(reps);
        const auto t1 = std::chrono::steady_clock::now();
        c.ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / reps);
      }

    // Every contender's result against a double-precision loop.
    for (auto& c : cs) {
      const float* z = c.result();
      for (int i = 0; i < n; ++i) {
        const double want = double(av[std::size_t(i)]) * bv[std::size_t(i)] + cv[std::size_t(i)];
        if (std::abs(z[i] - want) > 1e-5 * (1 + std::abs(want))) {
          std::fprintf(stderr, "%s, %d elements: element %d is %g, want %g\n", c.name.c_str(), n, i,
                       double(z[i]), want);
          return 1;
        }
      }
    }
    double med[4];
    for (int i = 0; i < 4; ++i)
      med[i] = quantile(cs[std::size_t(i)].ns, 0.5);
    std::printf("| %d |", n);
    for (int i = 0; i < 4; ++i)
      std::printf(" %.1f (%.1f-%.1f) |", med[i], quantile(cs[std::size_t(i)].ns, 0.25),
                  quantile(cs[std::size_t(i)].ns, 0.75));
    std::printf(" %.2fx | %.2fx | %.2fx |\n", med[0] / med[1], med[0] / med[2], med[0] / med[3]);
    if (n == 16) target_met = med[0] <= 1.5 * med[1];
  }
  std::printf("\nns per statement: median over %d rounds (interquartile range). Target "
              "kiln <= 1.5x Eigen at 16 elements: %s\n",
              rounds, target_met ? "met" : "MISSED");
  return 0;
}
