// expect: would narrow its type
#include <kiln/kiln.hpp>

int main() {
  const auto a = kiln::ones<float>({3});
  kiln::tensor<int> r = a * 2.0f;
  (void)r;
}
