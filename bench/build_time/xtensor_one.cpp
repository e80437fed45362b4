// One fused expression on two tensors of random data and its sum, `r = a * b + exp(a);
// sum(r)` (build-time input; see ../build_time.sh).
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
  const xt::xtensor<float, 1> r = a * b + xt::exp(a);
  const double s = xt::sum(r)();
  build_time::print(build_time::checksum(r.data(), build_time::n) + s);
}
