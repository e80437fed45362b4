#pragma once
// kiln::error's definitions (see kiln/linkage.hpp for where they are compiled).
#include "kiln/error.hpp"

namespace kiln {

// (Out of line: an error's construction was 3 KB of code in every file that threw one.)
KILN_CORE_INLINE error::error(std::string op, std::string reason, std::string details)
    : std::runtime_error(format(op, reason, details)), op_(std::move(op)),
      reason_(std::move(reason)), details_(std::move(details)) {}

KILN_CORE_INLINE std::string error::format(const std::string& op, const std::string& reason,
                                           const std::string& details) {
  std::string s = "kiln::" + op + ": " + reason;
  if (!details.empty()) s += " (" + details + ")";
  return s;
}

} // namespace kiln
