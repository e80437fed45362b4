// Black-Scholes call prices and their Greeks for 10^6 options from one kiln::grad: the
// price is written once, as an expression; grad of its sum gives the adjoint expressions
// of the spot S, the volatility sigma, the time to expiry T and the rate r (each option's
// price depends only on its own inputs, so d sum / d S_i = d price_i / d S_i). One fused
// pass evaluates the price and the four Greeks; they are checked against the closed-form
// Greeks, and the program exits non-zero on a mismatch.
//   delta = dC/dS, vega = dC/dsigma, theta = -dC/dT (per year of calendar time), rho = dC/dr
#include <kiln/kiln.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

int main(int argc, char** argv) {
  // The number of options: 10^6 unless given (`greeks 1000` shows the fixed cost per pass).
  const std::int64_t n = argc > 1 ? std::max(1LL, std::atoll(argv[1])) : 1'000'000;
  std::vector<double> s(n), k(n), t(n), r(n), v(n);
  std::mt19937 gen(11);
  std::uniform_real_distribution<double> price(10, 100), years(0.1, 2), rate(0, 0.05),
      vol(0.1, 0.6);
  for (std::int64_t i = 0; i < n; ++i)
    s[i] = price(gen), k[i] = price(gen), t[i] = years(gen), r[i] = rate(gen), v[i] = vol(gen);
  const kiln::shape sh{n};
  const auto S = kiln::from(s, sh), K = kiln::from(k, sh), T = kiln::from(t, sh),
             R = kiln::from(r, sh), V = kiln::from(v, sh);

  auto cdf = [](const auto& x) { return 0.5 * kiln::erfc(x * -0.70710678118654752); };
  const auto vsqrtT = V * kiln::sqrt(T);
  const auto d1 = (kiln::log(S / K) + (R + 0.5 * V * V) * T) / vsqrtT;
  const auto d2 = d1 - vsqrtT;
  const auto call = S * cdf(d1) - K * kiln::exp(-R * T) * cdf(d2);

  const auto t0 = std::chrono::steady_clock::now();
  auto [dS, dV, dT, dR] = kiln::grad(kiln::sum(call), S, V, T, R);
  // On the inputs' device (KILN_DEVICE picks it): kiln::empty uses the default device.
  auto c = kiln::empty<double>(sh), delta = kiln::empty<double>(sh), vega = kiln::empty<double>(sh),
       minus_theta = kiln::empty<double>(sh), rho = kiln::empty<double>(sh);
  kiln::eval(c = call, delta = dS, vega = dV, minus_theta = dT, rho = dR);
  kiln::synchronize(c.device());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("price and 4 Greeks of %lld options in one pass: %.1f ms (%d thread(s))\n",
              static_cast<long long>(n), secs * 1e3, kiln::num_threads());
  {
    // The first pass above includes building the adjoints (and, on a GPU, compiling or
    // loading the kernels); the same pass again reuses them: the median of 9.
    std::vector<double> again;
    for (int rep = 0; rep < 9; ++rep) {
      const auto t1 = std::chrono::steady_clock::now();
      kiln::eval(c = call, delta = dS, vega = dV, minus_theta = dT, rho = dR);
      kiln::synchronize(c.device());
      again.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count());
    }
    std::nth_element(again.begin(), again.begin() + 4, again.end());
    std::printf("the same pass again: %.2f ms (median of 9)\n", again[4] * 1e3);
  }
  {
    // For scale: the price alone, and the closed forms written by hand (one thread).
    auto alone = kiln::empty<double>(sh);
    auto t1 = std::chrono::steady_clock::now();
    alone = call;
    kiln::synchronize(alone.device());
    const double price_secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    std::vector<double> out(5 * n);
    t1 = std::chrono::steady_clock::now();
    for (std::int64_t i = 0; i < n; ++i) {
      const double sq = std::sqrt(t[i]), sv = v[i] * sq,
                   e1 = (std::log(s[i] / k[i]) + (r[i] + 0.5 * v[i] * v[i]) * t[i]) / sv,
                   e2 = e1 - sv, disc = k[i] * std::exp(-r[i] * t[i]),
                   n1 = 0.5 * std::erfc(-e1 * 0.70710678118654752),
                   n2 = 0.5 * std::erfc(-e2 * 0.70710678118654752),
                   p1 = std::exp(-0.5 * e1 * e1) * 0.39894228040143268;
      out[5 * i] = s[i] * n1 - disc * n2;
      out[5 * i + 1] = n1;
      out[5 * i + 2] = s[i] * p1 * sq;
      out[5 * i + 3] = -s[i] * p1 * v[i] / (2 * sq) - r[i] * disc * n2;
      out[5 * i + 4] = t[i] * disc * n2;
    }
    const double hand_secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    std::printf("price alone: %.1f ms (price and Greeks / price = %.1f); closed forms by hand, "
                "one thread: %.1f ms (kiln / by hand = %.1f)\n",
                price_secs * 1e3, secs / price_secs, hand_secs * 1e3, secs / hand_secs);
  }

  // Closed forms, in double, for every option.
  auto ncdf = [](double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); };
  auto npdf = [](double x) { return std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI); };
  const kiln::device host;
  const auto hc = c.to(host), hd = delta.to(host), hv = vega.to(host), ht = minus_theta.to(host),
             hr = rho.to(host);
  const double *pc = hc.data(), *pd = hd.data(), *pv = hv.data(), *pt = ht.data(), *pr = hr.data();
  double worst = 0;
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double sq = std::sqrt(t[i]),
                 e1 = (std::log(s[i] / k[i]) + (r[i] + 0.5 * v[i] * v[i]) * t[i]) / (v[i] * sq),
                 e2 = e1 - v[i] * sq, disc = k[i] * std::exp(-r[i] * t[i]);
    const double want[5] = {s[i] * ncdf(e1) - disc * ncdf(e2), ncdf(e1), s[i] * npdf(e1) * sq,
                            -s[i] * npdf(e1) * v[i] / (2 * sq) - r[i] * disc * ncdf(e2),
                            t[i] * disc * ncdf(e2)};
    const double got[5] = {pc[i], pd[i], pv[i], -pt[i], pr[i]};
    for (int j = 0; j < 5; ++j) {
      const double err = std::abs(got[j] - want[j]) / std::max(1.0, std::abs(want[j]));
      worst = std::max(worst, err);
      if (!(err <= 1e-9) && ++bad <= 5)
        std::printf("mismatch at option %lld, quantity %d: %.12g vs %.12g\n",
                    static_cast<long long>(i), j, got[j], want[j]);
    }
  }
  std::int64_t at = 0; // an option near the money, to show
  while (at + 1 < n && !(pd[at] > 0.3 && pd[at] < 0.7))
    ++at;
  std::printf("option %lld: price %.6f delta %.6f vega %.6f theta %.6f rho %.6f\n",
              static_cast<long long>(at), pc[at], pd[at], pv[at], -pt[at], pr[at]);
  std::printf("%lld options checked against the closed-form Greeks: %s (worst relative error "
              "%.2g)\n",
              static_cast<long long>(n), bad ? "MISMATCH" : "all agree", worst);
  return bad ? 1 : 0;
}
