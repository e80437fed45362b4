// expect: the op is given another number of operands than its `arity` says
// A user's binary op (it states arity 2) called with one operand: said where it is built.
#include "kiln/kiln.hpp"

namespace user {
struct hypot2 : kiln::op_base {
  static constexpr const char* name = "hypot2";
  static constexpr int arity = 2;
  template <class T>
  static T host(T a, T b) {
    return a * a + b * b;
  }
  template <class T>
  static T host(T a) {
    return a * a;
  }
};
} // namespace user

int main() {
  const kiln::tensor<float> x(kiln::shape{4});
  (void)kiln::make_node<user::hypot2>(x);
}
