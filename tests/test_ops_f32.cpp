// f32 math and arithmetic against long double, within the ulp bounds of float_ops.hpp.
#include "float_ops.hpp"

TEST_CASE("f32 math and arithmetic match long double within the ulp bounds", "[ops]") {
  float_ops::float_math<float>();
}

TEST_CASE("f32 math at special inputs gives the C99 Annex F results", "[ops]") {
  float_ops::float_specials<float>();
}

TEST_CASE("f32 pow, atan2, fmod, %, maximum, minimum on special pairs", "[ops]") {
  float_ops::binary_specials<float>();
}

TEST_CASE("f32 math over each function's whole domain", "[ops]") {
  float_ops::float_whole_range<float>();
}

TEST_CASE("f32 math gives each element the same result whatever its neighbours", "[ops]") {
  float_ops::lane_independent<float>();
}

TEST_CASE("f32 exp, exp2, expm1, sigmoid up to overflow and into gradual underflow", "[ops]") {
  float_ops::exp_edges<float>();
}

TEST_CASE("f32 math on subnormal inputs", "[ops]") { float_ops::subnormal_inputs<float>(); }

TEST_CASE("f32 pow beyond the main domain", "[ops]") { float_ops::pow_wide<float>(); }

// erfc_f32.hpp switches at |x| = 0.5, 9.25 (a subnormal e^(-x^2) computed by halves) and
// 10.5 (0 or 2 beyond): around each join, both signs, and a dense sweep of [-11, 11] plus
// random points, within 5 ulp of the long double result.
TEST_CASE("f32 erfc on both sides of each join and over its whole range", "[ops]") {
  std::vector<float> v;
  for (const float at : {0.5f, 4.0f, 9.25f, 10.5f})
    for (const float sign : {1.0f, -1.0f}) {
      float lo = sign * at, hi = lo;
      for (int k = 0; k < 40; ++k) {
        v.push_back(lo), v.push_back(hi);
        lo = std::nextafter(lo, -INFINITY), hi = std::nextafter(hi, INFINITY);
      }
    }
  for (float x = -11.0f; x <= 11.0f; x += 1.0f / 1024)
    v.push_back(x);
  const auto r = test::uniform<float>(100000, -11, 11);
  v.insert(v.end(), r.begin(), r.end());
  float_ops::unary_on<float>(
      "erfc", [](const auto& t) { return kiln::erfc(t); },
      [](long double x) { return std::erfc(x); }, v, 5);
}
