// Black-Scholes call and put prices for 10^7 options: both outputs in one fused pass,
// checked against a double-precision scalar reference, with the time per option.
#include <kiln/kiln.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>

int main() {
  const std::int64_t n = 10'000'000;
  const auto S = kiln::random::uniform<float>({n}, 1, 10, 100); // spot
  const auto K = kiln::random::uniform<float>({n}, 2, 10, 100); // strike
  const auto T = kiln::random::uniform<float>({n}, 3, 0.1, 2);  // years to expiry
  const float r = 0.02f, v = 0.3f;                              // rate, volatility

  // The normal CDF through erf (vectorized in f32; absolute error ~1e-7 in the tails).
  auto cdf = [](auto x) { return 0.5f + 0.5f * kiln::erf(x * 0.70710678f); };
  const auto sqrtT = kiln::sqrt(T);
  const auto d1 = (kiln::log(S / K) + (r + 0.5f * v * v) * T) / (v * sqrtT);
  const auto d2 = d1 - v * sqrtT;
  const auto disc = K * kiln::exp(-r * T);

  auto call = kiln::empty<float>({n}), put = kiln::empty<float>({n});
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    kiln::eval(call = S * cdf(d1) - disc * cdf(d2), put = disc * cdf(-d2) - S * cdf(-d1));
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::printf("Black-Scholes, %lld options, %d threads: %.2f ns per option (best of 5)\n",
              static_cast<long long>(n), kiln::num_threads(), best / double(n) * 1e9);

  // Check a spread of options against a double-precision reference.
  const float *s = S.data(), *k = K.data(), *t = T.data(), *c = call.data(), *p = put.data();
  auto ncdf = [](double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); };
  int bad = 0;
  for (std::int64_t i = 0; i < n; i += 9973) {
    const double sd = s[i], kd = k[i], td = t[i];
    const double e1 = (std::log(sd / kd) + (r + 0.5 * double(v) * v) * td) / (v * std::sqrt(td));
    const double e2 = e1 - v * std::sqrt(td);
    const double dc = kd * std::exp(-double(r) * td);
    const double rc = sd * ncdf(e1) - dc * ncdf(e2), rp = dc * ncdf(-e2) - sd * ncdf(-e1);
    if (std::abs(c[i] - rc) > 1e-3 * (1 + rc) || std::abs(p[i] - rp) > 1e-3 * (1 + rp)) {
      if (++bad < 5)
        std::printf("mismatch at %lld: call %g vs %g, put %g vs %g\n", (long long)i, c[i], rc, p[i],
                    rp);
    }
  }
  std::printf("call[0] = %.4f, put[0] = %.4f; %s against the double reference\n", c[0], p[0],
              bad ? "MISMATCH" : "agrees");
  return bad ? 1 : 0;
}
