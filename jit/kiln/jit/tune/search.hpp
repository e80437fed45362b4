#pragma once
// Tuning one kernel at one size: which configurations to try, in what order, within a
// budget; each one's output checked against the default configuration's; every measurement
// appended to the database as it is made, so a killed run resumes where it stopped (the
// configurations measured before are read back, not measured again; a forced run reads back
// nothing); the best few re-timed interleaved, and a winner kept only where it beats the
// default by more than the noise.
//   - spaces of at most `exhaustive_up_to` legal configurations: all of them;
//   - larger ones: successive halving over a random sample (seeded): every sampled
//     configuration timed briefly, the better half timed again for longer, and so on;
//   - candidates compiled in parallel on `compile_threads` threads, timing serial.
#include "kiln/dtype.hpp"
#include "kiln/jit/tune/database.hpp"
#include "kiln/jit/tune/measure.hpp"
#include "kiln/jit/tune/space.hpp"

#include <chrono>
#include <cmath>
#include <ctime>
#include <map>
#include <random>
#include <thread>

namespace kiln::jit::tune {

// What is tuned: a kernel at a size on a device, and how to compile, run and read it.
struct target {
  std::string device;
  const space* sp = nullptr;
  std::string kernel; // an id, or "*" (the family's choice for every kernel)
  std::string size;   // format_bucket
  std::function<void(const config&)> prepare; // compile without running (thread-safe)
  std::function<double(const config&)> run;   // one run, its time in ns
  // One run whose output is then checked (run where none): its new tensors start poisoned.
  std::function<void(const config&)> check_run;
  std::function<std::vector<double>()> output; // the last run's result, read back
  // Whether two outputs agree (a reduction's order of additions differs by configuration).
  std::function<bool(const std::vector<double>&, const std::vector<double>&)> agree;
};

struct search_options {
  double budget_seconds = 60;  // the whole search, compiles included
  std::size_t max_configs = 0; // configurations measured at most (0: no bound)
  std::size_t exhaustive_up_to = 48;
  int compile_threads = 2;
  int finalists = 3; // re-timed interleaved, with the default
  int final_rounds = 15;
  std::uint64_t seed = 1;
  timing_options timing;
  bool force = false; // tune again where the database has a choice, measuring everything anew
  std::function<void(const std::string&)> progress; // a progress line; none: quiet
};

struct search_result {
  config chosen, fallback;
  double chosen_ns = 0, default_ns = 0, default_iqr_ns = 0, chosen_iqr_ns = 0;
  std::size_t legal = 0, measured = 0, resumed = 0, rejected = 0, failed = 0;
  bool already_tuned = false; // the database had a choice: nothing was measured
  bool tuned = false;         // the chosen one is not the default
  double seconds = 0;
};

namespace detail {

// Exact agreement, NaN agreeing with NaN (elementwise kernels compute the same arithmetic
// in every configuration).
inline bool same_values(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])))) return false;
  return true;
}

// How far two configurations' results of a reduction may differ, relative to the larger
// value: they add in another order, so by the precision of the result's own type. Integers
// and bools exactly (no rounding to hide behind); f32 by 1e-4 (long sums drift past a few
// ulp); f16 and bf16 by about four of their ulp, at least f32's.
inline double reduction_tolerance(dtype d) {
  switch (d) {
  case dtype::f64:
    return 1e-12;
  case dtype::f32:
    return 1e-4;
  case dtype::f16:
    return 4e-3;
  case dtype::bf16:
    return 3e-2;
  default:
    return 0;
  }
}

// Whether a reduction's results under two configurations agree, in the result's dtype;
// NaN agrees with NaN only.
inline bool agree_reduced(dtype d, const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  const double tol = reduction_tolerance(d);
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) {
      if (std::isnan(a[i]) != std::isnan(b[i])) return false;
      continue;
    }
    if (a[i] == b[i]) continue; // infinities, and exact integers
    if (!(std::abs(a[i] - b[i]) <= tol * std::max(std::abs(a[i]), std::abs(b[i])))) return false;
  }
  return true;
}

// Whether a product's results under two configurations agree: they add each output's
// terms in other orders (the contracted dim's blocking, a provider's kernel), and an output
// near zero from cancelling terms keeps the rounding of its terms, so the bound is relative
// to the largest output (a norm-wise bound), by the result type's reduction tolerance.
inline bool agree_product(dtype d, const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  double scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::isfinite(a[i])) scale = std::max(scale, std::abs(a[i]));
  const double tol = reduction_tolerance(d) * scale;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) {
      if (std::isnan(a[i]) != std::isnan(b[i])) return false;
      continue;
    }
    if (a[i] == b[i]) continue;
    if (!(std::abs(a[i] - b[i]) <= tol)) return false;
  }
  return true;
}

} // namespace detail

inline search_result search(const target& t, database& db, const search_options& o) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(clock::now() - t0).count(); };
  const space& sp = *t.sp;
  search_result res;
  res.fallback = sp.defaults();
  res.chosen = res.fallback;
  auto key_record = [&](char kind, const config& c) {
    record r;
    r.kind = kind;
    r.device = t.device;
    r.family = sp.family();
    r.kernel = t.kernel;
    r.size = t.size;
    r.config = sp.format(c);
    r.time = static_cast<std::int64_t>(std::time(nullptr));
    return r;
  };
  // What the database already holds for this key: a choice, and measured configurations.
  // Forced, neither counts: earlier measurements are what a re-tune means to replace (another
  // driver, a busier machine), so every configuration is measured again.
  std::map<config, record> done;
  const record probe = key_record('m', res.fallback);
  if (!o.force)
    for (const record& r : db.records()) {
      if (!r.same_key(probe)) continue;
      if (r.kind == 'c' && r.status == "ok") {
        res.already_tuned = true;
        if (auto c = sp.parse(r.config)) res.chosen = *c;
        res.chosen_ns = r.median_ns;
      } else if (r.kind == 'm') {
        if (auto c = sp.parse(r.config)) done[*c] = r;
      }
    }
  if (res.already_tuned) return res;

  const std::vector<config> legal = sp.legal();
  res.legal = legal.size();
  std::vector<config> order = legal; // the default first
  std::mt19937_64 rng(o.seed);
  const bool exhaustive = legal.size() <= o.exhaustive_up_to;
  if (!exhaustive) std::shuffle(order.begin() + 1, order.end(), rng);
  if (o.max_configs > 0 && order.size() > o.max_configs) order.resize(o.max_configs);

  // Compile every candidate first, in parallel (each configuration's kernels once).
  std::vector<std::string> compile_error(order.size());
  if (t.prepare) {
    std::atomic<std::size_t> next{0};
    auto work = [&] {
      for (std::size_t i; (i = next.fetch_add(1)) < order.size();) {
        if (elapsed() > o.budget_seconds) break;
        try {
          t.prepare(order[i]);
        } catch (const std::exception& e) {
          compile_error[i] = e.what();
        }
      }
    };
    std::vector<std::thread> pool;
    for (int k = 1; k < std::max(1, o.compile_threads); ++k)
      pool.emplace_back(work);
    work();
    for (auto& th : pool)
      th.join();
  }

  std::vector<double> reference;
  std::map<config, timing> timed;
  auto note = [&](const std::string& s) {
    if (o.progress) o.progress(s);
  };
  auto append = [&](const config& c, const timing& tm, const std::string& status) {
    record r = key_record('m', c);
    r.median_ns = tm.median_ns;
    r.iqr_ns = tm.iqr_ns;
    r.runs = tm.runs;
    r.status = status;
    db.append(r);
  };
  // One configuration: legal, compiled, its output agreeing with the default's, then timed;
  // one measured by an earlier run is read back (it was checked then).
  auto try_config = [&](std::size_t i, const timing_options& opts) -> bool {
    const config& c = order[i];
    if (!sp.why_illegal(c).empty()) return false; // never launched
    if (auto it = done.find(c); it != done.end()) {
      if (it->second.status != "ok") return false;
      timing tm;
      tm.median_ns = it->second.median_ns;
      tm.iqr_ns = it->second.iqr_ns;
      tm.runs = static_cast<int>(it->second.runs);
      timed[c] = tm;
      ++res.resumed;
      return true;
    }
    if (!compile_error[i].empty()) {
      append(c, {}, "failed");
      ++res.failed;
      note("failed " + sp.format(c) + ": " + compile_error[i]);
      return false;
    }
    try {
      auto checked = [&](const config& x) { t.check_run ? t.check_run(x) : (void)t.run(x); };
      if (i != 0 && reference.empty()) { // the default's output, the reference
        checked(order[0]);
        reference = t.output();
      }
      checked(c);
      const std::vector<double> out = t.output();
      if (i == 0) {
        reference = out;
      } else if (!(t.agree ? t.agree(reference, out) : detail::same_values(reference, out))) {
        append(c, {}, "wrong");
        ++res.rejected;
        note("rejected " + sp.format(c) + ": its output differs from the default's");
        return false;
      }
      const timing tm = measure([&] { return t.run(c); }, opts);
      timed[c] = tm;
      ++res.measured;
      append(c, tm, "ok");
      return true;
    } catch (const std::exception& e) {
      append(c, {}, "failed");
      ++res.failed;
      note("failed " + sp.format(c) + ": " + e.what());
      return false;
    }
  };
  auto best_of = [&](const std::vector<config>& cs) {
    config b = cs.front();
    for (const config& c : cs)
      if (timed.count(c) && (!timed.count(b) || timed[c].median_ns < timed[b].median_ns)) b = c;
    return b;
  };
  auto say = [&](std::size_t k, std::size_t of) {
    std::string line = "[" + std::to_string(k) + "/" + std::to_string(of) + "] ";
    std::vector<config> all;
    for (const auto& [c, tm] : timed)
      all.push_back(c);
    if (!all.empty()) {
      const config b = best_of(all);
      line += "best " + sp.format(b) + " " + detail::number(timed[b].median_ns / 1e3, 6) + " us";
    }
    const double left = o.budget_seconds - elapsed();
    line += ", " + detail::number(std::max(0.0, left), 3) + " s left";
    note(line);
  };

  // The default first: it is the reference for outputs and the bar to beat.
  if (!try_config(0, o.timing))
    throw error("tune", "the default configuration does not run",
                sp.family() + " " + sp.format(order[0]) +
                    (compile_error[0].empty() ? "" : ": " + compile_error[0]));
  std::vector<config> alive{order[0]};
  if (exhaustive) {
    for (std::size_t i = 1; i < order.size() && elapsed() < o.budget_seconds; ++i) {
      if (try_config(i, o.timing)) alive.push_back(order[i]);
      say(i + 1, order.size());
    }
  } else {
    // Successive halving: brief timings for all, longer ones for the better half.
    timing_options brief = o.timing;
    brief.max_seconds = o.timing.max_seconds / 4;
    brief.min_runs = 3;
    for (std::size_t i = 1; i < order.size() && elapsed() < o.budget_seconds; ++i) {
      if (try_config(i, brief)) alive.push_back(order[i]);
      say(i + 1, order.size());
    }
    while (alive.size() > std::size_t(std::max(o.finalists, 1)) && elapsed() < o.budget_seconds) {
      std::sort(alive.begin(), alive.end(), [&](const config& a, const config& b) {
        return timed[a].median_ns < timed[b].median_ns;
      });
      alive.resize((alive.size() + 1) / 2);
      for (const config& c : alive)
        if (elapsed() < o.budget_seconds) timed[c] = measure([&] { return t.run(c); }, o.timing);
    }
  }

  // The finalists and the default, re-timed interleaved: drift and noise hit all alike.
  std::sort(alive.begin(), alive.end(), [&](const config& a, const config& b) {
    return timed[a].median_ns < timed[b].median_ns;
  });
  std::vector<config> finals(alive.begin(),
                             alive.begin() + std::min<std::ptrdiff_t>(alive.size(), o.finalists));
  if (std::find(finals.begin(), finals.end(), order[0]) == finals.end()) finals.push_back(order[0]);
  std::map<config, std::vector<double>> samples;
  for (int round = 0; round < o.final_rounds; ++round)
    for (const config& c : finals) {
      if (o.timing.flush) flush_caches();
      samples[c].push_back(t.run(c));
    }
  std::map<config, timing> final_t;
  for (auto& [c, s] : samples)
    final_t[c] = summarize(s);
  const timing& dt = final_t[order[0]];
  res.default_ns = dt.median_ns;
  res.default_iqr_ns = dt.iqr_ns;
  config win = order[0];
  for (const config& c : finals)
    if (final_t[c].median_ns < final_t[win].median_ns) win = c;
  // Kept only past the noise: faster than the default by more than both spreads, and by 1%.
  const timing& wt = final_t[win];
  const double margin = std::max(0.01 * dt.median_ns, 0.5 * (dt.iqr_ns + wt.iqr_ns));
  if (dt.median_ns - wt.median_ns <= margin) win = order[0];
  res.chosen = win;
  res.chosen_ns = final_t[win].median_ns;
  res.chosen_iqr_ns = final_t[win].iqr_ns;
  res.tuned = win != order[0];
  record c = key_record('c', win);
  c.median_ns = res.chosen_ns;
  c.iqr_ns = res.chosen_iqr_ns;
  c.runs = final_t[win].runs;
  db.append(c);
  res.seconds = elapsed();
  return res;
}

} // namespace kiln::jit::tune
