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

TEST_CASE("f64 math gives each element the same result whatever its neighbours", "[ops]") {
  float_ops::lane_independent<double>();
}

TEST_CASE("f64 exp, exp2, expm1, sigmoid up to overflow and into gradual underflow", "[ops]") {
  float_ops::exp_edges<double>();
}

TEST_CASE("f64 math on subnormal inputs", "[ops]") { float_ops::subnormal_inputs<double>(); }

TEST_CASE("f64 pow beyond the main domain", "[ops]") { float_ops::pow_wide<double>(); }

// erf_f64.hpp switches approximation at |x| = 0.25 (erfc only), 0.84375, 1.25, 1/0.35, 6
// (erf) and 26 (erfc: beyond, the C library's): around each join, both signs, the values on
// either side and a spread of random points, within 3 ulp of the long double result.
TEST_CASE("f64 erf and erfc on both sides of each join of their approximations", "[ops]") {
  std::vector<double> v;
  std::uniform_real_distribution<double> near(-1e-3, 1e-3);
  for (const double at : {0.25, 0.84375, 1.25, 1.0 / 0.35, 6.0, 26.0})
    for (const double sign : {1.0, -1.0}) {
      double lo = sign * at, hi = lo;
      for (int k = 0; k < 40; ++k) {
        v.push_back(lo), v.push_back(hi);
        lo = std::nextafter(lo, -INFINITY), hi = std::nextafter(hi, INFINITY);
      }
      for (int k = 0; k < 200; ++k)
        v.push_back(sign * at * (1 + near(test::rng())));
    }
  float_ops::unary_on<double>(
      "erf", [](const auto& t) { return kiln::erf(t); }, [](long double x) { return std::erf(x); },
      v, 3);
  float_ops::unary_on<double>(
      "erfc", [](const auto& t) { return kiln::erfc(t); },
      [](long double x) { return std::erfc(x); }, v, 3);
}
