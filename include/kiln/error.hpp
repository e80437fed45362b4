#pragma once
// kiln::error: every failure kiln reports carries the op that failed, why, and the
// details a user needs to fix the call (shapes, dtypes, devices).
#include <stdexcept>
#include <string>

namespace kiln {

class error : public std::runtime_error {
public:
  error(std::string op, std::string reason, std::string details = {})
      : std::runtime_error(format(op, reason, details)), op_(std::move(op)),
        reason_(std::move(reason)), details_(std::move(details)) {}

  const std::string& op() const noexcept { return op_; }
  const std::string& reason() const noexcept { return reason_; }
  const std::string& details() const noexcept { return details_; }

private:
  static std::string format(const std::string& op, const std::string& reason,
                            const std::string& details) {
    std::string s = "kiln::" + op + ": " + reason;
    if (!details.empty()) s += " (" + details + ")";
    return s;
  }
  std::string op_, reason_, details_;
};

} // namespace kiln
