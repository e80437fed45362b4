// expect: arithmetic on tensor<bool> makes no sense
// `a + b` on two tensor<bool>: use logical ops, or cast<T>() first.
#include <kiln/kiln.hpp>

int main() {
  kiln::tensor<bool> a = kiln::ones<float>({3}) > 0.5f;
  kiln::tensor<bool> b = kiln::zeros<float>({3}) > 0.5f;
  auto e = a + b;
  (void)e;
}
