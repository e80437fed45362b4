#pragma once
// kiln::device names where a tensor's storage lives: "host", or "vulkan:N", "cuda:N",
// "metal:N" for GPU backends. Naming a device that is not usable here is a kiln::error with
// the reason (backend.hpp asks the backend registry).
#include "kiln/error.hpp"

#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

enum class device_kind : std::uint8_t { host, vulkan, cuda, metal };

class device {
public:
  device() = default;                     // host
  explicit device(std::string_view spec); // defined in backend.hpp
  device(device_kind k, int index) : kind_(k), index_(index) {}

  device_kind kind() const noexcept { return kind_; }
  int index() const noexcept { return index_; }
  bool is_host() const noexcept { return kind_ == device_kind::host; }
  std::string str() const {
    static constexpr const char* names[] = {"host", "vulkan", "cuda", "metal"};
    return kind_ == device_kind::host
               ? "host"
               : names[static_cast<int>(kind_)] + (":" + std::to_string(index_));
  }
  friend bool operator==(const device&, const device&) = default;

private:
  static device parse(std::string_view spec) {
    if (spec == "host" || spec == "cpu") return device{};
    const auto colon = spec.find(':');
    const std::string_view kind = spec.substr(0, colon);
    int index = 0;
    if (colon != std::string_view::npos) {
      const std::string idx(spec.substr(colon + 1));
      char* end = nullptr;
      const long v = std::strtol(idx.c_str(), &end, 10);
      if (idx.empty() || *end != '\0' || v < 0)
        throw error("device", "malformed device index", "\"" + std::string(spec) + "\"");
      index = static_cast<int>(v);
    }
    device_kind k;
    if (kind == "vulkan")
      k = device_kind::vulkan;
    else if (kind == "cuda")
      k = device_kind::cuda;
    else if (kind == "metal")
      k = device_kind::metal;
    else
      throw error("device", "unknown device",
                  "\"" + std::string(spec) + "\"; expected host, vulkan:N, cuda:N or metal:N");
    return device(k, index);
  }
  device_kind kind_ = device_kind::host;
  int index_ = 0;
};

struct device_info {
  kiln::device device;
  bool available;
  std::string description; // what it is, or why it is unavailable
};

} // namespace kiln

#include "kiln/backend.hpp"
