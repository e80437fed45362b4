// One fused expression on two tensors of random data and its sum, `r = a * b + exp(a);
// sum(r)` (build-time input; see ../build_time.sh).
#include "data.hpp"

#include <kiln/kiln.hpp>

int main() {
  const auto a = kiln::from(build_time::uniform(0.1f, 2.0f, 1));
  const auto b = kiln::from(build_time::uniform(0.1f, 2.0f, 2));
  const kiln::tensor<float> r = a * b + kiln::exp(a);
  const double s = kiln::sum(r).item();
  build_time::print(build_time::checksum(r.data(), build_time::n) + s);
}
