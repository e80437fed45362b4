// expect: differentiate with respect to tensors
// grad finds the tensors it differentiates by; an expression is not one of them.
#include <kiln/kiln.hpp>

int main() {
  const kiln::tensor<double> x = kiln::ones<double>({3});
  auto [d] = kiln::grad(kiln::sum(x * x), x * 2.0);
  (void)d;
}
