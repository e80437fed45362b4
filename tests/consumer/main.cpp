// A program outside kiln's tree, built against the install tree by tests/consumer/run.cmake
// (find_package(kiln CONFIG REQUIRED), kiln::kiln). It prints one line that run.cmake checks,
// and exits non-zero itself when a value is wrong.
#include <kiln/kiln.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

int main() {
  // Integers are exact: 1^2 + 2^2 + ... + 100^2 = 338350.
  const kiln::tensor<std::int64_t> n = kiln::arange<std::int64_t>(1, 101);
  const std::int64_t squares = kiln::sum(n * n).item();

  // A fused float expression and a reduction: sum over i = 0..100 of (i/100)^2 = 33.835.
  const kiln::tensor<double> x = kiln::linspace<double>(0.0, 1.0, 101);
  const double s = kiln::sum(x * x).item();
  double ref = 0;
  for (int i = 0; i <= 100; ++i)
    ref += (i / 100.0) * (i / 100.0);

  // The GPU backends are part of the program (kiln::kiln's runtime library, or the one
  // file that includes kiln/jit/src.hpp), whether or not this machine has a device.
  for (const auto& d : kiln::devices())
    if (d.description.find("not built into") != std::string::npos) {
      std::printf("kiln consumer: %s: %s\n", d.device.str().c_str(), d.description.c_str());
      return 2;
    }

  std::printf("kiln consumer: %lld %.6f\n", static_cast<long long>(squares), s);
  return squares == 338350 && std::abs(s - ref) < 1e-12 ? 0 : 1;
}
