// 20 different elementwise expressions, each evaluated into a tensor (build-time input; see
// ../build_time.sh). The expressions are in exprs20.inc, shared with xtensor_20.cpp and
// eigen_20.cpp.
#include "data.hpp"

#include <kiln/kiln.hpp>

int main() {
  const auto a = kiln::from(build_time::uniform(0.1f, 2.0f, 1));
  const auto b = kiln::from(build_time::uniform(0.1f, 2.0f, 2));
  const auto c = kiln::from(build_time::uniform(0.1f, 2.0f, 3));
  const auto d = kiln::from(build_time::uniform(-1.0f, 1.0f, 4));
  double sum = 0;
#define OUT(...)                                                                                   \
  {                                                                                                \
    const kiln::tensor<float> r = __VA_ARGS__;                                                     \
    sum += build_time::checksum(r.data(), build_time::n);                                          \
  }
#include "exprs20.inc"
  build_time::print(sum);
}
