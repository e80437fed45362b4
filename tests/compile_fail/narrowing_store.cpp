// expect: would narrow its type
// A float expression stored into tensor<int> needs kiln::cast<int>(...).
#include <kiln/kiln.hpp>

int main() {
  const kiln::tensor<float> a = kiln::ones<float>({3});
  kiln::tensor<int> r = a * 2.0f;
  (void)r;
}
