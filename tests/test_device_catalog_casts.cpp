// Every cast between kiln's dtypes on each GPU device, exactly, against the host
// (device_catalog.hpp).
#include "device_catalog.hpp"

using catalog::check;
using catalog::values;

// Every conversion: saturating float -> integer, NaN -> 0, rounding once to f16/bf16.
template <class From, class... To>
void casts_from() {
  const auto x = values<From>(-3e5, 3e5);
  (check(
       "cast", 0, [](const auto& a) { return kiln::cast<To>(a); }, x),
   ...);
}
TEMPLATE_TEST_CASE("device catalog: cast", "[vulkan][cuda][metal][catalog]", bool, std::uint8_t,
                   std::int32_t, std::uint32_t, std::int64_t, kiln::half, kiln::bfloat16, float,
                   double) {
  casts_from<TestType, bool, std::uint8_t, std::int32_t, std::uint32_t, std::int64_t, kiln::half,
             kiln::bfloat16, float, double>();
}
