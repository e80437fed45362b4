// Tuned against default launch configurations (issue 15, point 7): for the elementwise and
// reduction families at three sizes each on a device, `repeats` independent tunes (a fresh
// database each), each with its budget; then every distinct winner and the default re-timed
// interleaved in one final measurement (device clock), so the table compares them under the
// same conditions. Reports the tuning time, whether the repeats picked the same winner, and
// the spread of the winners' medians (within 2% of each other counts as the same).
//   bench_tuning [device] [repeats] [budget seconds per tune]
#include <kiln/jit/tune.hpp>
#include <kiln/kiln.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

namespace tune = kiln::jit::tune;

int main(int argc, char** argv) {
  const kiln::device dev(argc > 1 ? argv[1] : "vulkan:0");
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
  const double budget = argc > 3 ? std::atof(argv[3]) : 20;
  // The host family on the host (wall clock), the device families elsewhere (device clock).
  const bool host = dev.kind() == kiln::device_kind::host;
  auto* be = host ? nullptr : dynamic_cast<kiln::jit::jit_backend*>(kiln::backend_for(dev).get());
  if (!host && !be) {
    std::fprintf(stderr, "%s has no tunable kernels\n", dev.str().c_str());
    return 1;
  }
  std::printf("device %s: %s; clock: %s; %d tunes of %.0f s each per kernel and size\n\n",
              dev.str().c_str(),
              host ? tune::host_identity().c_str() : be->tuning_identity().c_str(),
              host                 ? "wall"
              : be->device_timer() ? "device"
                                   : "wall",
              repeats, budget);
  std::printf("| family | size (log2) | default us (IQR) | winners (of %d tunes) | best winner us "
              "(IQR) | speed-up | winners' spread | tune s (median) |\n|---|---|---|---|---|---|"
              "---|---|\n",
              repeats);
  struct job {
    const char* family;
    std::int64_t rows, cols;
  };
  const std::vector<job> jobs =
      host ? std::vector<job>{{"host", 1, 1 << 14}, {"host", 1, 1 << 18}, {"host", 1, 1 << 22}}
           : std::vector<job>{{"elementwise", 1, 1 << 14}, {"elementwise", 1, 1 << 18},
                              {"elementwise", 1, 1 << 22}, {"reduction", 4096, 16},
                              {"reduction", 256, 4096},    {"reduction", 1, 1 << 22}};
  const std::string dir = std::filesystem::temp_directory_path().string() + "/kiln-bench-tuning";
  std::filesystem::create_directories(dir);
  for (const job& jb : jobs) {
    kiln::tensor<float> x = kiln::random::normal<float>({jb.rows, jb.cols}, 1).to(dev);
    kiln::tensor<float> y = kiln::random::normal<float>({jb.rows, jb.cols}, 2).to(dev);
    const bool ew = std::string(jb.family) != "reduction";
    auto f = [&] {
      return ew ? kiln::tensor<float>(x * y + kiln::sin(x))
                : kiln::tensor<float>(kiln::sum(x * y, {1}));
    };
    std::vector<tune::config> winners;
    std::vector<double> seconds;
    kiln::tune_report last;
    for (int r = 0; r < repeats; ++r) {
      kiln::tune_options o;
      o.db = dir + "/run" + std::to_string(r) + ".kdb";
      std::filesystem::remove(o.db);
      o.budget_seconds = budget;
      o.seed = std::uint64_t(r + 1);
      last = kiln::tune(f, o);
      winners.push_back(last.result.chosen);
      seconds.push_back(last.result.seconds);
      std::filesystem::remove(o.db);
    }
    // The distinct winners and the default, re-timed interleaved under forced configs.
    std::set<tune::config> distinct(winners.begin(), winners.end());
    distinct.insert(last.result.fallback);
    std::map<tune::config, std::vector<double>> samples;
    tune::launch_hook probe;
    {
      kiln::detail::hook_scope s(probe);
      (void)f();
    }
    const auto site = probe.seen.front();
    for (int round = 0; round < 31; ++round)
      for (const auto& c : distinct) {
        tune::launch_hook h;
        h.force = &c;
        h.family = site.sp->family();
        h.kernel = site.kernel;
        kiln::detail::hook_scope s(h);
        if (be) {
          be->timer_begin();
          (void)f();
          samples[c].push_back(be->timer_end_ns());
        } else {
          const auto t0 = std::chrono::steady_clock::now();
          (void)f();
          samples[c].push_back(
              std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0)
                  .count());
        }
      }
    std::map<tune::config, tune::timing> t;
    for (auto& [c, s] : samples)
      t[c] = tune::summarize(s);
    const tune::space& sp = *site.sp;
    const tune::timing& d = t[last.result.fallback];
    std::string names;
    std::map<tune::config, int> count;
    for (const auto& w : winners)
      ++count[w];
    tune::config best = winners.front();
    double lo = 1e300, hi = 0;
    for (const auto& [c, k] : count) {
      names += (names.empty() ? "" : "; ") + sp.format(c) + " x" + std::to_string(k);
      lo = std::min(lo, t[c].median_ns);
      hi = std::max(hi, t[c].median_ns);
      if (t[c].median_ns < t[best].median_ns) best = c;
    }
    std::sort(seconds.begin(), seconds.end());
    std::printf("| %s | %s | %.1f (%.1f) | %s | %.1f (%.1f) | %.2fx | %.1f%% | %.1f |\n", jb.family,
                last.size.c_str(), d.median_ns / 1e3, d.iqr_ns / 1e3, names.c_str(),
                t[best].median_ns / 1e3, t[best].iqr_ns / 1e3, d.median_ns / t[best].median_ns,
                100.0 * (hi / lo - 1), seconds[seconds.size() / 2]);
    std::fflush(stdout);
  }
}
