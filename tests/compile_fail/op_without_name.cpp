// expect: an op needs `static constexpr const char* name`
// A user's op (README, "Writing your own op") that forgot its name.
#include <kiln/kiln.hpp>

namespace mine {
namespace ops {
struct twice : kiln::op_base {
  template <class T>
  static T host(T x) {
    return x + x;
  }
};
} // namespace ops
KILN_UNARY_FUNCTION(twice, ops::twice)
} // namespace mine

int main() {
  const auto a = kiln::ones<float>({3});
  auto e = mine::twice(a);
  (void)e;
}
