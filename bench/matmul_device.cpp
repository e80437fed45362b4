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
//  5. --large (a GPU): f32 and f16 C = A B at n = 1024, 2048, 4096 (kiln's kernel with its
//     default tile, then the tile kiln::tune chooses at 4096; the device's provider, cuBLAS on
//     CUDA), and gelu(matmul(x, w) + b) at M = N = 4096 as one kernel against the product
//     (kiln's or the provider's) then a pass; the PyTorch and CuPy peers of the same rows are
//     bench/matmul_peers.py, run beside it.
//  6. --layer: only the layer's row of --large (a layer's value and gradients against its
//     forward product).
//  7. --tiles: only the tile configurations of --large (f32 4096^3, each against the
//     provider's product in the same run).
// Usage: bench_matmul_device [--quick | --large | --layer | --tiles]
#include <kiln/jit/backend/jit_backend.hpp>
#include <kiln/jit/tune.hpp>
#include <kiln/kiln.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
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

// The first launch f makes, as a tuner sees it (its kernel and family), or none.
template <class F>
std::optional<kiln::jit::tune::launch_site> first_launch(F&& f) {
  kiln::jit::tune::launch_hook probe;
  {
    const kiln::detail::hook_scope scope(probe);
    f();
  }
  if (probe.seen.empty()) return std::nullopt;
  return probe.seen.front();
}

// f() with configuration c forced on the launches of site's kernel.
template <class F>
void with_config(const kiln::jit::tune::launch_site& site, const kiln::jit::tune::config& c,
                 F&& f) {
  kiln::jit::tune::launch_hook h;
  h.force = &c;
  h.family = site.sp->family();
  h.kernel = site.kernel;
  const kiln::detail::hook_scope scope(h);
  f();
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
  with_config(whole, c, f);
}

// Products the size of a GPU: TFLOP/s of kiln's kernel (providers off: the default tile, then
// the tile kiln::tune chooses at 4096) and of the product with the device's provider (cuBLAS
// on CUDA, where one loads), and the fused epilogue.
template <class T>
void large_products(const kiln::device& dev, const char* dtype) {
  std::printf("| %s n x n x n | kiln default tile TFLOP/s | kiln tuned TFLOP/s | tuned tile | "
              "with the provider TFLOP/s |\n|---|---|---|---|---|\n",
              dtype);
  for (std::int64_t s : {1024, 2048, 4096}) {
    const auto a = kiln::cast<T>(kiln::random::normal<float>({s, s}, 1)).eval().to(dev);
    const auto b = kiln::cast<T>(kiln::random::normal<float>({s, s}, 2)).eval().to(dev);
    kiln::tensor<T> c = kiln::zeros<T>({s, s}).to(dev);
    const double flops = 2.0 * s * s * s;
    const kiln::blas_use was = kiln::set_blas_use(kiln::blas_use::never);
    const auto t = race(dev, {[&] { c = kiln::matmul(a, b); }}, 10);
    std::string tuned = "| |";
    if (s == 4096) {
      kiln::tune_options o;
      o.budget_seconds = 15;
      o.force = true;
      o.db = "/tmp/kiln-bench-matmul-large.db";
      const kiln::tune_report rep =
          kiln::tune([&] { return kiln::tensor<T>(kiln::matmul(a, b)); }, o);
      char buf[160];
      std::snprintf(buf, sizeof buf, "| %.2f | %s |", flops / rep.result.chosen_ns * 1e-3,
                    rep.chosen.c_str());
      tuned = buf;
    }
    kiln::set_blas_use(kiln::blas_use::automatic);
    const auto p = race(dev, {[&] { c = kiln::matmul(a, b); }}, 10);
    kiln::set_blas_use(was);
    std::printf("| %ld | %.2f %s %.2f |\n", long(s), flops / t[0] * 1e-12, tuned.c_str(),
                flops / p[0] * 1e-12);
  }
}

// gelu(x w + b) over square sizes: kiln's fused kernel against the provider's product then the
// pass (where the automatic rule switches, device_matmul.hpp's provider_fused_least).
void epilogue_sizes(const kiln::device& dev) {
  std::printf("\n| f32 n x n x n | kiln fused (ms) | provider product, then the pass (ms) | "
              "automatic (ms) | provider / kiln |\n|---|---|---|---|---|\n");
  using u = kiln::blas_use;
  for (std::int64_t s : {64, 128, 256, 512, 1024, 2048}) {
    const auto x = kiln::random::normal<float>({s, s}, 3).to(dev);
    const auto w = kiln::random::normal<float>({s, s}, 4).to(dev);
    const auto bias = kiln::random::normal<float>({s}, 5).to(dev);
    kiln::tensor<float> y = kiln::zeros<float>({s, s}).to(dev);
    auto with = [&](u use) {
      return [&, use] {
        const u was = kiln::set_blas_use(use);
        y = kiln::gelu(kiln::matmul(x, w) + bias);
        kiln::set_blas_use(was);
      };
    };
    const auto t = race(dev, {with(u::never), with(u::always), with(u::automatic)}, 15);
    std::printf("| %ld | %.4f | %.4f | %.4f | %.2fx |\n", long(s), t[0] * 1e3, t[1] * 1e3,
                t[2] * 1e3, t[0] / t[1]);
  }
}

// A layer's value and gradients, loss = sum(gelu(x w + b) * r), against its forward product,
// as a user runs them (the provider as blas_use::automatic chooses).
void large_layer(const kiln::device& dev) {
  std::printf("\n| f32 layer m x n x k | forward product (ms) | value and gradients dW, db (ms) | "
              "ratio |\n|---|---|---|---|\n");
  for (std::int64_t s : {1024, 2048, 4096}) {
    const auto x = kiln::random::normal<float>({s, s}, 1).to(dev);
    const auto w = kiln::random::normal<float>({s, s}, 2).to(dev);
    const auto b = kiln::random::normal<float>({s}, 3).to(dev);
    const auto r = kiln::random::normal<float>({s, s}, 4).to(dev);
    kiln::tensor<float> p = kiln::zeros<float>({s, s}).to(dev), l = kiln::zeros<float>({}).to(dev),
                        gw = kiln::zeros<float>({s, s}).to(dev),
                        gb = kiln::zeros<float>({s}).to(dev);
    const auto loss = kiln::sum(kiln::gelu(kiln::matmul(x, w) + b) * r);
    const auto grads = kiln::grad(loss, w, b);
    const auto& dw = std::get<0>(grads);
    const auto& db = std::get<1>(grads);
    const auto t = race(
        dev, {[&] { p = kiln::matmul(x, w); }, [&] { kiln::eval(l = loss, gw = dw, gb = db); }},
        10);
    std::printf("| %ld^3 | %.3f | %.3f | %.2fx |\n", long(s), t[0] * 1e3, t[1] * 1e3, t[1] / t[0]);
  }
}

// Tile configurations of the matmul family forced on kiln's kernel at f32 4096^3 (what
// kiln::tune searches, each measured here in the same run).
void large_tiles(const kiln::device& dev) {
  namespace tune = kiln::jit::tune;
  const std::int64_t s = 4096;
  const auto a = kiln::random::normal<float>({s, s}, 1).to(dev);
  const auto b = kiln::random::normal<float>({s, s}, 2).to(dev);
  kiln::tensor<float> c = kiln::zeros<float>({s, s}).to(dev);
  const kiln::blas_use was = kiln::set_blas_use(kiln::blas_use::never);
  const auto first = first_launch([&] { c = kiln::matmul(a, b); });
  if (!first) return; // (the product launches kiln's kernel: a broken hook)
  const tune::launch_site& site = *first;
  // The provider's product (cuBLAS on CUDA) in the same run, for the ratio.
  double provider = 0;
  {
    kiln::set_blas_use(kiln::blas_use::always);
    const auto r = race(dev, {[&] { c = kiln::matmul(a, b); }}, 10);
    provider = 2.0 * s * s * s / r[0] * 1e-12;
    kiln::set_blas_use(kiln::blas_use::never);
  }
  std::printf("\n| f32 4096^3, tile tm x tn x tk, register tile rm x rn, rows adjacent, stages | "
              "TFLOP/s | vs the provider's %.2f |\n|---|---|---|\n",
              provider);
  struct tile {
    int tm, tn, tk, rm, rn;
  };
  for (const tile t : {tile{64, 64, 8, 4, 4}, tile{64, 64, 8, 8, 8}, tile{128, 128, 8, 8, 8},
                       tile{128, 64, 8, 8, 8}, tile{64, 128, 8, 8, 8}, tile{128, 128, 16, 8, 8},
                       tile{64, 64, 16, 8, 8}, tile{128, 64, 8, 8, 4}, tile{64, 64, 16, 4, 4},
                       tile{32, 32, 8, 2, 2}})
    for (const int adjacent : {0, 1})
      for (const int stages : {1, 2}) {
        tune::config cf = site.sp->defaults();
        cf[tune::mm::tm] = t.tm;
        cf[tune::mm::tn] = t.tn;
        cf[tune::mm::tk] = t.tk;
        cf[tune::mm::rm] = t.rm;
        cf[tune::mm::rn] = t.rn;
        cf[tune::mm::rows_adjacent] = adjacent;
        cf[tune::mm::stages] = stages;
        const std::string why = site.sp->why_illegal(cf);
        if (!why.empty()) {
          std::printf("| %d x %d x %d, %d x %d, %d, %d | (%s) | |\n", t.tm, t.tn, t.tk, t.rm, t.rn,
                      adjacent, stages, why.c_str());
          continue;
        }
        const auto r =
            race(dev, {[&] { with_config(site, cf, [&] { c = kiln::matmul(a, b); }); }}, 10);
        const double tf = 2.0 * s * s * s / r[0] * 1e-12;
        std::printf("| %d x %d x %d, %d x %d, %d, %d | %.2f | %.2fx |\n", t.tm, t.tn, t.tk, t.rm,
                    t.rn, adjacent, stages, tf, provider > 0 ? tf / provider : 0.0);
      }
  kiln::set_blas_use(was);
}

// The device's own time of f (its clock: CUDA events, Vulkan timestamps), median of 10.
template <class F>
double device_ms(const kiln::device& dev, F&& f) {
  auto* be = dynamic_cast<kiln::jit::jit_backend*>(kiln::backend_for(dev).get());
  if (!be || !be->device_timer()) return 0;
  std::vector<double> t;
  for (int i = 0; i < 10; ++i) {
    be->synchronize();
    be->timer_begin();
    f();
    t.push_back(be->timer_end_ns() * 1e-6);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// gelu(x w + b): kiln's fused kernel, kiln's product then the pass, the provider's product then
// the pass (blas_use::always), and the bare products.
void large_epilogue(const kiln::device& dev) {
  std::printf("\n| f32 M = N = 4096, K | kiln fused (ms) | kiln product, then the pass (ms) | "
              "provider product, then the pass (ms) | kiln bare product (ms) | provider bare "
              "product (ms) | device time: kiln fused, kiln bare (ms) |\n"
              "|---|---|---|---|---|---|---|\n");
  const std::int64_t m = 4096;
  for (std::int64_t k : {64, 256, 1024, 4096}) {
    const auto x = kiln::random::normal<float>({m, k}, 3).to(dev);
    const auto w = kiln::random::normal<float>({k, m}, 4).to(dev);
    const auto bias = kiln::random::normal<float>({m}, 5).to(dev);
    kiln::tensor<float> y = kiln::zeros<float>({m, m}).to(dev), h = y;
    auto with = [](kiln::blas_use u, auto f) {
      return [u, f] {
        const kiln::blas_use was = kiln::set_blas_use(u);
        f();
        kiln::set_blas_use(was);
      };
    };
    auto fused = [&] { y = kiln::gelu(kiln::matmul(x, w) + bias); };
    auto split = [&] {
      h = kiln::matmul(x, w);
      y = kiln::gelu(h + bias);
    };
    auto bare = [&] { h = kiln::matmul(x, w); };
    using u = kiln::blas_use;
    const auto t = race(dev,
                        {with(u::never, fused), with(u::never, split), with(u::always, split),
                         with(u::never, bare), with(u::always, bare)},
                        10);
    const double fd = device_ms(dev, with(u::never, fused));
    const double bd = device_ms(dev, with(u::never, bare));
    std::printf("| %ld | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f, %.3f |\n", long(k), t[0] * 1e3,
                t[1] * 1e3, t[2] * 1e3, t[3] * 1e3, t[4] * 1e3, fd, bd);
  }
}

} // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const bool large = argc > 1 && std::strcmp(argv[1], "--large") == 0;
  const bool layer_only = argc > 1 && std::strcmp(argv[1], "--layer") == 0;
  const bool tiles_only = argc > 1 && std::strcmp(argv[1], "--tiles") == 0;
  const char* name = std::getenv("KILN_BENCH_DEVICE");
  const kiln::device dev(name ? name : "vulkan:0");
  std::printf("device %s\n\n", dev.str().c_str());
  if (layer_only) {
    large_layer(dev);
    return 0;
  }
  if (tiles_only) {
    large_tiles(dev);
    return 0;
  }
  if (large) {
    large_products<float>(dev, "f32");
    std::printf("\n");
    large_products<kiln::half>(dev, "f16");
    large_epilogue(dev);
    epilogue_sizes(dev);
    large_layer(dev);
    large_tiles(dev);
    return 0;
  }
  // The rows below measure kiln's own kernel: no provider (cuBLAS on CUDA) takes the products.
  kiln::set_blas_use(kiln::blas_use::never);
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
    const auto launched = first_launch([&] { c = kiln::matmul(a, b); });
    if (!launched) return 1; // (kiln's kernel launches: a broken hook)
    const kiln::jit::tune::launch_site& whole = *launched;
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
