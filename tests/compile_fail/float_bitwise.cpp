// expect: bitwise ops need integer or bool tensors
#include <kiln/kiln.hpp>

int main() {
  const kiln::tensor<float> a = kiln::ones<float>({3});
  const kiln::tensor<float> b = kiln::zeros<float>({3});
  auto e = a & b;
  (void)e;
}
