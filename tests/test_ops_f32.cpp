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

// erfc_f32.hpp switches at |x| = 0.5 and 10.5 (0 or 2 beyond), and its result turns
// subnormal near 9.2: around each, both signs, and a dense sweep of [-11, 11] plus random
// points, within 5 ulp of the long double result.
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

// Results in gradual underflow are formed scaled and rounded once (underflow.hpp): every f32
// of erfc's, gelu's and exp's tails down to 0, each batch mixing them with ordinary values
// (a lane's neighbours must not change it), within the ulp bounds counted on the subnormal
// grid (exp 4 as in float_ops.hpp's table, erfc 5, gelu 5 from its rounded argument).
TEST_CASE("f32 erfc gelu and exp into gradual underflow down to 0", "[ops]") {
  auto sweep = [](float lo, float hi, float ordinary) {
    std::vector<float> v;
    for (float x = lo; x < hi; x = std::nextafter(x, INFINITY)) {
      v.push_back(x);
      if (v.size() % 5 == 0) v.push_back(ordinary);
    }
    return v;
  };
  float_ops::unary_on<float>(
      "erfc", [](const auto& t) { return kiln::erfc(t); },
      [](long double x) { return std::erfc(x); }, sweep(9.0f, 10.1f, 0.3f), 5);
  float_ops::unary_on<float>(
      "gelu", [](const auto& t) { return kiln::gelu(t); },
      [](long double x) {
        // erfc's argument rounded as kiln rounds it (erfc's condition, 2u^2 ~ 170 there,
        // would otherwise be the error measured; test_activations bounds that).
        const float u = -float(x) * 0.70710678118654752440f;
        return x / 2 * std::erfc(static_cast<long double>(u));
      },
      sweep(-14.9f, -12.9f, 1.5f), 5);
  float_ops::unary_on<float>(
      "exp", [](const auto& t) { return kiln::exp(t); }, [](long double x) { return std::exp(x); },
      sweep(-104.0f, -87.0f, 0.5f), 4);
}
