#pragma once
// kiln::error: every failure kiln reports carries the op that failed, why, and the
// details a user needs to fix the call (shapes, dtypes, devices).
#include "kiln/linkage.hpp"

#include <stdexcept>
#include <string>

namespace kiln {

class error : public std::runtime_error {
public:
  KILN_CORE_INLINE error(std::string op, std::string reason, std::string details = {});

  const std::string& op() const noexcept { return op_; }
  const std::string& reason() const noexcept { return reason_; }
  const std::string& details() const noexcept { return details_; }

private:
  static KILN_CORE_INLINE std::string format(const std::string& op, const std::string& reason,
                                             const std::string& details);
  std::string op_, reason_, details_;
};

} // namespace kiln

#if KILN_CORE_DEFINITIONS
#include "kiln/error_impl.hpp"
#endif
