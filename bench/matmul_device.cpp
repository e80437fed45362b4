// Products on a GPU device (issue 33, point 10), printed as markdown; KILN_BENCH_DEVICE names
// the device (default vulkan:0, here lavapipe: Vulkan on the CPU). All contenders of a row
// are timed in the same rounds, in turn, each figure the median of its rounds (each round
// waits for the device):
//  1. f32 C = A B, square: the contraction kernel (default tile) against the same product as
//     the device's fused reduction over broadcast views (what ran before the kernel existed,
//     and what still runs matrix-vector shapes), GFLOP/s;
//  2. the prologue: matmul(relu(x) * mask, w) as one kernel against relu(x) * mask stored
//     first, then the product;
//  3. default tile against the one kiln::tune chooses for that product (a search of the
//     matmul family, measured on the device);
//  4. split-K: a long K over few output tiles cut into parts by the rule (the parts'
//     products, then their sum) against the product computed whole (the family's `split`
//     forced to 1 on the whole product's kernel).
// Usage: bench_matmul_device [--quick]
#include <kiln/jit/tune.hpp>
#include <kiln/kiln.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Times each contender `rounds` times, in turn, after one warm-up call each: medians (s).
// Each call ends with kiln::synchronize on the device.
std::vector<double> race(const kiln::device& d, const std::vector<std::function<void()>>& fs,
                         int rounds) {
  std::vector<std::vector<double>> t(fs.size());
  for (auto& f : fs) {
    f();
    kiln::synchronize(d);
  }
  for (int r = 0; r < rounds; ++r)
    for (std::size_t i = 0; i < fs.size(); ++i) {
      const double t0 = now();
      fs[i]();
      kiln::synchronize(d);
      t[i].push_back(now() - t0);
    }
  std::vector<double> med;
  for (auto& v : t) {
    std::sort(v.begin(), v.end());
    med.push_back(v[v.size() / 2]);
  }
  return med;
}

// The product as the device's fused reduction: sum over k of A[i, k] B[k, j], read through
// views of shape [m, n, k] with stride 0 along the dim each operand lacks.
kiln::tensor<float> as_reduction(const kiln::tensor<float>& a, const kiln::tensor<float>& b) {
  const std::int64_t m = a.shape()[0], k = a.shape()[1], n = b.shape()[1];
  const kiln::tensor<float> va(a.storage(), kiln::layout{{m, n, k}, {k, 0, 1}, a.offset()});
  const kiln::tensor<float> vb(b.storage(), kiln::layout{{m, n, k}, {0, 1, n}, b.offset()});
  return kiln::sum(va * vb, kiln::axes(-1));
}

// f() with the matmul family's `split` forced to `parts` on the whole product's kernel (the
// first matmul site f shows a tuner); 0: as the rule chooses.
template <class F>
void with_split(const kiln::jit::tune::launch_site& whole, std::int64_t parts, F&& f) {
  if (parts == 0) {
    f();
    return;
  }
  kiln::jit::tune::config c = whole.sp->defaults();
  c[kiln::jit::tune::mm::split] = parts;
  kiln::jit::tune::launch_hook h;
  h.force = &c;
  h.family = "matmul";
  h.kernel = whole.kernel;
  const kiln::detail::hook_scope scope(h);
  f();
}

} // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const char* name = std::getenv("KILN_BENCH_DEVICE");
  const kiln::device dev(name ? name : "vulkan:0");
  std::printf("device %s\n\n", dev.str().c_str());
  auto rounds = [&](double flops) { return std::clamp(int(2e10 / flops), quick ? 3 : 5, 15); };

  std::printf("| f32 n x n x n | tile kernel GFLOP/s | as a reduction GFLOP/s | speed-up |\n"
              "|---|---|---|---|\n");
  for (std::int64_t s : {64, 128, 256, 512, 1024}) {
    if (quick && s > 512) break;
    const auto a = kiln::random::normal<float>({s, s}, 1).to(dev);
    const auto b = kiln::random::normal<float>({s, s}, 2).to(dev);
    kiln::tensor<float> c = kiln::zeros<float>({s, s}).to(dev), r = c;
    const double flops = 2.0 * s * s * s;
    const auto t = race(dev, {[&] { c = kiln::matmul(a, b); }, [&] { r = as_reduction(a, b); }},
                        rounds(flops));
    std::printf("| %ld | %.2f | %.2f | %.2fx |\n", long(s), flops / t[0] * 1e-9,
                flops / t[1] * 1e-9, t[1] / t[0]);
  }

  std::printf("\n| f32 m x n x k | relu(x) * mask @ w, one kernel (ms) | stored first, then the "
              "product (ms) | speed-up |\n|---|---|---|---|\n");
  for (std::int64_t s : {256, 512}) {
    const auto x = kiln::random::normal<float>({s, s}, 3).to(dev);
    const auto w = kiln::random::normal<float>({s, s}, 4).to(dev);
    const auto mask =
        kiln::cast<float>(kiln::random::uniform<float>({s, s}, 5) < 0.5f).eval().to(dev);
    kiln::tensor<float> y = kiln::zeros<float>({s, s}).to(dev), h = y;
    const auto t = race(dev,
                        {[&] { y = kiln::matmul(kiln::relu(x) * mask, w); },
                         [&] {
                           h = kiln::relu(x) * mask;
                           y = kiln::matmul(h, w);
                         }},
                        rounds(2.0 * s * s * s));
    std::printf("| %ld | %.3f | %.3f | %.2fx |\n", long(s), t[0] * 1e3, t[1] * 1e3, t[1] / t[0]);
  }

  std::printf("\n| f32 n x n x n | default tile (ms) | tuned (ms) | tuned tile | speed-up |\n"
              "|---|---|---|---|---|\n");
  for (std::int64_t s : {256, 512}) {
    const auto a = kiln::random::normal<float>({s, s}, 6).to(dev);
    const auto b = kiln::random::normal<float>({s, s}, 7).to(dev);
    kiln::tune_options o;
    o.budget_seconds = quick ? 20 : 60;
    o.force = true;
    o.db = "/tmp/kiln-bench-matmul-device.db";
    const kiln::tune_report rep =
        kiln::tune([&] { return kiln::tensor<float>(kiln::matmul(a, b)); }, o);
    std::printf("| %ld | %.3f | %.3f | %s | %.2fx |\n", long(s), rep.result.default_ns * 1e-6,
                rep.result.chosen_ns * 1e-6, rep.chosen.c_str(),
                rep.result.default_ns / rep.result.chosen_ns);
  }

  std::printf("\n| f32 m x n x k | split by the rule (ms) | parts | whole (ms) | speed-up |\n"
              "|---|---|---|---|---|\n");
  struct mnk {
    std::int64_t m, n, k;
  };
  for (const mnk p : {mnk{32, 32, 8192}, mnk{64, 64, 65536}, mnk{16, 16, 32768},
                      mnk{128, 128, 16384}, mnk{256, 256, 4096}}) {
    const auto a = kiln::random::normal<float>({p.m, p.k}, 8).to(dev);
    const auto b = kiln::random::normal<float>({p.k, p.n}, 9).to(dev);
    kiln::tensor<float> c = kiln::zeros<float>({p.m, p.n}).to(dev);
    kiln::jit::tune::launch_hook probe;
    {
      const kiln::detail::hook_scope scope(probe);
      c = kiln::matmul(a, b);
    }
    const kiln::jit::tune::launch_site whole = probe.seen.front();
    const std::int64_t chunk = kiln::detail::split_k_chunk(
        0, 1, p.m, p.n, p.k, kiln::executor_of(*a.storage(), "bench").concurrent_groups());
    const auto t = race(dev,
                        {[&] { with_split(whole, 0, [&] { c = kiln::matmul(a, b); }); },
                         [&] { with_split(whole, 1, [&] { c = kiln::matmul(a, b); }); }},
                        rounds(2.0 * p.m * p.n * p.k));
    std::printf("| %ld x %ld x %ld | %.3f | %ld | %.3f | %.2fx |\n", long(p.m), long(p.n),
                long(p.k), t[0] * 1e3, long(chunk ? (p.k + chunk - 1) / chunk : 1), t[1] * 1e3,
                t[1] / t[0]);
  }
}
