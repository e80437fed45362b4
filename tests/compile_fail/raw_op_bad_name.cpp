// expect: a raw op's input and output names are distinct C identifiers
// A raw op names an input `in`, a GLSL keyword: said where the op is used.
#include "kiln/kiln.hpp"

namespace user {
struct shifted : kiln::op_base {
  static constexpr const char* name = "shifted";
  static constexpr const char* inputs = "x, in";
  static constexpr const char* output = "y";
  static constexpr const char* body = "  y = x + in;\n";
  template <class T>
  static T host(T x, T s) {
    return x + s;
  }
};
} // namespace user

int main() {
  const kiln::tensor<float> x(kiln::shape{4});
  (void)kiln::make_node<user::shifted>(x, x);
}
