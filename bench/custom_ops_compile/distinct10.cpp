// Ten different built-in math functions, each in a fused statement and differentiated once:
// ten expression types, as custom10.cpp's ten ops are (builtin10.cpp's formulas share one).
#include <kiln/kiln.hpp>

#include <cstdio>

#include "ops10.inc"

int main() {
  const auto x = kiln::random::uniform<float>({1000}, 1, -3, 3).eval();
  const auto y = kiln::random::uniform<float>({1000}, 2, -1, 1).eval();
  double check = 0;
  kiln::tensor<float> r;
#define KILN_BENCH_USE(N, fn)                                                                      \
  r = kiln::fn(x) * y;                                                                             \
  check += kiln::sum(r).item();                                                                    \
  check +=                                                                                         \
      kiln::tensor<float>(std::get<0>(kiln::grad(kiln::sum(kiln::fn(x) * y), x))).to_vector()[0];
  KILN_BENCH_FUNCTIONS(KILN_BENCH_USE)
  std::printf("%.6f\n", check);
}
