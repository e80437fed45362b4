// f64 math and arithmetic against long double, within the ulp bounds of float_ops.hpp.
#include "float_ops.hpp"

TEST_CASE("f64 math and arithmetic match long double within the ulp bounds", "[ops]") {
  float_ops::float_math<double>();
}
