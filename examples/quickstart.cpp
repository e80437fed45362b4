#include <kiln/kiln.hpp>
#include <cstdio>
kiln::tensor<float> make() {
  auto a = kiln::arange<float>(0, 10);
  auto b = kiln::full<float>({10}, 2.0f);
  return kiln::exp(-a * 0.1f) * kiln::sqrt(b) + kiln::log(b + 1.0f) * kiln::sin(a);
}
int main() {
  auto r = make();
  for (float v : r.to_vector()) std::printf("%g ", v);
  std::printf("\n");
  kiln::tensor<int> i = kiln::arange<int>(0, 6);
  auto m = i.reshape({2, 3});
  kiln::tensor<double> s = m.transpose() * 1.5 + kiln::cast<double>(m.transpose());
  for (double v : s.to_vector()) std::printf("%g ", v);
  std::printf("\n");
  auto c = kiln::where(i > 2, i, -i);
  for (int v : c.to_vector()) std::printf("%d ", v);
  std::printf("\n");
  kiln::tensor<float> a = kiln::arange<float>(0, 8), b2 = kiln::ones<float>({8});
  kiln::tensor<float> r1, r2;
  r1 = kiln::zeros<float>({8}); r2 = kiln::zeros<float>({8});
  kiln::eval(r1 = a * 2, r2 = a + b2);
  a = a * 2 + b2;
  for (float v : a.to_vector()) std::printf("%g ", v);
  std::printf("\n%g %g\n", r1.to_vector()[3], r2.to_vector()[3]);
  kiln::tensor<float> sq = kiln::arange<float>(0, 9).reshape({3,3});
  sq = sq.transpose();
  for (float v : sq.to_vector()) std::printf("%g ", v);
  std::printf("\n");
}
