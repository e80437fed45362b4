// f64 math and arithmetic against long double, within the ulp bounds of float_ops.hpp.
#include "float_ops.hpp"

TEST_CASE("f64 math and arithmetic match long double within the ulp bounds", "[ops]") {
  float_ops::float_math<double>();
}

TEST_CASE("f64 math at special inputs gives the C99 Annex F results", "[ops]") {
  float_ops::float_specials<double>();
}

TEST_CASE("f64 pow, atan2, fmod, %, maximum, minimum on special pairs", "[ops]") {
  float_ops::binary_specials<double>();
}

TEST_CASE("f64 math over each function's whole domain", "[ops]") {
  float_ops::float_whole_range<double>();
}

TEST_CASE("f64 exp, exp2, expm1, sigmoid up to overflow and into gradual underflow", "[ops]") {
  float_ops::exp_edges<double>();
}

TEST_CASE("f64 math on subnormal inputs", "[ops]") { float_ops::subnormal_inputs<double>(); }

TEST_CASE("f64 pow beyond the main domain", "[ops]") { float_ops::pow_wide<double>(); }
