// expect: arithmetic on tensor<bool> makes no sense
#include <kiln/kiln.hpp>

int main() {
  const auto a = kiln::ones<std::int32_t>({3}) > 0;
  auto e = -a;
  (void)e;
}
