// Float math of the catalog on each GPU device against the host, within the ulp bounds
// given (device_catalog.hpp).
#include "device_catalog.hpp"

using catalog::check;
using catalog::values;

#define KILN_MATH1(fn, lo, hi, ulp)                                                                \
  TEMPLATE_TEST_CASE("device catalog: " #fn, "[vulkan][cuda][metal][catalog]", float, double) {    \
    check(                                                                                         \
        #fn, ulp, [](const auto& x) { return kiln::fn(x); }, values<TestType>(lo, hi));            \
  }

KILN_MATH1(exp, -90, 90, 8)
KILN_MATH1(exp2, -130, 130, 8)
KILN_MATH1(expm1, -10, 10, 8)
KILN_MATH1(log, 0, 1000, 8)
KILN_MATH1(log2, 0, 1000, 8)
KILN_MATH1(log10, 0, 1000, 8)
KILN_MATH1(log1p, -1, 100, 8)
KILN_MATH1(sqrt, 0, 1e6, 0)
KILN_MATH1(rsqrt, 0, 1e6, 2)
KILN_MATH1(cbrt, -1e6, 1e6, 8)
KILN_MATH1(sin, -100, 100, 8)
KILN_MATH1(cos, -100, 100, 8)
KILN_MATH1(tan, -1.5, 1.5, 8)
KILN_MATH1(asin, -1, 1, 8)
KILN_MATH1(acos, -1, 1, 8)
KILN_MATH1(atan, -50, 50, 8)
KILN_MATH1(sinh, -20, 20, 8)
KILN_MATH1(cosh, -20, 20, 8)
KILN_MATH1(tanh, -10, 10, 8)
KILN_MATH1(asinh, -1e3, 1e3, 16)
KILN_MATH1(acosh, 1, 1e3, 16)
KILN_MATH1(atanh, -1, 1, 16)
KILN_MATH1(erf, -4, 4, 16)
KILN_MATH1(erfc, -3, 10, 16)
KILN_MATH1(sigmoid, -30, 30, 8)
// The activations (ops/activation.hpp): the sum of both sides' bounds for the math they
// call, and gelu's computed argument (-x/sqrt 2; the cubic of the tanh form) carried through
// the function: up to 9 ulps at -3.
KILN_MATH1(gelu, -3, 10, 64)
KILN_MATH1(gelu_tanh, -3, 10, 64)
KILN_MATH1(silu, -30, 30, 24)
KILN_MATH1(softplus, -30, 30, 24)
KILN_MATH1(relu, -10, 10, 0)
KILN_MATH1(floor, -1e4, 1e4, 0)
KILN_MATH1(ceil, -1e4, 1e4, 0)
KILN_MATH1(round, -1e4, 1e4, 0)
KILN_MATH1(trunc, -1e4, 1e4, 0)

TEMPLATE_TEST_CASE("device catalog: pow, atan2, fmod", "[vulkan][cuda][metal][catalog]", float,
                   double) {
  const auto x = values<TestType>(0, 10), y = values<TestType>(-8, 8);
  check(
      "pow", 8, [](const auto& a, const auto& b) { return kiln::pow(a, b); }, x, y);
  check(
      "atan2", 8, [](const auto& a, const auto& b) { return kiln::atan2(a, b); }, y, x);
  check(
      "fmod", 0, [](const auto& a, const auto& b) { return kiln::fmod(a, b); }, y, x);
  check(
      "leaky_relu", 0, [](const auto& a, const auto& b) { return kiln::leaky_relu(a, b); }, y,
      values<TestType>(0, 1));
}

TEMPLATE_TEST_CASE("device catalog: math on 16-bit floats and integers",
                   "[vulkan][cuda][metal][catalog]", kiln::half, kiln::bfloat16) {
  check(
      "exp", 1, [](const auto& x) { return kiln::exp(x); }, values<TestType>(-10, 10));
  check(
      "sin", 1, [](const auto& x) { return kiln::sin(x) * x; }, values<TestType>(-10, 10));
  check(
      "sqrt i32", 8, [](const auto& x) { return kiln::sqrt(x); }, values<std::int32_t>(0, 1 << 30));
  check(
      "log u8", 8, [](const auto& x) { return kiln::log(x); }, values<std::uint8_t>(0, 255));
}
