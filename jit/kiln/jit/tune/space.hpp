#pragma once
// What can be tuned: a kernel family's parameters, each with its legal values and today's
// default, and the constraints a whole configuration must meet on a device (its limits).
// A configuration is the values of its family's parameters in order; one that is not legal
// on the device is never compiled or launched (space::why_illegal is asked first).
#include "kiln/error.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::jit::tune {

// The most parameters a kernel's space has: its family's and its custom ops' tunables
// (op_tunables.hpp).
inline constexpr std::size_t max_params = 12;

// A family's parameter values, in the order of its space's params.
struct config {
  std::array<std::int64_t, max_params> v{};
  std::int64_t operator[](std::size_t i) const { return v[i]; }
  std::int64_t& operator[](std::size_t i) { return v[i]; }
  friend bool operator==(const config&, const config&) = default;
  friend auto operator<=>(const config&, const config&) = default;
};

struct param {
  std::string name;
  std::string meaning;
  std::vector<std::int64_t> values; // legal on the device, ascending; the default among them
  std::int64_t fallback = 0;        // today's default
};

// What the constraints of a family read of a device.
struct device_limits {
  std::int64_t max_workgroup = 1024; // invocations per workgroup
  std::int64_t max_groups = 65535;   // workgroups in x
  std::int64_t shared_bytes = 16384; // workgroup-shared memory
  std::int64_t threads = 1;          // host threads
  bool cpu = false;                  // a CPU implementation (lavapipe)
  // Lanes per subgroup where a reduction may combine lanes by subgroup shuffles (compute
  // stage, basic and relative shuffles supported); 0 where it may not.
  std::int64_t subgroup = 0;
};

class space {
public:
  space(std::string family, std::vector<param> params,
        std::function<std::string(const config&)> constraint = {})
      : family_(std::move(family)), params_(std::move(params)), constraint_(std::move(constraint)) {
    if (params_.size() > max_params)
      throw error("tune", "a family has too many parameters", family_);
  }

  // This space with more parameters after its own, under the same constraint (which reads
  // only its own): a kernel's custom-op tunables.
  space with(const std::vector<param>& more) const {
    std::vector<param> all = params_;
    all.insert(all.end(), more.begin(), more.end());
    return space(family_, std::move(all), constraint_);
  }

  const std::string& family() const { return family_; }
  const std::vector<param>& params() const { return params_; }
  std::size_t size() const { return params_.size(); }

  config defaults() const {
    config c;
    for (std::size_t i = 0; i < params_.size(); ++i)
      c[i] = params_[i].fallback;
    return c;
  }

  // Why c may not run on the device ("" when it may): a value outside a parameter's legal
  // list, or a constraint between parameters and the device's limits.
  std::string why_illegal(const config& c) const {
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const auto& vs = params_[i].values;
      if (!std::binary_search(vs.begin(), vs.end(), c[i]))
        return params_[i].name + " = " + std::to_string(c[i]) + " is not one of its values";
    }
    for (std::size_t i = params_.size(); i < max_params; ++i)
      if (c[i] != 0) return "a value past the family's parameters";
    return constraint_ ? constraint_(c) : std::string();
  }

  // Every legal configuration, the default first (exhaustive search; counting).
  std::vector<config> legal() const {
    std::vector<config> out{defaults()};
    config c;
    std::array<std::size_t, max_params> at{};
    for (;;) {
      for (std::size_t i = 0; i < params_.size(); ++i)
        c[i] = params_[i].values[at[i]];
      if (c != out.front() && why_illegal(c).empty()) out.push_back(c);
      std::size_t i = 0;
      while (i < params_.size() && ++at[i] == params_[i].values.size())
        at[i++] = 0;
      if (i == params_.size()) break;
    }
    return out;
  }

  // "workgroup=64,groups=256": the database's and the log's spelling.
  std::string format(const config& c) const {
    std::string s;
    for (std::size_t i = 0; i < params_.size(); ++i)
      s += (i ? "," : "") + params_[i].name + "=" + std::to_string(c[i]);
    return s;
  }
  // The inverse of format (names in any order, each once); nullopt otherwise. A parameter
  // the text lacks takes its default: a choice tuned before the family gained a parameter
  // stays valid (it was measured at that default), instead of every record going stale.
  // A name the family does not have fails.
  std::optional<config> parse(std::string_view s) const {
    config c = defaults();
    std::vector<bool> seen(params_.size());
    while (!s.empty()) {
      const auto comma = s.find(',');
      const std::string_view item = s.substr(0, comma);
      s = comma == std::string_view::npos ? std::string_view() : s.substr(comma + 1);
      const auto eq = item.find('=');
      if (eq == std::string_view::npos) return std::nullopt;
      const std::string_view name = item.substr(0, eq), value = item.substr(eq + 1);
      std::size_t i = 0;
      while (i < params_.size() && params_[i].name != name)
        ++i;
      if (i == params_.size() || seen[i]) return std::nullopt;
      std::int64_t x = 0;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), x);
      if (ec != std::errc() || end != value.data() + value.size()) return std::nullopt;
      c[i] = x;
      seen[i] = true;
    }
    if (std::find(seen.begin(), seen.end(), true) == seen.end()) return std::nullopt;
    return c;
  }

private:
  std::string family_;
  std::vector<param> params_;
  std::function<std::string(const config&)> constraint_;
};

// Powers of two in [lo, hi], with `extra` (a default that is not one) added.
inline std::vector<std::int64_t> powers_of_two(std::int64_t lo, std::int64_t hi,
                                               std::int64_t extra = 0) {
  std::vector<std::int64_t> v;
  for (std::int64_t x = lo; x <= hi; x *= 2)
    v.push_back(x);
  if (extra > 0 && extra <= hi && std::find(v.begin(), v.end(), extra) == v.end())
    v.push_back(extra);
  std::sort(v.begin(), v.end());
  return v;
}

// The size bucket of a launch: floor(log2) of each extent that picks a configuration
// (elementwise: elements; reduction: inputs per output, outputs). Tuned configurations are
// kept per bucket; a launch in a bucket with none takes the nearest tuned one.
using size_bucket = std::vector<int>;

inline int log2_floor(std::int64_t x) {
  int b = 0;
  while (x > 1) {
    x >>= 1;
    ++b;
  }
  return b;
}

inline std::string format_bucket(const size_bucket& b) {
  std::string s;
  for (std::size_t i = 0; i < b.size(); ++i)
    s += (i ? "x" : "") + std::to_string(b[i]);
  return s;
}

inline std::optional<size_bucket> parse_bucket(std::string_view s) {
  size_bucket b;
  while (!s.empty()) {
    const auto x = s.find('x');
    const std::string_view part = s.substr(0, x);
    int v = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (ec != std::errc() || end != part.data() + part.size() || v < 0 || v > 63)
      return std::nullopt;
    b.push_back(v);
    if (x == std::string_view::npos) break;
    s = s.substr(x + 1);
    if (s.empty()) return std::nullopt;
  }
  if (b.empty()) return std::nullopt;
  return b;
}

// How far apart two buckets are (log2 steps summed); -1 when they are not comparable.
inline int bucket_distance(const size_bucket& a, const size_bucket& b) {
  if (a.size() != b.size()) return -1;
  int d = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    d += a[i] > b[i] ? a[i] - b[i] : b[i] - a[i];
  return d;
}

} // namespace kiln::jit::tune
