#pragma once
// What the tuning tests share: the JIT backend of a device, the launches a function makes
// (as a tuner's probe sees them), and a function run with one configuration forced on one
// kernel's launches (a tuner's forced run), checked to have taken it.
#include "support.hpp"

#include "kiln/jit/tune.hpp"

#include <vector>

namespace tune_test {

namespace tune = kiln::jit::tune;

inline kiln::jit::jit_backend& jit_of(const kiln::device& d) {
  auto* be = dynamic_cast<kiln::jit::jit_backend*>(kiln::backend_for(d).get());
  REQUIRE(be);
  return *be;
}

template <class F>
std::vector<tune::launch_site> launches_of(F&& f) {
  tune::launch_hook probe;
  {
    kiln::detail::hook_scope s(probe);
    (void)f();
  }
  REQUIRE(!probe.seen.empty());
  return probe.seen;
}

// f() with configuration c forced on the launches of site's kernel.
template <class F>
auto forced(const tune::launch_site& site, const tune::config& c, F&& f) {
  tune::launch_hook h;
  h.force = &c;
  h.family = site.sp->family();
  h.kernel = site.kernel;
  auto out = [&] {
    kiln::detail::hook_scope s(h);
    return f();
  }();
  REQUIRE(tune::last_choice(site.sp->family()).cfg == c);
  return out;
}

} // namespace tune_test
