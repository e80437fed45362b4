#pragma once
// Providers: hand-written kernels registered for ops on a kind of device, consulted before
// the JIT's own kernel templates; for one (device kind, op) the first registered wins (as
// BRT's providers). A provider sees its operands materialized: a reduction's input is
// evaluated into a tensor first, so a hand-written kernel never has to take an expression.
#include "kiln/device.hpp"
#include "kiln/dtype.hpp"
#include "kiln/layout.hpp"

#include <array>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace kiln::jit {

// A buffer as a provider sees it: backend memory handle, layout, dtype.
struct provider_operand {
  void* handle;
  kiln::layout layout;
  dtype type;
};

// A reduction call: `input` folded over the dims marked in `mask` into `output`
// (contiguous, the kept dims in order).
struct reduce_call {
  const char* op; // "sum", "max", ...
  kiln::device device;
  provider_operand input;
  provider_operand output;
  std::array<bool, max_rank> mask;
};

struct provider {
  std::string name; // who registered it (for logs and errors)
  device_kind kind;
  std::string op;
  // Returns false to decline (a dtype it does not handle, say): the next one is asked.
  std::function<bool(const reduce_call&)> reduce;
};

class provider_registry {
public:
  static provider_registry& instance() {
    static provider_registry r;
    return r;
  }
  void add(provider p) {
    std::lock_guard lock(mutex_);
    providers_.push_back(std::move(p));
    ++version_;
  }
  // Whether any provider is registered for (kind, op): the caller then materializes.
  bool has(device_kind kind, const std::string& op) const {
    std::lock_guard lock(mutex_);
    for (const auto& p : providers_)
      if (p.kind == kind && p.op == op) return true;
    return false;
  }
  // Runs the first provider, in registration order, that accepts the call.
  bool run(const reduce_call& c) const {
    std::vector<provider> ps;
    {
      std::lock_guard lock(mutex_);
      for (const auto& p : providers_)
        if (p.kind == c.device.kind() && p.op == c.op && p.reduce) ps.push_back(p);
    }
    for (const auto& p : ps)
      if (p.reduce(c)) return true;
    return false;
  }
  bool empty() const {
    std::lock_guard lock(mutex_);
    return providers_.empty();
  }

private:
  mutable std::mutex mutex_;
  std::vector<provider> providers_;
  std::uint64_t version_ = 0;
};

inline void register_provider(provider p) { provider_registry::instance().add(std::move(p)); }

} // namespace kiln::jit
