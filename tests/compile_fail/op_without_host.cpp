// expect: the op needs `static T host(T...)`, callable with its operands' compute types
// A user's op (README, "Writing your own op") with a device body and no host value.
#include <kiln/kiln.hpp>

namespace mine {
namespace ops {
struct twice : kiln::op_base {
  static constexpr const char* name = "twice";
  static constexpr kiln::spelling device{.any = "($0 + $0)"};
};
} // namespace ops
KILN_UNARY_FUNCTION(twice, ops::twice)
} // namespace mine

int main() {
  const auto a = kiln::ones<float>({3});
  auto e = mine::twice(a);
  (void)e;
}
