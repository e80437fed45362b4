// The fusion JIT on a Vulkan device (here lavapipe, Vulkan on the CPU), printed as markdown:
//  1. fused vs unfused elementwise chains of 2, 4, 8, 16 ops on 2^22 f32: one generated
//     kernel against one kernel per op with temporaries (medians of 7, after a warm-up);
//  2. cold compile of a new kernel (fresh kernel and Mesa caches): GLSL -> SPIR-V by
//     shaderc, and the rest of the first evaluation (pipeline, the driver's compile at the
//     first dispatch, the run itself), per kernel;
//  3. time to the first result in a fresh process, with the disk cache cold and then warm;
//  4. the host's cost of one evaluation on a cache hit (small tensors, no waiting between).
// Usage: bench_vulkan_jit [--child]   (--child: one timed first evaluation, for part 3)
#include <kiln/kiln.hpp>
// The GLSL compiler itself (part of the device runtime, not of kiln.hpp): timed on its own.
#include <kiln/jit/vulkan/shaderc.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;
double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// N alternating ops: ((x * a + b) * a + b) ...
template <int N, class X>
auto chain(const X& x) {
  if constexpr (N == 0)
    return x;
  else if constexpr (N % 2 == 1)
    return chain<N - 1>(x) * 0.999f;
  else
    return chain<N - 1>(x) + 0.5f;
}

template <int N>
void fused_vs_unfused(const kiln::device& dev, std::int64_t n) {
  const auto x = kiln::random::uniform<float>({n}, 1, -1, 1, dev);
  kiln::tensor<float> y = kiln::empty<float>({n}, dev), t0 = kiln::empty<float>({n}, dev),
                      t1 = kiln::empty<float>({n}, dev);
  auto unfused = [&] { // one kernel per op, each through a temporary
    t0 = x * 0.999f;
    for (int k = 2; k <= N; ++k) {
      if (k % 2 == 1)
        t1 = t0 * 0.999f;
      else
        t1 = t0 + 0.5f;
      std::swap(t0, t1);
    }
  };
  std::vector<double> f, u;
  for (int rep = 0; rep < 8; ++rep) {
    auto a = clock_type::now();
    y = chain<N>(x);
    kiln::synchronize(dev);
    if (rep) f.push_back(ms_since(a));
    a = clock_type::now();
    unfused();
    kiln::synchronize(dev);
    if (rep) u.push_back(ms_since(a));
  }
  // The unfused result must be the fused one (same ops in the same order, exact).
  const auto yf = y.to_vector(), yu = t0.to_vector();
  const bool same = yf == yu;
  const double fm = median(f), um = median(u);
  std::printf("| %d | %.2f | %.2f | %.2fx | %.1f GB/s | %s |\n", N, fm, um, um / fm,
              2.0 * 4 * double(n) / fm / 1e6, same ? "equal" : "DIFFER");
}

// Distinct expression types: each is a new kernel.
template <class X>
auto expr_k(const X& x, std::integral_constant<int, 0>) {
  return kiln::sin(x) * x;
}
template <class X>
auto expr_k(const X& x, std::integral_constant<int, 1>) {
  return kiln::exp(-x * x);
}
template <class X>
auto expr_k(const X& x, std::integral_constant<int, 2>) {
  return kiln::tanh(x) + kiln::cos(x);
}
template <class X>
auto expr_k(const X& x, std::integral_constant<int, 3>) {
  return kiln::sqrt(x * x + 1.0f);
}
template <class X>
auto expr_k(const X& x, std::integral_constant<int, 4>) {
  return kiln::log1p(kiln::abs(x)) * 3.0f;
}
template <class X>
auto expr_k(const X& x, std::integral_constant<int, 5>) {
  return kiln::maximum(x, 0.0f) - x * 0.1f;
}
template <class X>
auto expr_k(const X& x, std::integral_constant<int, 6>) {
  return kiln::sigmoid(x) * x;
}
template <class X>
auto expr_k(const X& x, std::integral_constant<int, 7>) {
  return kiln::erf(x) + kiln::atan(x);
}

// The first evaluation of each new kernel, end to end (compile included), in ms.
template <int... K>
std::vector<double> first_evaluations(const kiln::device& dev, std::integer_sequence<int, K...>) {
  const auto x = kiln::random::uniform<float>({4096}, 2, -1, 1, dev);
  kiln::synchronize(dev);
  std::vector<double> ms;
  auto one = [&](auto k) {
    const auto a = clock_type::now();
    const kiln::tensor<float> y = expr_k(x, k);
    (void)y.at({0}); // waits for the result
    ms.push_back(ms_since(a));
  };
  (one(std::integral_constant<int, K>{}), ...);
  return ms;
}

int child(const kiln::device& dev) {
  const auto a = clock_type::now();
  const auto x = kiln::full<float>({4096}, 0.5f, dev);
  const kiln::tensor<float> y = kiln::exp(-x * x) * kiln::sin(x) + 1.0f;
  const float v = y.at({17});
  std::printf("%.3f %d\n", ms_since(a), int(kiln::jit::compile_count().load()));
  return v > 0 ? 0 : 1;
}

double run_child(const std::string& self) {
  FILE* p = popen((self + " --child").c_str(), "r");
  if (!p) return -1;
  double ms = -1;
  int compiles = -1;
  if (std::fscanf(p, "%lf %d", &ms, &compiles) != 2) ms = -1;
  pclose(p);
  return ms;
}

} // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  kiln::device dev;
  for (const auto& d : kiln::devices())
    if (d.available && d.device.kind() == kiln::device_kind::vulkan) {
      dev = d.device;
      break;
    }
  if (dev.is_host()) {
    std::printf("no Vulkan device: nothing to measure\n");
    return 1;
  }
  if (argc > 1 && std::string(argv[1]) == "--child") return child(dev);

  // Fresh caches for this run (kiln's and Mesa's), so "cold" means cold.
  const fs::path scratch = fs::temp_directory_path() / ("kiln-bench-" + std::to_string(getpid()));
  fs::create_directories(scratch / "dump");
  setenv("KILN_CACHE_DIR", (scratch / "kernels").c_str(), 1);
  setenv("MESA_SHADER_CACHE_DIR", (scratch / "mesa").c_str(), 1);
  setenv("KILN_DUMP_KERNELS", (scratch / "dump").c_str(), 1);

  std::string desc;
  for (const auto& d : kiln::devices())
    if (d.device == dev) desc = d.description;
  std::printf("### Fusion JIT on %s (%s)\n\n", dev.str().c_str(), desc.c_str());
  std::printf("GLSL compiler: %s\n\n", kiln::jit::glsl_compiler::instance().path_name().c_str());

  // 2. cold compiles first, while every cache is empty.
  const auto firsts = first_evaluations(dev, std::make_integer_sequence<int, 8>{});
  std::vector<double> shaderc_ms;
  for (const auto& f : fs::directory_iterator(scratch / "dump")) {
    std::ifstream in(f.path());
    std::stringstream ss;
    ss << in.rdbuf();
    const auto a = clock_type::now();
    (void)kiln::jit::glsl_compiler::instance().compile(ss.str());
    shaderc_ms.push_back(ms_since(a));
  }
  std::printf("#### Cold compile of a new kernel (%zu kernels, medians)\n\n", firsts.size());
  std::printf("| GLSL -> SPIR-V (shaderc) | whole first evaluation | the rest: pipeline, driver "
              "compile at first dispatch, run |\n|---|---|---|\n");
  std::printf("| %.1f ms | %.1f ms | %.1f ms |\n\n", median(shaderc_ms), median(firsts),
              median(firsts) - median(shaderc_ms));

  // 3. fresh processes: cold caches, then warm ones.
  const std::string self = fs::canonical("/proc/self/exe").string();
  setenv("KILN_CACHE_DIR", (scratch / "kernels-child").c_str(), 1);
  setenv("MESA_SHADER_CACHE_DIR", (scratch / "mesa-child").c_str(), 1);
  unsetenv("KILN_DUMP_KERNELS");
  const double cold = run_child(self), warm = run_child(self), warm2 = run_child(self);
  std::printf("#### Time to the first result in a fresh process (device open, upload, one "
              "kernel, read back)\n\n| disk cache cold | warm | warm again |\n|---|---|---|\n"
              "| %.1f ms | %.1f ms | %.1f ms |\n\n",
              cold, warm, warm2);

  // 1. fused vs unfused.
  const std::int64_t n = std::int64_t{1} << 22;
  std::printf("#### Fused vs unfused chains, %lld f32, medians of 7\n\n",
              static_cast<long long>(n));
  std::printf("| ops | fused ms | unfused ms | unfused / fused | fused bandwidth | results |\n"
              "|---|---|---|---|---|---|\n");
  fused_vs_unfused<2>(dev, n);
  fused_vs_unfused<4>(dev, n);
  fused_vs_unfused<8>(dev, n);
  fused_vs_unfused<16>(dev, n);

  // 4. host cost of a cached evaluation: tiny tensors, many evaluations, one wait.
  {
    const auto a = kiln::random::uniform<float>({256}, 3, -1, 1, dev);
    const auto b = kiln::random::uniform<float>({256}, 4, -1, 1, dev);
    kiln::tensor<float> z = kiln::empty<float>({256}, dev);
    z = a * b + 1.0f; // compile outside the timing
    kiln::synchronize(dev);
    std::vector<double> per, waits;
    for (int rep = 0; rep < 7; ++rep) {
      const int evals = 20000;
      auto t = clock_type::now();
      for (int i = 0; i < evals; ++i)
        z = a * b + float(i);
      per.push_back(ms_since(t) * 1e3 / evals);
      t = clock_type::now();
      kiln::synchronize(dev);
      waits.push_back(ms_since(t));
    }
    std::printf("\n#### Host cost of one evaluation on a cache hit (256 f32, `z = a * b + s` "
                "with a new s each time)\n\n");
    std::printf("| µs per evaluation (recording, batched submits included) | wait for 20000 "
                "queued kernels |\n|---|---|\n| %.2f | %.1f ms |\n",
                median(per), median(waits));
    if (z.at({0}) != z.at({0})) return 1; // read back: the results exist
  }
  std::error_code ec;
  fs::remove_all(scratch, ec);
  return 0;
}
