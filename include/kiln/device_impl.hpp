#pragma once
// kiln::device's definitions (see kiln/linkage.hpp for where they are compiled).
#include "kiln/device.hpp"

namespace kiln {

KILN_CORE_INLINE std::string device::str() const {
  static constexpr const char* names[] = {"host", "vulkan", "cuda", "metal"};
  return kind_ == device_kind::host
             ? "host"
             : names[static_cast<int>(kind_)] + (":" + std::to_string(index_));
}

KILN_CORE_INLINE void refuse_mixed_devices(const char* op, const device& target,
                                           const device& operand) {
  throw error(op, "operands live on different devices",
              "target on " + target.str() + ", an operand on " + operand.str() +
                  "; move it with .to(" + target.str() + ")");
}

KILN_CORE_INLINE device device::parse(std::string_view spec, const std::string& op) {
  if (spec == "host" || spec == "cpu") return device{};
  const auto colon = spec.find(':');
  const std::string_view kind = spec.substr(0, colon);
  device_kind k;
  if (kind == "vulkan")
    k = device_kind::vulkan;
  else if (kind == "cuda")
    k = device_kind::cuda;
  else if (kind == "metal")
    k = device_kind::metal;
  else
    throw error(op, "unknown device",
                "\"" + std::string(spec) + "\"; expected host, vulkan:N, cuda:N or metal:N");
  const auto index = colon == std::string_view::npos
                         ? std::nullopt
                         : settings::parse_decimal(spec.substr(colon + 1), INT32_MAX);
  if (!index)
    throw error(op, "malformed device index",
                "\"" + std::string(spec) + "\"; expected " + std::string(kind) +
                    ":N with N a decimal number in [0, 2147483647], no spaces or sign");
  return device(k, static_cast<int>(*index));
}
} // namespace kiln
