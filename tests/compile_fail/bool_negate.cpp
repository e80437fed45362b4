// expect: arithmetic on tensor<bool> makes no sense
// Unary minus on a bool expression (a comparison), not only on a stored tensor<bool>.
#include <kiln/kiln.hpp>

#include <cstdint>

int main() {
  const auto a = kiln::ones<std::int32_t>({3}) > 0;
  auto e = -a;
  (void)e;
}
