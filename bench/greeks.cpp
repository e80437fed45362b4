// Black-Scholes call price and its four Greeks (delta, vega, theta, rho) for 2^22 options on
// one host thread, four ways, all in this file and built with the same flags:
//   kiln, the price alone              c = call
//   kiln, price + Greeks               kiln::grad of sum(call), then one kiln::eval of 5 outputs
//                                      (the grad call is inside the timing)
//   closed forms by hand               one loop writing 5 separate arrays, as kiln does
//   ADOL-C, taped (reverse mode)       the price of one option taped once as a function of
//                                      (S, K, T, r, sigma); per option zos_forward + fos_reverse
//   ADOL-C, traceless forward vector   adtl::adouble carrying 4 directions (S, sigma, T, r)
// JAX is timed by greeks_jax.py (bench/run_greeks.sh runs both).
//
// Every method's outputs are checked against the closed forms evaluated in long double: the
// error of a quantity q is |got - want| / max(1, |want|) (relative, absolute below 1: deep
// out-of-the-money prices are ~1e-30 and ADOL-C has erf but no erfc, so 0.5 * (1 + erf(x))
// is exact only to ~1e-16 absolutely there). An error above 1e-9 exits non-zero.
// Theta is -dC/dT: kiln's and ADOL-C's dC/dT is negated before the check.
//
// Timing: one warm-up round (checked), then `runs` rounds; in each, every method runs once, in
// an order rotated from round to round so that drift is shared. Wall time and process CPU time
// (all threads) are recorded; medians are printed (CPU time is less sensitive to other load:
// this is a shared 2-core machine). Ratios are of wall-time medians.
//
// Usage: bench_greeks [runs = 7 [log2_options = 22 [tsv_out]]]
//   tsv_out: also write "method<TAB>wall_ms<TAB>cpu_ms<TAB>max_err" rows (for run_greeks.sh)
#include <kiln/kiln.hpp>

#ifdef KILN_BENCH_HAVE_ADOLC
#include <adolc/adolc.h>
#include <adolc/adtl.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace {

constexpr double inv_sqrt2 = 0.70710678118654752;
constexpr double inv_sqrt_2pi = 0.39894228040143268;

// One method's 5 outputs: price, delta, vega, theta-like, rho.
struct outputs {
  const double* q[5];
  bool minus_theta; // q[3] holds dC/dT = -theta
};

struct method {
  method(std::string name_, std::function<void()> run_, std::function<outputs()> out_)
      : name(std::move(name_)), run(std::move(run_)), out(std::move(out_)) {}
  std::string name;
  std::function<void()> run;
  std::function<outputs()> out; // where the last run's results are (valid after run)
  double tol = 1e-9;
  std::vector<double> wall_ms, cpu_ms;
  double max_err = 0;
};

double cpu_now_s() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

} // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 7;
  const int log2n = argc > 2 ? std::atoi(argv[2]) : 22;
  const char* tsv_path = argc > 3 ? argv[3] : nullptr;
  const std::int64_t n = std::int64_t{1} << log2n;
  kiln::set_num_threads(1);

  std::vector<double> s(n), k(n), t(n), r(n), v(n);
  std::mt19937 gen(11);
  std::uniform_real_distribution<double> price(10, 100), years(0.1, 2), rate(0, 0.05),
      vol(0.1, 0.6);
  for (std::int64_t i = 0; i < n; ++i)
    s[i] = price(gen), k[i] = price(gen), t[i] = years(gen), r[i] = rate(gen), v[i] = vol(gen);

  // Reference: the closed forms in long double.
  std::vector<double> want[5];
  for (auto& w : want)
    w.resize(n);
  for (std::int64_t i = 0; i < n; ++i) {
    const long double S = s[i], K = k[i], T = t[i], R = r[i], V = v[i], sq = std::sqrt(T),
                      d1 = (std::log(S / K) + (R + V * V / 2) * T) / (V * sq), d2 = d1 - V * sq,
                      disc = K * std::exp(-R * T), n1 = std::erfc(-d1 / std::sqrt(2.0L)) / 2,
                      n2 = std::erfc(-d2 / std::sqrt(2.0L)) / 2,
                      p1 = std::exp(-d1 * d1 / 2) / std::sqrt(2 * 3.14159265358979323846L);
    want[0][i] = double(S * n1 - disc * n2);
    want[1][i] = double(n1);
    want[2][i] = double(S * p1 * sq);
    want[3][i] = double(-S * p1 * V / (2 * sq) - R * disc * n2);
    want[4][i] = double(T * disc * n2);
  }

  std::vector<method> methods;

  // kiln: the price expression as in examples/greeks.cpp.
  const kiln::shape sh{n};
  const auto S = kiln::from(s, sh), K = kiln::from(k, sh), T = kiln::from(t, sh),
             R = kiln::from(r, sh), V = kiln::from(v, sh);
  auto cdf = [](const auto& x) { return 0.5 * kiln::erfc(x * -inv_sqrt2); };
  const auto vsqrtT = V * kiln::sqrt(T);
  const auto d1 = (kiln::log(S / K) + (R + 0.5 * V * V) * T) / vsqrtT;
  const auto d2 = d1 - vsqrtT;
  const auto call = S * cdf(d1) - K * kiln::exp(-R * T) * cdf(d2);

  kiln::tensor<double> kp(sh), kc(sh), kd(sh), kv(sh), kt(sh), kr(sh);
  methods.push_back({"kiln, price alone", [&] { kp = call; },
                     [&] {
                       return outputs{{kp.data(), nullptr, nullptr, nullptr, nullptr}, false};
                     }});
  methods.push_back(
      {"kiln, price + 4 Greeks (grad + one eval of 5 outputs)",
       [&] {
         auto [dS, dV, dT, dR] = kiln::grad(kiln::sum(call), S, V, T, R);
         kiln::eval(kc = call, kd = dS, kv = dV, kt = dT, kr = dR);
       },
       [&] {
         return outputs{{kc.data(), kd.data(), kv.data(), kt.data(), kr.data()}, true};
       }});

  // The closed forms by hand, one loop, 5 separate output arrays.
  std::vector<double> hand[5];
  for (auto& h : hand)
    h.resize(n);
  methods.push_back(
      {"closed forms by hand (one loop, 5 arrays)",
       [&] {
         const double* __restrict ps = s.data();
         const double* __restrict pk = k.data();
         const double* __restrict pt = t.data();
         const double* __restrict pr = r.data();
         const double* __restrict pv = v.data();
         double *__restrict o0 = hand[0].data(), *__restrict o1 = hand[1].data(),
                            *__restrict o2 = hand[2].data(), *__restrict o3 = hand[3].data(),
                            *__restrict o4 = hand[4].data();
         for (std::int64_t i = 0; i < n; ++i) {
           const double sq = std::sqrt(pt[i]), sv = pv[i] * sq,
                        e1 = (std::log(ps[i] / pk[i]) + (pr[i] + 0.5 * pv[i] * pv[i]) * pt[i]) / sv,
                        e2 = e1 - sv, disc = pk[i] * std::exp(-pr[i] * pt[i]),
                        n1 = 0.5 * std::erfc(-e1 * inv_sqrt2),
                        n2 = 0.5 * std::erfc(-e2 * inv_sqrt2),
                        p1 = std::exp(-0.5 * e1 * e1) * inv_sqrt_2pi;
           o0[i] = ps[i] * n1 - disc * n2;
           o1[i] = n1;
           o2[i] = ps[i] * p1 * sq;
           o3[i] = -ps[i] * p1 * pv[i] / (2 * sq) - pr[i] * disc * n2;
           o4[i] = pt[i] * disc * n2;
         }
       },
       [&] {
         return outputs{
             {hand[0].data(), hand[1].data(), hand[2].data(), hand[3].data(), hand[4].data()},
             false};
       }});

#ifdef KILN_BENCH_HAVE_ADOLC
  // ADOL-C, taped: one option's price as a function of (S, K, T, r, sigma), taped once at the
  // first option; the tape has no branches, so it is valid for every option.
  constexpr short tag = 1;
  {
    const double x0[5] = {s[0], k[0], t[0], r[0], v[0]};
    double y0 = 0;
    trace_on(tag);
    adouble as, ak, at, ar, av;
    as <<= x0[0];
    ak <<= x0[1];
    at <<= x0[2];
    ar <<= x0[3];
    av <<= x0[4];
    const adouble sq = sqrt(at), sv = av * sq, e1 = (log(as / ak) + (ar + 0.5 * av * av) * at) / sv,
                  e2 = e1 - sv;
    // N(x) = (1 + erf(x / sqrt 2)) / 2: ADOL-C 2.7 has erf, not erfc.
    adouble c = as * (0.5 + 0.5 * erf(e1 * inv_sqrt2)) -
                ak * exp(-ar * at) * (0.5 + 0.5 * erf(e2 * inv_sqrt2));
    c >>= y0;
    trace_off();
  }
  std::vector<double> ad[5];
  for (auto& a : ad)
    a.resize(n);
  methods.push_back(
      {"ADOL-C, taped: zos_forward + fos_reverse per option",
       [&] {
         double x[5], g[5], y = 0, u = 1;
         for (std::int64_t i = 0; i < n; ++i) {
           x[0] = s[i], x[1] = k[i], x[2] = t[i], x[3] = r[i], x[4] = v[i];
           zos_forward(tag, 1, 5, 1, x, &y); // keep = 1: the reverse sweep needs it
           fos_reverse(tag, 1, 5, &u, g);
           ad[0][i] = y, ad[1][i] = g[0], ad[2][i] = g[4], ad[3][i] = g[2], ad[4][i] = g[3];
         }
       },
       [&] {
         return outputs{{ad[0].data(), ad[1].data(), ad[2].data(), ad[3].data(), ad[4].data()},
                        true};
       }});

  // ADOL-C, traceless forward mode: 4 directions (S, sigma, T, r) carried by every value.
  adtl::setNumDir(4);
  std::vector<double> tl[5];
  for (auto& a : tl)
    a.resize(n);
  methods.push_back(
      {"ADOL-C, traceless forward vector mode (adtl, 4 directions)",
       [&] {
         static constexpr double dir[4][4] = {
             {1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1}};
         static constexpr double none[4] = {0, 0, 0, 0};
         for (std::int64_t i = 0; i < n; ++i) {
           const adtl::adouble as(s[i], dir[0]), av(v[i], dir[1]), at(t[i], dir[2]),
               ar(r[i], dir[3]), ak(k[i], none);
           const adtl::adouble sq = sqrt(at), sv = av * sq,
                               e1 = (log(as / ak) + (ar + 0.5 * av * av) * at) / sv, e2 = e1 - sv;
           const adtl::adouble c = as * (0.5 + 0.5 * erf(e1 * inv_sqrt2)) -
                                   ak * exp(-ar * at) * (0.5 + 0.5 * erf(e2 * inv_sqrt2));
           tl[0][i] = c.getValue();
           for (int j = 0; j < 4; ++j)
             tl[1 + j][i] = c.getADValue(j);
         }
       },
       [&] {
         return outputs{{tl[0].data(), tl[1].data(), tl[2].data(), tl[3].data(), tl[4].data()},
                        true};
       }});
#else
  std::printf("ADOL-C not found at configure time (no adolc/adolc.h or libadolc): its rows are "
              "skipped\n\n");
#endif

  // Checks the last run of m; a NaN anywhere makes its error NaN (and a mismatch).
  bool ok = true;
  auto check = [&](method& m) {
    const outputs o = m.out();
    const char* what[5] = {"price", "delta", "vega", "theta", "rho"};
    for (int j = 0; j < 5; ++j) {
      if (!o.q[j]) continue;
      const double sign = j == 3 && o.minus_theta ? -1 : 1;
      double worst = 0;
      std::int64_t at = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        const double err =
            std::abs(sign * o.q[j][i] - want[j][i]) / std::max(1.0, std::abs(want[j][i]));
        if (!(err <= worst)) // NaN counts as worst
          worst = err, at = i;
      }
      if (!(worst <= m.max_err) && !std::isnan(m.max_err)) m.max_err = worst;
      if (!(worst <= m.tol)) {
        std::printf("MISMATCH: %s, %s of option %lld: %.15g, want %.15g\n", m.name.c_str(), what[j],
                    static_cast<long long>(at), sign * o.q[j][at], want[j][at]);
        ok = false;
      }
    }
  };

  for (auto& m : methods) { // warm-up
    m.run();
    check(m);
  }
  const std::size_t nm = methods.size();
  for (int round = 0; round < runs; ++round)
    for (std::size_t j = 0; j < nm; ++j) {
      method& m = methods[(j + std::size_t(round)) % nm];
      const double c0 = cpu_now_s();
      const auto w0 = std::chrono::steady_clock::now();
      m.run();
      const auto w1 = std::chrono::steady_clock::now();
      const double c1 = cpu_now_s();
      m.wall_ms.push_back(std::chrono::duration<double, std::milli>(w1 - w0).count());
      m.cpu_ms.push_back(1e3 * (c1 - c0));
    }
  for (auto& m : methods) // the timed runs computed the right thing too
    check(m);

  const double kiln_price = median(methods[0].wall_ms), kiln_greeks = median(methods[1].wall_ms),
               by_hand = median(methods[2].wall_ms);
  std::printf("%lld options, f64, one thread (kiln::num_threads() = %d); median of %d runs after "
              "a warm-up; error = max |got - want| / max(1, |want|) over price and the 4 Greeks "
              "against the closed forms in long double\n\n",
              static_cast<long long>(n), kiln::num_threads(), runs);
  std::printf("| method | wall ms | CPU ms | / kiln price | / hand loop | max error |\n");
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  std::FILE* tsv = tsv_path ? std::fopen(tsv_path, "w") : nullptr;
  for (auto& m : methods) {
    const double w = median(m.wall_ms), c = median(m.cpu_ms);
    std::printf("| %s | %.1f | %.1f | %.2f | %.2f | %.1e |\n", m.name.c_str(), w, c, w / kiln_price,
                w / by_hand, m.max_err);
    if (tsv) std::fprintf(tsv, "%s\t%.3f\t%.3f\t%.3g\n", m.name.c_str(), w, c, m.max_err);
  }
  if (tsv) std::fclose(tsv);
  std::printf("\n- target kiln(price + Greeks) / hand loop <= 1.5: %.2f, %s\n",
              kiln_greeks / by_hand, kiln_greeks / by_hand <= 1.5 ? "met" : "NOT met");
  std::printf("- target kiln(price + Greeks) / kiln(price) <= 3: %.2f, %s\n",
              kiln_greeks / kiln_price, kiln_greeks / kiln_price <= 3 ? "met" : "NOT met");
  std::printf("- checks: %s\n", ok ? "every method agrees with the closed forms" : "MISMATCH");
  return ok ? 0 : 1;
}
