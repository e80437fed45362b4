// Built against the install tree by tests/consumer/run.cmake.
#include <kiln/kiln.hpp>

#include <cmath>
#include <cstdio>

int main() {
  const auto x = kiln::linspace<double>(0, 1, 101);
  const double s = kiln::sum(x * x).item(); // sum of (i/100)^2, i = 0..100
  double ref = 0;
  for (int i = 0; i <= 100; ++i) ref += (i / 100.0) * (i / 100.0);
  std::printf("consumer sum %.12f\n", s);
  return std::abs(s - ref) < 1e-12 ? 0 : 1;
}
