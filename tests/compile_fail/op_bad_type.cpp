// expect: arithmetic on tensor<bool> makes no sense
// A user's op with the default rule (the arithmetic promotion) on tensor<bool>: its rule
// says why, in one sentence, where the op is used.
#include "kiln/kiln.hpp"

namespace mine {
namespace ops {
struct twice : kiln::op_base {
  static constexpr const char* name = "twice";
  template <class T>
  static T host(T x) {
    return x + x;
  }
  static constexpr kiln::spelling device{.any = "($0 + $0)"};
};
} // namespace ops
KILN_UNARY_FUNCTION(twice, ops::twice)
} // namespace mine

int main() {
  const kiln::tensor<bool> b(kiln::shape{3});
  (void)mine::twice(b);
}
