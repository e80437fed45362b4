// 20 different elementwise expressions, each evaluated into a tensor (build-time input; see
// ../build_time.sh). The expressions are in exprs20.inc, shared with kiln_20.cpp and
// eigen_20.cpp.
#ifndef XTENSOR_USE_XSIMD
#define XTENSOR_USE_XSIMD // xtensor with xsimd, as kiln uses it
#endif
#include "data.hpp"

#include <xtensor/xadapt.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xtensor.hpp>

int main() {
  const xt::xtensor<float, 1> a = xt::adapt(build_time::uniform(0.1f, 2.0f, 1));
  const xt::xtensor<float, 1> b = xt::adapt(build_time::uniform(0.1f, 2.0f, 2));
  const xt::xtensor<float, 1> c = xt::adapt(build_time::uniform(0.1f, 2.0f, 3));
  const xt::xtensor<float, 1> d = xt::adapt(build_time::uniform(-1.0f, 1.0f, 4));
  double sum = 0;
#define OUT(...)                                                                                   \
  {                                                                                                \
    const xt::xtensor<float, 1> r = __VA_ARGS__;                                                   \
    sum += build_time::checksum(r.data(), build_time::n);                                          \
  }
#include "exprs20.inc"
  build_time::print(sum);
}
