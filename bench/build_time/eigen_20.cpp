// 20 different elementwise expressions, each evaluated into an array (build-time input; see
// ../build_time.sh). The expressions are in exprs20.inc, shared with kiln_20.cpp and
// xtensor_20.cpp.
#include "data.hpp"

#include <Eigen/Core>

namespace {
Eigen::ArrayXf array(const std::vector<float>& v) {
  return Eigen::Map<const Eigen::ArrayXf>(v.data(), static_cast<Eigen::Index>(v.size()));
}
// Eigen spells numpy's where as a member of the condition.
template <class C, class A, class B>
auto where(const C& cond, const A& a, const B& b) {
  return cond.select(a, b);
}
} // namespace

int main() {
  const Eigen::ArrayXf a = array(build_time::uniform(0.1f, 2.0f, 1));
  const Eigen::ArrayXf b = array(build_time::uniform(0.1f, 2.0f, 2));
  const Eigen::ArrayXf c = array(build_time::uniform(0.1f, 2.0f, 3));
  const Eigen::ArrayXf d = array(build_time::uniform(-1.0f, 1.0f, 4));
  double sum = 0;
#define OUT(...)                                                                                   \
  {                                                                                                \
    const Eigen::ArrayXf r = __VA_ARGS__;                                                          \
    sum += build_time::checksum(r.data(), build_time::n);                                          \
  }
#include "exprs20.inc"
  build_time::print(sum);
}
