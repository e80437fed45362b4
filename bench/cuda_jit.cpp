// The fusion JIT on a CUDA device, printed as markdown (device times from CUDA events):
//  1. device-to-device copy bandwidth (cuMemcpyDtoDAsync, read + write), the ceiling;
//  2. fused elementwise chains of 2, 4, 8, 16 ops on 2^26 f32: one generated kernel each,
//     its bandwidth and the fraction of the copy's (target: at least 90%);
//  3. NVRTC cold compile per kernel (8 new kernels, fresh disk cache), and the whole first
//     evaluation;
//  4. time to the first result in a fresh process with the disk cache cold, then warm (the
//     cubin loaded from disk instead of compiled), and the load itself;
//  5. the host's cost of one evaluation on a cache hit (small tensors, no waiting between).
// The peers (CuPy, PyTorch eager, torch.compile) on the same chains: bench/cuda_peers.py.
// Usage: bench_cuda_jit [--child]. Exits 0 with the reason where cuda:0 is unavailable.
#include <kiln/jit/cuda/backend.hpp>
#include <kiln/jit/tune.hpp>
#include <kiln/kiln.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

namespace cu = kiln::jit::cuda;
using clock_type = std::chrono::steady_clock;
double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// N alternating ops: ((x * 0.999 + 0.5) * 0.999 + 0.5) ..., as in bench/cuda_peers.py.
template <int N, class X>
auto chain(const X& x) {
  if constexpr (N == 0)
    return x;
  else if constexpr (N % 2 == 1)
    return chain<N - 1>(x) * 0.999f;
  else
    return chain<N - 1>(x) + 0.5f;
}

// Median device time of `f` over 10 runs after a warm-up, in ms.
template <class F>
double device_ms(const cu::context& ctx, F&& f) {
  f();
  std::vector<double> ms;
  for (int rep = 0; rep < 10; ++rep) {
    cu::context::timer t(ctx);
    t.start();
    f();
    t.stop();
    ms.push_back(t.elapsed_ms());
  }
  return median(ms);
}

template <int N>
void fused(const cu::context& ctx, const kiln::device& dev, std::int64_t n, double copy_gbs) {
  const auto x = kiln::random::uniform<float>({n}, 1, -1, 1, dev);
  kiln::tensor<float> y = kiln::empty<float>({n}, dev);
  const double ms = device_ms(ctx, [&] { y = chain<N>(x); });
  const double gbs = 2.0 * 4 * double(n) / ms / 1e6;
  std::printf("| %d | %.3f | %.1f GB/s | %.1f%% |\n", N, ms, gbs, 100 * gbs / copy_gbs);
}

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
  return kiln::maximum(x, 0.0f) - x;
}
template <class X>
auto expr_k(const X& x, std::integral_constant<int, 6>) {
  return kiln::sigmoid(x) * x;
}
template <class X>
auto expr_k(const X& x, std::integral_constant<int, 7>) {
  return kiln::erf(x) + kiln::atan(x);
}

template <int... K>
std::vector<double> first_evaluations(const kiln::device& dev, std::integer_sequence<int, K...>) {
  const auto x = kiln::random::uniform<float>({4096}, 2, -1, 1, dev);
  kiln::synchronize(dev);
  std::vector<double> ms;
  auto one = [&](auto k) {
    const auto a = clock_type::now();
    const kiln::tensor<float> y = expr_k(x, k);
    (void)y.at({0});
    ms.push_back(ms_since(a));
  };
  (one(std::integral_constant<int, K>{}), ...);
  return ms;
}

// One timed first evaluation; then one more kernel made through the backend directly, whose
// compile_ms is the cubin load alone when it came from the disk cache.
int child(const kiln::device& dev) {
  const auto a = clock_type::now();
  const auto x = kiln::full<float>({4096}, 0.5f, dev);
  const kiln::tensor<float> y = kiln::exp(-x * x) * kiln::sin(x) + 1.0f;
  const float v = y.at({17});
  const double first = ms_since(a);
  auto& be = dynamic_cast<kiln::jit::jit_backend&>(*kiln::backend_for(dev));
  const auto e = kiln::cbrt(x) * 2.0f;
  kiln::jit::leaf_table lt;
  kiln::jit::collect(lt, e);
  const auto k = be.compile(kiln::jit::lower(lt.pattern, false, 1, false, e));
  std::printf("%.3f %d %.3f\n", first, int(k->from_cache), k->compile_ms);
  return v > 0 ? 0 : 1;
}
struct child_result {
  double first_ms = -1, load_ms = -1;
  int from_disk = 0;
};
child_result run_child(const std::string& self) {
  child_result r;
  FILE* p = popen((self + " --child").c_str(), "r");
  if (!p) return r;
  if (std::fscanf(p, "%lf %d %lf", &r.first_ms, &r.from_disk, &r.load_ms) != 3) r = {};
  pclose(p);
  return r;
}

} // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  const kiln::device dev(kiln::device_kind::cuda, 0);
  std::string desc;
  bool available = false;
  for (const auto& d : kiln::devices())
    if (d.device == dev) {
      desc = d.description;
      available = d.available;
    }
  if (!available) {
    std::printf("cuda:0 is unavailable, nothing to measure: %s\n", desc.c_str());
    return 0;
  }
  if (argc > 1 && std::string(argv[1]) == "--child") return child(dev);
  auto be = std::dynamic_pointer_cast<cu::cuda_backend>(kiln::backend_for(dev));
  const cu::context& ctx = *be->ctx();

  const fs::path scratch =
      fs::temp_directory_path() / ("kiln-cuda-bench-" + std::to_string(getpid()));
  fs::create_directories(scratch / "dump");
  setenv("KILN_CACHE_DIR", (scratch / "kernels").c_str(), 1);
  setenv("KILN_DUMP_KERNELS", (scratch / "dump").c_str(), 1);
  std::printf("### Fusion JIT on cuda:0 (%s)\n\n", be->describe().c_str());

  // 3. cold compiles first, while the disk cache is empty.
  const auto firsts = first_evaluations(dev, std::make_integer_sequence<int, 8>{});
  std::vector<double> nvrtc_ms;
  for (const auto& f : fs::directory_iterator(scratch / "dump")) {
    std::ifstream in(f.path());
    std::stringstream ss;
    ss << in.rdbuf();
    nvrtc_ms.push_back(cu::compile_for(ss.str(), be->target()).compile_ms);
  }
  std::printf("#### Cold compile of a new kernel (%zu kernels, medians)\n\n| NVRTC (%s) | whole "
              "first evaluation |\n|---|---|\n| %.1f ms | %.1f ms |\n\n",
              nvrtc_ms.size(), be->target().option().c_str(), median(nvrtc_ms), median(firsts));

  // 4. fresh processes: cold disk cache, then warm (cubin from disk).
  const std::string self = fs::canonical("/proc/self/exe").string();
  setenv("KILN_CACHE_DIR", (scratch / "kernels-child").c_str(), 1);
  unsetenv("KILN_DUMP_KERNELS");
  const auto cold = run_child(self), warm = run_child(self), warm2 = run_child(self);
  std::printf("#### A fresh process: time to the first result (context, upload, one kernel, "
              "read back), and one kernel's cubin load from the disk cache\n\n"
              "| disk cache cold | warm | warm again | cubin load (disk + cuModuleLoadData) |\n"
              "|---|---|---|---|\n| %.1f ms | %.1f ms | %.1f ms | %s |\n\n",
              cold.first_ms, warm.first_ms, warm2.first_ms,
              warm.from_disk ? (std::to_string(warm.load_ms) + " ms").c_str() : "not from disk");

  // 1. the ceiling: device-to-device copy.
  const std::int64_t n = std::int64_t{1} << 26;
  const auto src = kiln::random::uniform<float>({n}, 7, -1, 1, dev);
  auto dst = kiln::empty<float>({n}, dev);
  const double copy_ms = device_ms(ctx, [&] {
    be->copy(src.storage()->handle(), 0, dst.storage()->handle(), 0, std::size_t(n) * 4);
  });
  const double copy_gbs = 2.0 * 4 * double(n) / copy_ms / 1e6;
  std::printf("#### Fused chains, 2^26 f32, device time (CUDA events), medians of 10\n\n");
  std::printf("Device-to-device copy (cuMemcpyDtoDAsync, read + write): %.3f ms, %.1f GB/s\n\n",
              copy_ms, copy_gbs);
  std::printf("| ops | ms | bandwidth | of the copy's |\n|---|---|---|---|\n");
  fused<2>(ctx, dev, n, copy_gbs);
  fused<4>(ctx, dev, n, copy_gbs);
  fused<8>(ctx, dev, n, copy_gbs);
  fused<16>(ctx, dev, n, copy_gbs);

  // 2b. the elementwise family's launch shapes forced on the 2-op chain (what kiln::tune
  // searches): vector loads and units per trip against the defaults.
  {
    namespace tune = kiln::jit::tune;
    const auto x = kiln::random::uniform<float>({n}, 1, -1, 1, dev);
    kiln::tensor<float> y = kiln::empty<float>({n}, dev);
    tune::launch_hook probe;
    {
      const kiln::detail::hook_scope scope(probe);
      y = chain<2>(x);
    }
    if (probe.seen.empty()) return 1; // (a pass launches one kernel: a broken hook)
    const tune::launch_site site = probe.seen.front();
    std::printf("\n#### The 2-op chain under forced launch shapes (the elementwise family)\n\n"
                "| vector | per invocation | workgroup | groups | ms | of the copy's |\n"
                "|---|---|---|---|---|---|\n");
    struct shape {
      std::int64_t vector, per, workgroup, groups;
    };
    const tune::config d = site.sp->defaults();
    for (const shape sh : {shape{1, 1, 0, 0}, shape{2, 1, 0, 0}, shape{4, 1, 0, 0},
                           shape{1, 4, 0, 0}, shape{4, 2, 0, 0}, shape{8, 1, 0, 0},
                           shape{4, 1, 128, 0}, shape{4, 1, 0, 16384}, shape{4, 1, 512, 1024}}) {
      tune::config c = d;
      c[tune::ew::vector] = sh.vector;
      c[tune::ew::per_invocation] = sh.per;
      if (sh.workgroup) c[tune::ew::workgroup] = sh.workgroup;
      if (sh.groups) c[tune::ew::groups] = sh.groups;
      tune::launch_hook h;
      h.force = &c;
      h.family = "elementwise";
      h.kernel = site.kernel;
      const kiln::detail::hook_scope scope(h);
      const double ms = device_ms(ctx, [&] { y = chain<2>(x); });
      const double gbs = 2.0 * 4 * double(n) / ms / 1e6;
      std::printf("| %ld | %ld | %ld | %ld | %.3f | %.1f%% |\n", long(c[tune::ew::vector]),
                  long(c[tune::ew::per_invocation]), long(c[tune::ew::workgroup]),
                  long(c[tune::ew::groups]), ms, 100 * gbs / copy_gbs);
    }
  }

  // 5. host cost of a cached evaluation.
  {
    const auto a = kiln::random::uniform<float>({256}, 3, -1, 1, dev);
    const auto b = kiln::random::uniform<float>({256}, 4, -1, 1, dev);
    kiln::tensor<float> z = kiln::empty<float>({256}, dev);
    z = a * b + 1.0f;
    be->synchronize();
    std::vector<double> per;
    for (int rep = 0; rep < 7; ++rep) {
      const int evals = 20000;
      const auto t = clock_type::now();
      for (int i = 0; i < evals; ++i)
        z = a * b + float(i);
      per.push_back(ms_since(t) * 1e3 / evals);
      be->synchronize();
    }
    std::printf("\n#### Host cost of one evaluation on a cache hit (256 f32, `z = a * b + s`, "
                "a new s each time)\n\n| µs per evaluation (launch included) |\n|---|\n| %.2f |\n",
                median(per));
  }
  std::error_code ec;
  fs::remove_all(scratch, ec);
  return 0;
}
