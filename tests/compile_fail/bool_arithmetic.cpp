// expect: arithmetic on tensor<bool> makes no sense
#include <kiln/kiln.hpp>

int main() {
  const auto a = kiln::ones<float>({3}) > 0.5f;
  auto e = a + a;
  (void)e;
}
