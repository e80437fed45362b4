// expect: each operand must be a kiln tensor or expression
#include <kiln/kiln.hpp>

#include <string>

int main() {
  const kiln::tensor<float> a = kiln::ones<float>({3});
  auto e = a + std::string("x");
  (void)e;
}
