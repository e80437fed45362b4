// A host-only program: built against kiln::core, which carries no jit/ include root and
// links no runtime library. It checks a fused expression, a reduction and a gradient
// against double-precision loops, and that naming a GPU device is a clear kiln::error.
#include <kiln/core.hpp>

#if __has_include(<kiln/jit/jit.hpp>)
#error "kiln::core must not see jit/"
#endif

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

int main() {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-2.0, 2.0);
  std::vector<double> a(1000), b(1000);
  for (auto& v : a)
    v = u(rng);
  for (auto& v : b)
    v = u(rng);
  const kiln::tensor<double> ta = kiln::from(a), tb = kiln::from(b);
  const kiln::tensor<double> c = kiln::sin(ta) * tb + 2.0 * kiln::exp(-ta * ta);
  const double s = kiln::sum(c).item();
  auto [da] = kiln::grad(kiln::sum(kiln::sin(ta) * tb), ta);
  const kiln::tensor<double> g = da;
  const std::vector<double> cv = c.to_vector(), gv = g.to_vector();
  double ref = 0, worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double ci = std::sin(a[i]) * b[i] + 2.0 * std::exp(-a[i] * a[i]);
    ref += ci;
    worst = std::max(worst, std::abs(cv[i] - ci));
    worst = std::max(worst, std::abs(gv[i] - std::cos(a[i]) * b[i]));
  }
  bool refused = false;
  try {
    kiln::tensor<float> x({4}, kiln::device("vulkan:0"));
  } catch (const kiln::error& e) {
    refused = std::string(e.what()).find("not built into this program") != std::string::npos;
    std::printf("core only: %s\n", e.what());
  }
  std::printf("core only: sum %.12f (reference %.12f), worst element error %.3g\n", s, ref, worst);
  return worst < 1e-12 && std::abs(s - ref) < 1e-9 && refused ? 0 : 1;
}
