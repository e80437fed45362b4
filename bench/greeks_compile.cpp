// The build-time probe of bench/run_greeks.sh: the Black-Scholes price and its 4 Greeks from
// one kiln::grad, evaluated in one kiln::eval, and nothing else (no checks, no timing), so its
// compile time is that of the gradient code a user writes. -DINCLUDE_ONLY keeps the includes
// and an empty main (the share of header parsing); -DPRICE_ONLY evaluates the price alone.
#include <kiln/kiln.hpp>

#include <cstdio>

int main() {
#ifndef INCLUDE_ONLY
  const kiln::shape sh{1024};
  const auto S = kiln::full<double>(sh, 50.0), K = kiln::full<double>(sh, 55.0),
             T = kiln::full<double>(sh, 1.0), R = kiln::full<double>(sh, 0.02),
             V = kiln::full<double>(sh, 0.3);
  auto cdf = [](const auto& x) { return 0.5 * kiln::erfc(x * -0.70710678118654752); };
  const auto vsqrtT = V * kiln::sqrt(T);
  const auto d1 = (kiln::log(S / K) + (R + 0.5 * V * V) * T) / vsqrtT;
  const auto d2 = d1 - vsqrtT;
  const auto call = S * cdf(d1) - K * kiln::exp(-R * T) * cdf(d2);
  kiln::tensor<double> c(sh);
#ifdef PRICE_ONLY
  c = call;
  std::printf("price %.6f\n", c.data()[0]);
#else
  auto [dS, dV, dT, dR] = kiln::grad(kiln::sum(call), S, V, T, R);
  kiln::tensor<double> delta(sh), vega(sh), minus_theta(sh), rho(sh);
  kiln::eval(c = call, delta = dS, vega = dV, minus_theta = dT, rho = dR);
  std::printf("price %.6f delta %.6f vega %.6f theta %.6f rho %.6f\n", c.data()[0], delta.data()[0],
              vega.data()[0], -minus_theta.data()[0], rho.data()[0]);
#endif
#endif
}
