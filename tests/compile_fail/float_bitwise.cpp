// expect: bitwise ops need integer or bool tensors
#include <kiln/kiln.hpp>

int main() {
  const auto a = kiln::ones<float>({3});
  auto e = a & a;
  (void)e;
}
