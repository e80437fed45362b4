// The same ten formulas as custom10.cpp in built-in ops, each used in a fused statement and
// differentiated once: the baseline for the compile time of ten custom ops.
#include <kiln/kiln.hpp>

#include <cstdio>

#include "ops10.inc"

int main() {
  const auto x = kiln::random::uniform<float>({1000}, 1, -3, 3).eval();
  const auto y = kiln::random::uniform<float>({1000}, 2, -1, 1).eval();
  double check = 0;
  kiln::tensor<float> r;
#define KILN_BENCH_USE(N)                                                                          \
  r = x / (float(N) + kiln::abs(x)) * y;                                                           \
  check += kiln::sum(r).item();                                                                    \
  check += kiln::tensor<float>(                                                                    \
               std::get<0>(kiln::grad(kiln::sum(x / (float(N) + kiln::abs(x)) * y), x)))           \
               .to_vector()[0];
  KILN_BENCH_FORMULAS(KILN_BENCH_USE)
  std::printf("%.6f\n", check);
}
