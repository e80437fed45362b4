// Arithmetic, comparisons, logical and bitwise ops, where and the predicates of the catalog
// on each GPU device against the host, exactly (device_catalog.hpp).
#include "device_catalog.hpp"

using catalog::check;
using catalog::values;

TEMPLATE_TEST_CASE("device catalog: arithmetic", "[vulkan][cuda][metal][catalog]", std::uint8_t,
                   std::int32_t, std::uint32_t, std::int64_t, kiln::half, kiln::bfloat16, float,
                   double) {
  const auto x = values<TestType>(-1e4, 1e4), y = values<TestType>(-100, 100);
  const auto z = values<TestType>(-1e4, 1e4);
  check(
      "add", 0, [](const auto& a, const auto& b) { return a + b; }, x, y);
  check(
      "sub", 0, [](const auto& a, const auto& b) { return a - b; }, x, y);
  check(
      "mul", 0, [](const auto& a, const auto& b) { return a * b; }, x, y);
  check(
      "div", 0, [](const auto& a, const auto& b) { return a / b; }, x, y);
  check(
      "mod", 0, [](const auto& a, const auto& b) { return a % b; }, x, y);
  check(
      "neg abs sign", 0, [](const auto& a) { return -a + kiln::abs(a) * kiln::sign(a); }, x);
  check(
      "maximum minimum", 0,
      [](const auto& a, const auto& b) { return kiln::maximum(a, b) - kiln::minimum(b, a); }, x, y);
  check(
      "clamp", 0, [](const auto& a, const auto& b, const auto& c) { return kiln::clamp(a, b, c); },
      x, y, z);
  check(
      "scalar operands", 0, [](const auto& a) { return a * 3 + 2 - a / 7; }, x);
}

TEMPLATE_TEST_CASE("device catalog: comparisons, where, predicates",
                   "[vulkan][cuda][metal][catalog]", bool, std::uint8_t, std::int32_t,
                   std::uint32_t, std::int64_t, kiln::half, kiln::bfloat16, float, double) {
  const auto x = values<TestType>(-5, 5), y = values<TestType>(-5, 5);
  check(
      "== != <", 0, [](const auto& a, const auto& b) { return ((a == b) != (a < b)) && !(a >= b); },
      x, y);
  check(
      "<= >", 0, [](const auto& a, const auto& b) { return (a <= b) || (a > b); }, x, y);
  check(
      "where", 0, [](const auto& a, const auto& b) { return kiln::where(a > b, a, b); }, x, y);
  check(
      "isnan isinf isfinite", 0,
      [](const auto& a) { return kiln::isnan(a) || (kiln::isinf(a) && !kiln::isfinite(a)); }, x);
}

TEMPLATE_TEST_CASE("device catalog: logical and bitwise", "[vulkan][cuda][metal][catalog]", bool,
                   std::uint8_t, std::int32_t, std::uint32_t, std::int64_t) {
  const auto x = values<TestType>(-1e6, 1e6), y = values<TestType>(-1e6, 1e6);
  check(
      "&& || ! xor", 0,
      [](const auto& a, const auto& b) { return kiln::logical_xor(a && b, !(a || b)); }, x, y);
  check(
      "& | ^ ~", 0, [](const auto& a, const auto& b) { return ((a & b) | ~a) ^ b; }, x, y);
}
