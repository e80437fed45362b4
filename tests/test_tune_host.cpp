// The host family's choice in a program that evaluates only on the host: no device launch
// ever reads the tuning database there, so the first host pass must. A fresh process (this
// test binary again, running only the hidden child case) evaluates a host pass with a
// database holding a choice for it, and reports whether the pass took it; with the database
// switched off (the tune setting) it must not. A kernel-cache folder that cannot be used
// leaves the host-only program running on with the defaults.
#include "support.hpp"

#include "child_process.hpp"
#include "kiln/jit/tune.hpp"

#include <filesystem>
#include <unistd.h>

namespace tune = kiln::jit::tune;

namespace {

const std::int64_t n = 1 << 18;

kiln::tensor<double> the_pass(const kiln::tensor<double>& x) {
  return kiln::tensor<double>(x * 3.0 + kiln::exp(x));
}

int child(const std::vector<std::string>& env) {
  return test::run_child(env, "[.host_only_child]");
}

} // namespace

// The child: one host pass, nothing on any device; exit status 10 where it took a tuned
// choice with one thread, 20 where it took the defaults, 30 otherwise.
TEST_CASE("host-only child", "[.host_only_child]") {
  const kiln::tensor<double> x = kiln::random::normal<double>({n}, 3);
  const auto y = the_pass(x);
  const auto ys = y.to_vector();
  const auto xs = x.to_vector();
  for (std::size_t i = 0; i < ys.size(); ++i)
    if (std::abs(ys[i] - (3 * xs[i] + std::exp(xs[i]))) > 1e-12 * (1 + std::abs(ys[i])))
      std::_Exit(30);
  const auto& last = tune::last_choice("host");
  if (last.tuned && last.cfg[tune::hp::threads] == 1) std::_Exit(10);
  // Never asked (nothing tuned for this host: the pass stopped asking), or the defaults.
  if (last.family.empty() || (!last.tuned && last.cfg == tune::host_tuning_space().defaults()))
    std::_Exit(20);
  std::_Exit(30);
}

TEST_CASE("tuning on the host: a host-only program takes the database's choice at its first "
          "pass, and the defaults with the database off or no usable folder",
          "[tune]") {
  // The pass's kernel id and size bucket, as the child will see them (the same binary).
  const kiln::tensor<double> x = kiln::random::normal<double>({n}, 3);
  tune::launch_hook probe;
  {
    kiln::detail::hook_scope s(probe);
    (void)the_pass(x);
  }
  REQUIRE(probe.seen.size() == 1);
  const auto& site = probe.seen.front();
  const std::string dir = std::filesystem::temp_directory_path().string() + "/kiln-tune-host-" +
                          std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string db = dir + "/tuning.kdb";
  std::filesystem::remove(db);
  {
    tune::database d(db);
    tune::config c = site.sp->defaults();
    c[tune::hp::threads] = 1;
    tune::record r;
    r.kind = 'c';
    r.device = site.device;
    r.family = "host";
    r.kernel = site.kernel;
    r.size = tune::format_bucket(site.bucket);
    r.config = site.sp->format(c);
    r.median_ns = 1000;
    r.runs = 5;
    d.append(r);
  }
  CHECK(child({"KILN_TUNE_DB=" + db, "-KILN_TUNE"}) == 10);
  CHECK(child({"KILN_TUNE_DB=" + db, "KILN_TUNE=off"}) == 20);
  // No database named and a kernel-cache folder that cannot be made: the defaults.
  CHECK(child({"-KILN_TUNE_DB", "-KILN_TUNE", "KILN_CACHE_DIR=/proc/kiln-cannot-be-here"}) == 20);
  std::filesystem::remove_all(dir);
}
