// expect: below its number of operands
// A unary op's device spelling uses $1: said where the op is used.
#include "kiln/kiln.hpp"

namespace user {
struct shift : kiln::op_base {
  static constexpr const char* name = "shift";
  template <class T>
  static T host(T x) {
    return x + T(1);
  }
  static constexpr kiln::spelling device{.any = "($0 + $1)"};
};
} // namespace user

int main() {
  const kiln::tensor<float> x(kiln::shape{4});
  (void)kiln::make_node<user::shift>(x);
}
