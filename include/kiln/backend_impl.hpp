#pragma once
// The device registry's definitions (declared in backend.hpp; see kiln/linkage.hpp for
// where they are compiled).
#include "kiln/backend.hpp"

namespace kiln {

KILN_CORE_INLINE bool register_backend(backend_provider p) {
  auto& r = detail::backend_registry::instance();
  std::lock_guard lock(r.mutex);
  r.providers.push_back(std::move(p));
  return true;
}

KILN_CORE_INLINE std::shared_ptr<backend> backend_for(const device& d, const char* op) {
  auto& r = detail::backend_registry::instance();
  backend_provider p;
  {
    std::lock_guard lock(r.mutex);
    for (const auto& q : r.providers)
      if (q.kind == d.kind()) p = q;
  }
  if (!p.open) throw error(op, "device is not available", d.str() + ": " + detail::not_built_in);
  // A device its backend cannot open (no driver, no GPU) is reported as the caller's op.
  try {
    return p.open(d.index());
  } catch (const error& e) {
    if (e.op() != "device" || std::string_view(op) == "device") throw;
    throw error(op, e.reason(), e.details());
  }
}

namespace detail {
KILN_CORE_INLINE std::vector<device_info> list_devices() {
  std::vector<device_info> out{{device{}, true, "host CPU (fused loops, xsimd, thread pool)"}};
  std::vector<backend_provider> ps;
  {
    auto& r = backend_registry::instance();
    std::lock_guard lock(r.mutex);
    ps = r.providers;
  }
  for (device_kind k : {device_kind::vulkan, device_kind::cuda, device_kind::metal}) {
    bool found = false;
    for (const auto& p : ps)
      if (p.kind == k) {
        found = true;
        for (auto& i : p.list())
          out.push_back(std::move(i));
      }
    if (!found) out.push_back({device(k, 0), false, not_built_in});
  }
  return out;
}
} // namespace detail

namespace detail {
KILN_CORE_INLINE std::string devices_line(const std::vector<device_info>& all) {
  std::string s;
  for (const auto& i : all)
    s += (s.empty() ? "" : ", ") + i.device.str() +
         (i.available ? " (available)" : " (unavailable)");
  return s;
}
} // namespace detail

// A device named by a string must be usable here; this says why not.
KILN_CORE_INLINE device::device(std::string_view spec, const std::string& op)
    : device(parse(spec, op)) {
  if (is_host()) return;
  const auto all = detail::list_devices();
  for (const auto& i : all)
    if (i.device == *this) {
      if (!i.available) throw error(op, "device is not available", str() + ": " + i.description);
      return;
    }
  throw error(op, "no such device",
              str() +
                  " is not among kiln::devices() on this machine: " + detail::devices_line(all));
}

KILN_CORE_INLINE device default_device() {
  const std::string_view env = settings::raw("KILN_DEVICE");
  if (env.empty()) return device{};
  thread_local std::string last;
  thread_local device parsed;
  if (last != env) {
    parsed = device(env, "KILN_DEVICE");
    last = env;
  }
  return parsed;
}

} // namespace kiln
