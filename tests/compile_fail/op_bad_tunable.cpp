// expect: one of the op's `tunables`
// A device spelling names ${NAME} that the op does not declare: said where the op is used.
#include "kiln/kiln.hpp"

namespace user {
struct scale : kiln::op_base {
  static constexpr const char* name = "scale";
  static constexpr kiln::tunable tunables[] = {{"FACTOR", 3}};
  template <class T>
  static T host(T x) {
    return x * T(3);
  }
  static constexpr kiln::spelling device{.any = "($0 * $T(${FACTR}))"};
};
} // namespace user

int main() {
  const kiln::tensor<float> x(kiln::shape{4});
  (void)kiln::make_node<user::scale>(x);
}
