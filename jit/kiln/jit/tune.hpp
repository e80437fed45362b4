#pragma once
// Tuning a user's expression on its device (README, "Tuning kernels"):
//
//   kiln::tensor<float> x = ..., y = ...;                 // on vulkan:0
//   auto r = kiln::tune([&] { return kiln::tensor<float>(kiln::exp(x) * y); }, {});
//
// `f` evaluates one expression (an elementwise pass or a reduction on a device, a pass on
// the host) and returns its result;
// kiln::tune calls it once to see which kernel it launches, then under each candidate
// configuration (tune/search.hpp), and writes what it measured and chose to the tuning
// database. Later evaluations of that kernel, in this process and others, take the choice
// at that size (and the nearest tuned size around it). Nothing is tuned unless asked.
#include "kiln/jit/backend/jit_backend.hpp"
#include "kiln/jit/tune/host.hpp"
#include "kiln/jit/tune/host_gemm.hpp"
#include "kiln/jit/tune/launch_choice.hpp"
#include "kiln/jit/tune/search.hpp"

#include <algorithm>
#include <chrono>
#include <type_traits>

namespace kiln {

struct tune_options : jit::tune::search_options {
  std::string db;      // the database file; empty: KILN_TUNE_DB's (or the default)
  bool family = false; // record the choice for every kernel of the family ("*")
};

struct tune_report {
  std::string device, family, kernel, size;
  std::string chosen, fallback; // configurations, as the database spells them
  jit::tune::search_result result;
};

namespace detail {

// Listens to the launches of this thread while alive.
class hook_scope {
public:
  explicit hook_scope(jit::tune::launch_hook& h) : prev_(jit::tune::current_hook()) {
    jit::tune::current_hook() = &h;
    // Host passes ask the chooser while any tuner listens (host.hpp's host_choice).
    kiln::detail::active_tuners().fetch_add(1);
    kiln::detail::host_chooser_wanted().store(true);
  }
  ~hook_scope() {
    jit::tune::current_hook() = prev_;
    kiln::detail::active_tuners().fetch_sub(1);
  }
  hook_scope(const hook_scope&) = delete;
  hook_scope& operator=(const hook_scope&) = delete;

private:
  jit::tune::launch_hook* prev_;
};

template <class T>
std::vector<double> as_doubles(const std::vector<T>& v) {
  std::vector<double> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i)
    out[i] = static_cast<double>(v[i]);
  return out;
}

// The dtype a result holds, which sets how a reduction's results must agree: a tensor's, or
// what a replayed launch says it produced (replay.hpp); else its value_type's.
template <class R>
dtype result_dtype(const R& r) {
  if constexpr (requires { r.dtype(); })
    return r.dtype();
  else
    return dtype_of<typename R::value_type>();
}

} // namespace detail

template <class F>
tune_report tune(F&& f, const tune_options& o = {}) {
  using result_t = std::remove_cvref_t<decltype(f())>;
  jit::tune::launch_hook probe;
  {
    detail::hook_scope s(probe);
    (void)f();
  }
  // The launch with the most work is tuned (a reduction's result may be copied after it, a
  // pass of one element); others run as they would.
  if (probe.seen.empty())
    throw error("tune", "the function launched no tunable kernel",
                "it must evaluate an expression: a pass or a reduction on a device, or a pass "
                "on the host");
  auto work = [](const jit::tune::launch_site& s) {
    int b = 0;
    for (int x : s.bucket)
      b += x;
    return b;
  };
  const jit::tune::launch_site site =
      *std::max_element(probe.seen.begin(), probe.seen.end(),
                        [&](const auto& a, const auto& b) { return work(a) < work(b); });
  jit::jit_backend* be = site.backend; // null for a host pass
  std::optional<result_t> last;
  jit::tune::target t;
  t.device = site.device;
  t.sp = site.sp;
  t.kernel = o.family ? "*" : site.kernel;
  t.size = jit::tune::format_bucket(site.bucket);
  t.prepare = site.prepare;
  t.run = [&](const jit::tune::config& c) {
    jit::tune::launch_hook h;
    h.force = &c;
    h.family = site.sp->family();
    h.kernel = site.kernel;
    detail::hook_scope s(h);
    if (!be) { // the host: done when f returns
      const auto t0 = std::chrono::steady_clock::now();
      last.emplace(f());
      return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0)
          .count();
    }
    if (be->device_timer()) {
      be->timer_begin();
      last.emplace(f());
      return be->timer_end_ns();
    }
    const auto t0 = std::chrono::steady_clock::now();
    last.emplace(f());
    be->synchronize();
    return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  };
  t.check_run = [&](const jit::tune::config& c) {
    const kiln::detail::poison_scope poisoned;
    t.run(c);
  };
  t.output = [&] { return detail::as_doubles(last->to_vector()); };
  if (site.sp->family() == "reduction") // compared after a run: `last` holds its result
    t.agree = [&](const std::vector<double>& a, const std::vector<double>& b) {
      return jit::tune::detail::agree_reduced(detail::result_dtype(*last), a, b);
    };
  else if (site.sp->family() == "host_matmul" || site.sp->family() == "matmul")
    // (blocking, a provider and a device product's split add in other orders)
    t.agree = [&](const std::vector<double>& a, const std::vector<double>& b) {
      return jit::tune::detail::agree_product(detail::result_dtype(*last), a, b);
    };
  const std::string path = o.db.empty() ? jit::tune::database_path() : o.db;
  if (path.empty())
    throw error("tune", "no tuning database to write",
                "set KILN_TUNE_DB, or KILN_CACHE_DIR, XDG_CACHE_HOME or HOME");
  jit::tune::database db(path);
  tune_report rep;
  rep.result = jit::tune::search(t, db, o);
  rep.device = t.device;
  rep.family = t.sp->family();
  rep.kernel = t.kernel;
  rep.size = t.size;
  rep.chosen = t.sp->format(rep.result.chosen);
  rep.fallback = t.sp->format(rep.result.fallback);
  // This process's launches see the new choice (the selector re-reads its own file).
  auto& sel = jit::tune::selector::instance();
  if (const auto open = sel.db(); open && open->path() == path) sel.reload();
  return rep;
}

} // namespace kiln
