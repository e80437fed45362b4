#pragma once
// kiln::device names where a tensor's storage lives: "host", or "vulkan:N", "cuda:N",
// "metal:N" for GPU backends. Naming a device that is not usable here is a kiln::error with
// the reason (backend.hpp asks the backend registry).
#include "kiln/error.hpp"
#include "kiln/linkage.hpp"
#include "kiln/settings.hpp"

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

enum class device_kind : std::uint8_t { host, vulkan, cuda, metal };

class device {
public:
  device() = default; // host
  // Parses and checks that the device is usable here (defined in backend.hpp); errors
  // name `op` ("device", or "KILN_DEVICE" for the environment's default).
  explicit device(std::string_view spec, const std::string& op = "device");
  device(device_kind k, int index) : kind_(k), index_(index) {}

  device_kind kind() const noexcept { return kind_; }
  int index() const noexcept { return index_; }
  bool is_host() const noexcept { return kind_ == device_kind::host; }
  KILN_CORE_INLINE std::string str() const;
  friend bool operator==(const device&, const device&) = default;

private:
  // Strict: "host", "cpu", or backend:index with a decimal index in int range; no spaces,
  // no sign, no "vulkan" without an index. A lenient parse read "vulkan: 0" and
  // "vulkan:4294967296" as vulkan:0.
  static KILN_CORE_INLINE device parse(std::string_view spec, const std::string& op);
  device_kind kind_ = device_kind::host;
  int index_ = 0;
};

// The error of an op whose operand lives on `operand` while its target is on `target`.
[[noreturn]] KILN_CORE_INLINE void refuse_mixed_devices(const char* op, const device& target,
                                                        const device& operand);

struct device_info {
  kiln::device device;
  bool available;
  std::string description; // what it is, or why it is unavailable
};

} // namespace kiln

#include "kiln/backend.hpp"

#if KILN_CORE_DEFINITIONS
#include "kiln/device_impl.hpp"
#endif
