// One fused expression on two tensors of random data and its sum, `r = a * b + exp(a);
// sum(r)` (build-time input; see ../build_time.sh).
#include "data.hpp"

#include <Eigen/Core>

int main() {
  const auto ua = build_time::uniform(0.1f, 2.0f, 1), ub = build_time::uniform(0.1f, 2.0f, 2);
  const Eigen::ArrayXf a = Eigen::Map<const Eigen::ArrayXf>(ua.data(), ua.size());
  const Eigen::ArrayXf b = Eigen::Map<const Eigen::ArrayXf>(ub.data(), ub.size());
  const Eigen::ArrayXf r = a * b + a.exp();
  const double s = r.sum();
  build_time::print(build_time::checksum(r.data(), build_time::n) + s);
}
