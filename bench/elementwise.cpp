// Elementwise throughput, every contender in one run on the same input buffers:
//   triad  r = a*b + c
//   heavy  r = exp(-a*0.1f)*sqrt(b) + log(c)*sin(a)
// on f32 from L2-resident sizes to 2^24 elements: kiln (1 and 2 threads), Eigen arrays,
// xtensor with xsimd (xt::noalias), a hand-written scalar loop, the same loop written with
// xsimd batches, and the STREAM-style probe of stream_probe.hpp (1 and 2 pinned threads;
// ordinary and streaming stores).
//
// Method: per size, every contender runs once and its output is checked against a
// double-precision reference (the output buffer is poisoned with NaN first, so a
// contender that skips work fails). Then rounds: in each, every contender in a fresh
// random order runs twice back to back, untimed then timed, so each timed run finds the
// caches (which core's L2 holds what, what streaming stores evicted) as its own previous
// run left them, not as whichever contender happened to precede it; frequency and load
// drift are shared by all. A round during which other processes took CPU time (this is a
// shared 2-core machine) is set aside and repeated. Figures are medians over the kept
// rounds. After timing, every contender runs once more and is checked again.
// GB/s counts 16 bytes per element (three f32 loads, one f32 store) for both expressions.
//
// Usage: bench_elementwise [max_log2 = 24 [min_log2 = 16]]  (sizes 2^min_log2, 2^(min_log2+2), ...)
#ifndef XTENSOR_USE_XSIMD
#define XTENSOR_USE_XSIMD
#endif
#include "stream_probe.hpp"

#include <kiln/kiln.hpp>

#include <Eigen/Core>
#include <xsimd/xsimd.hpp>
#include <xtensor/xadapt.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xnoalias.hpp>
#include <xtensor/xtensor.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <sys/resource.h>
#include <unistd.h>

namespace {

constexpr double bytes_per_elem = 16.0; // 3 loads + 1 store of 4 bytes

struct contender {
  std::string expr, who;
  const std::vector<double>* ref;
  double tol;
  std::function<void()> run;
  std::function<double()> timed_s; // seconds of one run; default: wall time around run
  std::vector<double> ms;
};

struct row {
  std::string expr, who;
  int log2n;
  double ms, iqr_pct;
};

void check(const float* got, const std::vector<double>& ref, const std::string& who,
           const std::string& expr, double tol) {
  for (std::size_t i = 0; i < ref.size(); ++i)
    if (!(std::abs(got[i] - ref[i]) <= tol * (1 + std::abs(ref[i])))) {
      std::fprintf(stderr, "%s, %s, n=%zu: wrong result at %zu: %.9g vs %.9g\n", who.c_str(),
                   expr.c_str(), ref.size(), i, double(got[i]), ref[i]);
      std::exit(1);
    }
}

double quantile(std::vector<double> v, double q) {
  const auto k = static_cast<std::size_t>(q * double(v.size() - 1) + 0.5);
  std::nth_element(v.begin(), v.begin() + k, v.end());
  return v[k];
}

// Did other processes (or the hypervisor) take CPU time while this object lived? Busy
// ticks of the whole machine (/proc/stat, steal included) minus this process's own CPU
// time; a little slack absorbs the tick sampling.
class cpu_meter {
public:
  cpu_meter() : t0_(std::chrono::steady_clock::now()), busy0_(busy_ticks()), self0_(self_ticks()) {}
  bool disturbed() const {
    if (busy0_ < 0) return false; // no /proc/stat: cannot tell
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    const double capacity = wall * double(sysconf(_SC_NPROCESSORS_ONLN)) * ticks_per_s();
    const double other = double(busy_ticks() - busy0_) - (self_ticks() - self0_);
    return other > 2 + 0.03 * capacity;
  }

private:
  static double ticks_per_s() { return double(sysconf(_SC_CLK_TCK)); }
  static long long busy_ticks() {
    std::FILE* f = std::fopen("/proc/stat", "r");
    if (!f) return -1;
    long long v[8] = {};
    const int got = std::fscanf(f, "cpu %lld %lld %lld %lld %lld %lld %lld %lld", &v[0], &v[1],
                                &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
    std::fclose(f);
    if (got != 8) return -1;
    return v[0] + v[1] + v[2] + v[5] + v[6] + v[7]; // all but idle and iowait
  }
  static double self_ticks() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    const double s = double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
                     1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
    return s * ticks_per_s();
  }
  std::chrono::steady_clock::time_point t0_;
  long long busy0_;
  double self0_;
};

void set_threads(int th) {
  kiln::set_num_threads(th);
  if (kiln::num_threads() != th) {
    std::fprintf(stderr, "kiln runs %d threads, not %d (KILN_NUM_THREADS?)\n", kiln::num_threads(),
                 th);
    std::exit(1);
  }
}

} // namespace

int main(int argc, char** argv) {
  const int max_log2 = argc > 1 ? std::atoi(argv[1]) : 24;
  const int min_log2 = argc > 2 ? std::atoi(argv[2]) : 16;
  const std::int64_t max_n = std::int64_t(1) << max_log2;

  // One set of random inputs in [0.5, 2); each size uses a prefix.
  std::vector<float> va(max_n), vb(max_n), vc(max_n);
  {
    std::mt19937 gen(42);
    std::uniform_real_distribution<float> u(0.5f, 2.0f);
    for (auto* v : {&va, &vb, &vc})
      for (auto& x : *v)
        x = u(gen);
  }
  bench::stream_probe probe1(1), probe2(2);

  std::vector<row> rows;
  std::string rounds_note = "Rounds per size:";
  for (int lg = min_log2; lg <= max_log2; lg += 2) {
    const std::int64_t n = std::int64_t(1) << lg;
    const auto prefix = [&](const std::vector<float>& v) {
      return kiln::from(std::vector<float>(v.begin(), v.begin() + n), kiln::shape{n});
    };
    const kiln::tensor<float> ka = prefix(va), kb = prefix(vb), kc = prefix(vc);
    kiln::tensor<float> kr = kiln::empty<float>({n});
    const float *a = ka.data(), *b = kb.data(), *c = kc.data();
    float* const r = kr.data();

    std::vector<double> ref_triad(n), ref_heavy(n);
    for (std::int64_t i = 0; i < n; ++i) {
      const double x = a[i], y = b[i], z = c[i];
      ref_triad[i] = x * y + z;
      ref_heavy[i] = std::exp(-x * double(0.1f)) * std::sqrt(y) + std::log(z) * std::sin(x);
    }

    // Every contender reads a, b, c and writes r: the same memory for all.
    Eigen::Map<const Eigen::ArrayXf> ea(a, n), eb(b, n), ec(c, n);
    Eigen::Map<Eigen::ArrayXf> er(r, n);
    const std::array<std::size_t, 1> shp{std::size_t(n)}; // fixed rank: xtensor_adaptor
    auto xa = xt::adapt(a, std::size_t(n), xt::no_ownership(), shp);
    auto xb = xt::adapt(b, std::size_t(n), xt::no_ownership(), shp);
    auto xc = xt::adapt(c, std::size_t(n), xt::no_ownership(), shp);
    auto xr = xt::adapt(r, std::size_t(n), xt::no_ownership(), shp);

    std::vector<contender> cs;
    auto add = [&](std::string expr, std::string who, std::function<void()> f,
                   std::function<double()> timed = {}) {
      const bool triad = expr == "triad";
      cs.push_back({std::move(expr),
                    std::move(who),
                    triad ? &ref_triad : &ref_heavy,
                    triad ? 1e-6 : 1e-5,
                    std::move(f),
                    std::move(timed),
                    {}});
    };
    for (int th : {1, 2}) {
      const std::string who = "kiln " + std::to_string(th) + "T";
      add("triad", who, [&, th] {
        set_threads(th);
        kr = ka * kb + kc;
      });
      add("heavy", who, [&, th] {
        set_threads(th);
        kr = kiln::exp(-ka * 0.1f) * kiln::sqrt(kb) + kiln::log(kc) * kiln::sin(ka);
      });
    }
    add("triad", "Eigen", [&] { er = ea * eb + ec; });
    add("heavy", "Eigen", [&] { er = (-ea * 0.1f).exp() * eb.sqrt() + ec.log() * ea.sin(); });
    add("triad", "xtensor", [&] { xt::noalias(xr) = xa * xb + xc; });
    add("heavy", "xtensor",
        [&] { xt::noalias(xr) = xt::exp(-xa * 0.1f) * xt::sqrt(xb) + xt::log(xc) * xt::sin(xa); });
    add("triad", "hand loop", [&] {
      for (std::int64_t i = 0; i < n; ++i)
        r[i] = a[i] * b[i] + c[i];
    });
    add("heavy", "hand loop", [&] {
      for (std::int64_t i = 0; i < n; ++i)
        r[i] = std::exp(-a[i] * 0.1f) * std::sqrt(b[i]) + std::log(c[i]) * std::sin(a[i]);
    });
    // The same loops written directly with xsimd batches (the SIMD math kiln and xtensor
    // call): what the expression costs with no library around it. n is a multiple of 16.
    using fb = xsimd::batch<float>;
    add("triad", "xsimd loop", [&] {
      for (std::int64_t i = 0; i < n; i += fb::size)
        xsimd::fma(fb::load_unaligned(a + i), fb::load_unaligned(b + i), fb::load_unaligned(c + i))
            .store_unaligned(r + i);
    });
    add("heavy", "xsimd loop", [&] {
      for (std::int64_t i = 0; i < n; i += fb::size) {
        const fb x = fb::load_unaligned(a + i), y = fb::load_unaligned(b + i),
                 z = fb::load_unaligned(c + i);
        (xsimd::exp(-x * 0.1f) * xsimd::sqrt(y) + xsimd::log(z) * xsimd::sin(x))
            .store_unaligned(r + i);
      }
    });
    for (bool nt : {false, true})
      for (auto* p : {&probe1, &probe2}) {
        const std::string who =
            std::string("probe ") + (nt ? "NT " : "") + (p == &probe1 ? "1T" : "2T");
        // Timed by the probe itself, from all threads ready to the last one done.
        add(
            "triad", who, [&, p, nt] { p->triad(r, a, b, c, n, nt); },
            [&, p, nt] { return p->triad(r, a, b, c, n, nt); });
      }

    // Warm-up and check, twice (the second pass also sizes the rounds): poison the output
    // so that skipped work shows.
    double round_s = 0;
    for (int pass = 0; pass < 2; ++pass) {
      round_s = 0;
      for (auto& x : cs) {
        std::fill(r, r + n, std::numeric_limits<float>::quiet_NaN());
        const auto t0 = std::chrono::steady_clock::now();
        x.run();
        round_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (kr.data() != r) {
          std::fprintf(stderr, "kiln re-allocated the target of an assignment\n");
          return 1;
        }
        check(r, *x.ref, x.who, x.expr, x.tol);
      }
    }
    // About 4 s per size, 16 s at the largest, where the targets are read (2 runs a round).
    const bool last_size = lg + 2 > max_log2;
    const int rounds =
        std::clamp(static_cast<int>((last_size ? 8.0 : 2.0) / round_s), last_size ? 21 : 11, 1001);
    std::vector<std::size_t> order(cs.size());
    for (std::size_t j = 0; j < order.size(); ++j)
      order[j] = j;
    std::mt19937 shuffle_gen(lg);
    // A round during which other processes took CPU time is set aside and run again, up to
    // `rounds` extra attempts; if too few clean rounds remain, all rounds are used.
    std::vector<std::vector<double>> clean(cs.size()), all(cs.size());
    int kept = 0, attempts = 0;
    for (; kept < rounds && attempts < 2 * rounds; ++attempts) {
      std::shuffle(order.begin(), order.end(), shuffle_gen);
      const cpu_meter meter;
      std::vector<double> ms(cs.size());
      for (std::size_t j : order) {
        auto& x = cs[j];
        x.run(); // untimed: the timed run finds the caches as its own previous run left them
        double sec;
        if (x.timed_s) {
          sec = x.timed_s();
        } else {
          const auto t0 = std::chrono::steady_clock::now();
          x.run();
          sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        }
        ms[j] = sec * 1e3;
      }
      const bool disturbed = meter.disturbed();
      for (std::size_t j = 0; j < cs.size(); ++j) {
        all[j].push_back(ms[j]);
        if (!disturbed) clean[j].push_back(ms[j]);
      }
      kept += !disturbed;
    }
    const bool use_clean = kept >= std::min(rounds, 7);
    for (std::size_t j = 0; j < cs.size(); ++j) {
      const auto& v = use_clean ? clean[j] : all[j];
      const double med = quantile(v, 0.5);
      rows.push_back(
          {cs[j].expr, cs[j].who, lg, med, 100 * (quantile(v, 0.75) - quantile(v, 0.25)) / med});
    }
    // Once more after timing, each checked: the timed code still computes the result.
    for (auto& x : cs) {
      std::fill(r, r + n, std::numeric_limits<float>::quiet_NaN());
      x.run();
      check(r, *x.ref, x.who, x.expr, x.tol);
    }
    rounds_note += " 2^" + std::to_string(lg) + ": " +
                   (use_clean ? std::to_string(kept) + " undisturbed of " + std::to_string(attempts)
                              : "all " + std::to_string(attempts) + " (only " +
                                    std::to_string(kept) + " undisturbed)") +
                   ";";
  }

  auto ms_of = [&](const std::string& e, const std::string& w, int lg) {
    for (const auto& x : rows)
      if (x.expr == e && x.who == w && x.log2n == lg) return x.ms;
    return std::numeric_limits<double>::quiet_NaN();
  };
  // The probe's figure: the better of its two store flavours.
  auto probe_ms = [&](const char* t, int lg) {
    return std::min(ms_of("triad", std::string("probe ") + t, lg),
                    ms_of("triad", std::string("probe NT ") + t, lg));
  };

  std::printf("| expr | n | contender | median ms | IQR | GB/s | Gelem/s | speed vs Eigen | "
              "speed vs xtensor | %% of probe 2T GB/s |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& x : rows) {
    const double n = std::ldexp(1.0, x.log2n);
    std::printf("| %s | 2^%d | %s | %.3f | %.0f%% | %.1f | %.2f | %.2fx | %.2fx |", x.expr.c_str(),
                x.log2n, x.who.c_str(), x.ms, x.iqr_pct, bytes_per_elem * n / (x.ms * 1e6),
                n / (x.ms * 1e6), ms_of(x.expr, "Eigen", x.log2n) / x.ms,
                ms_of(x.expr, "xtensor", x.log2n) / x.ms);
    if (x.expr == "triad")
      std::printf(" %.1f%% |\n", 100 * probe_ms("2T", x.log2n) / x.ms);
    else
      std::printf(" |\n");
  }

  std::printf("\n%s IQR = interquartile range / median.\n", rounds_note.c_str());

  // The targets, read at the largest size.
  const int lg = min_log2 + (max_log2 - min_log2) / 2 * 2; // the largest size run
  auto verdict = [](bool ok) { return ok ? "met" : "MISSED"; };
  std::printf("\nTargets at 2^%d:\n", lg);
  const double bw_k2 = ms_of("triad", "probe 2T", lg) / ms_of("triad", "kiln 2T", lg),
               bw_nt = ms_of("triad", "probe NT 2T", lg) / ms_of("triad", "kiln 2T", lg),
               bw = std::min(bw_k2, bw_nt);
  std::printf("- triad, kiln 2T bandwidth / probe 2T bandwidth: %.1f%% (ordinary stores %.1f%%, "
              "streaming stores %.1f%%; target >= 90%%): %s\n",
              100 * bw, 100 * bw_k2, 100 * bw_nt, verdict(bw >= 0.9));
  for (const char* e : {"triad", "heavy"}) {
    const double ve = ms_of(e, "Eigen", lg) / ms_of(e, "kiln 1T", lg),
                 vx = ms_of(e, "xtensor", lg) / ms_of(e, "kiln 1T", lg);
    std::printf("- %s, kiln 1T speed vs Eigen: %.3fx, vs xtensor: %.3fx (target >= 1): %s\n", e, ve,
                vx, verdict(ve >= 1 && vx >= 1));
  }
  const double up = ms_of("heavy", "kiln 1T", lg) / ms_of("heavy", "kiln 2T", lg);
  std::printf("- heavy, kiln 2T / kiln 1T speed-up: %.2fx (target >= 1.8): %s\n", up,
              verdict(up >= 1.8));
  return 0;
}
