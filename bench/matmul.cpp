// Products on the host (issue 33, point 10): kiln's own kernel against OpenBLAS and Eigen,
// SGEMM and DGEMM, square and with a short contracted dim, on 1 and 2 threads; the fused
// epilogue gelu(x w + b) and prologue relu(x) w against OpenBLAS plus kiln's pass for the
// rest; a network layer's value and gradients against its forward product. All contenders of
// a row are timed in the same rounds, in turn (this machine's speed drifts by 20-30% within
// minutes), and each figure is the median of its rounds. Taking turns, a library whose
// threads spin after a call (OpenBLAS's and OpenMP's do by default) takes the 2 cores from the
// next contender: both are told to sleep at once (OPENBLAS_THREAD_TIMEOUT=4,
// OMP_WAIT_POLICY=passive, unless set: the program runs itself again with them), as kiln's
// pool does after a short spin.
//
// OpenBLAS is opened at run time (libopenblas.so.0; KILN_BENCH_OPENBLAS names another
// file): without it its columns say n/a. Usage: bench_matmul [--quick | --fused | --layer].
#include <kiln/kiln.hpp>

#include <Eigen/Core>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <functional>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

// --- OpenBLAS through dlopen: cblas_[sd]gemm and its thread setting.
struct openblas {
  using sgemm_t = void (*)(int, int, int, int, int, int, float, const float*, int, const float*,
                           int, float, float*, int);
  using dgemm_t = void (*)(int, int, int, int, int, int, double, const double*, int, const double*,
                           int, double, double*, int);
  sgemm_t sgemm = nullptr;
  dgemm_t dgemm = nullptr;
  void (*set_threads)(int) = nullptr;
  std::string config;
  openblas() {
    const char* name = std::getenv("KILN_BENCH_OPENBLAS");
    void* h = dlopen(name ? name : "libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!h) return;
    sgemm = reinterpret_cast<sgemm_t>(dlsym(h, "cblas_sgemm"));
    dgemm = reinterpret_cast<dgemm_t>(dlsym(h, "cblas_dgemm"));
    set_threads = reinterpret_cast<void (*)(int)>(dlsym(h, "openblas_set_num_threads"));
    if (auto cfg = reinterpret_cast<char* (*)()>(dlsym(h, "openblas_get_config"))) config = cfg();
  }
  bool ok() const { return sgemm && dgemm && set_threads; }
  // Row-major C = A B.
  void gemm(int m, int n, int k, const float* a, const float* b, float* c) const {
    sgemm(101, 111, 111, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
  }
  void gemm(int m, int n, int k, const double* a, const double* b, double* c) const {
    dgemm(101, 111, 111, m, n, k, 1.0, a, k, b, n, 0.0, c, n);
  }
};

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Times each contender `rounds` times, in turn, after one warm-up call each: medians (s).
std::vector<double> race(const std::vector<std::function<void()>>& fs, int rounds) {
  std::vector<std::vector<double>> t(fs.size());
  for (auto& f : fs)
    if (f) f();
  for (int r = 0; r < rounds; ++r)
    for (std::size_t i = 0; i < fs.size(); ++i) {
      if (!fs[i]) continue;
      // kiln's helpers spin for 100 us after a pass: a peer's threads starting then would
      // share the cores with them (what made the 2-thread rows of taking turns low).
      kiln::thread_pool::instance().quiesce();
      const double t0 = now();
      fs[i]();
      t[i].push_back(now() - t0);
    }
  std::vector<double> med;
  for (auto& v : t) {
    if (v.empty()) {
      med.push_back(0);
      continue;
    }
    std::sort(v.begin(), v.end());
    med.push_back(v[v.size() / 2]);
  }
  return med;
}

int rounds_for(double flops, bool quick) {
  // About a second per contender (at ~50 GFLOP/s), 5 rounds at least.
  const int r = int(std::clamp(5e10 / std::max(flops, 1.0), 5.0, 200.0));
  return quick ? std::max(3, r / 4) : r;
}

std::string ratio(double a, double b) {
  if (a <= 0 || b <= 0) return "n/a";
  char s[32];
  std::snprintf(s, sizeof s, "%.2f", a / b);
  return s;
}

template <class T>
void plain(const openblas& ob, int threads, std::int64_t m, std::int64_t n, std::int64_t k,
           bool quick) {
  const auto a = kiln::random::normal<T>({m, k}, 1), b = kiln::random::normal<T>({k, n}, 2);
  kiln::tensor<T> c = kiln::zeros<T>({m, n});
  std::vector<T> co(std::size_t(m * n));
  using mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const Eigen::Map<const mat> ea(a.data(), m, k), eb(b.data(), k, n);
  mat ec(m, n);
  const double flops = 2.0 * m * n * k;
  // kiln's own kernel (providers off), then kiln as a user gets it (the default rule may
  // hand the product to the BLAS provider).
  const auto t = race({[&] { c = kiln::matmul(a, b); },
                       ob.ok() ? std::function<void()>([&] {
                         ob.gemm(int(m), int(n), int(k), a.data(), b.data(), co.data());
                       })
                               : nullptr,
                       [&] { ec.noalias() = ea * eb; },
                       [&] {
                         kiln::set_blas_use(kiln::blas_use::automatic);
                         c = kiln::matmul(a, b);
                         kiln::set_blas_use(kiln::blas_use::never);
                       }},
                      rounds_for(flops, quick));
  auto gf = [&](double s) { return s > 0 ? flops / s / 1e9 : 0.0; };
  std::printf("| %s | %d | %ld x %ld x %ld | %.1f | %.1f | %.1f | %s | %s | %.1f |\n",
              sizeof(T) == 4 ? "SGEMM" : "DGEMM", threads, long(m), long(n), long(k), gf(t[0]),
              gf(t[1]), gf(t[2]), ratio(t[1], t[0]).c_str(), ratio(t[2], t[0]).c_str(), gf(t[3]));
}

// gelu(x w + b) and relu(x) w: kiln fused against OpenBLAS with kiln's pass for the rest,
// and the fused product against the bare one.
void fused(const openblas& ob, std::int64_t m, std::int64_t n, std::int64_t k, bool quick) {
  const auto x = kiln::random::normal<float>({m, k}, 1), w = kiln::random::normal<float>({k, n}, 2),
             b = kiln::random::normal<float>({n}, 3);
  kiln::tensor<float> y = kiln::zeros<float>({m, n}), p = kiln::zeros<float>({m, n}),
                      r = kiln::zeros<float>({m, k});
  const int rounds = rounds_for(2.0 * m * n * k, quick);
  const auto e = race({[&] { y = kiln::gelu(kiln::matmul(x, w) + b); },
                       ob.ok() ? std::function<void()>([&] {
                         ob.gemm(int(m), int(n), int(k), x.data(), w.data(), p.data());
                         y = kiln::gelu(p + b);
                       })
                               : nullptr,
                       [&] { p = kiln::matmul(x, w); }},
                      rounds);
  const auto pr =
      race({[&] { y = kiln::matmul(kiln::relu(x), w); }, ob.ok() ? std::function<void()>([&] {
              r = kiln::relu(x);
              ob.gemm(int(m), int(n), int(k), r.data(), w.data(), y.data());
            })
                                                                 : nullptr},
           rounds);
  // A reduction over the product (not fused: the product, then the reduction): what it
  // costs on top of the bare product.
  kiln::tensor<float> cs = kiln::zeros<float>({n});
  const auto red = race(
      {[&] { cs = kiln::sum(kiln::matmul(x, w), {0}); }, [&] { p = kiln::matmul(x, w); }}, rounds);
  std::printf("| %ld x %ld x %ld | %.3f | %.3f | %s | %.3f | %s | %.3f | %.3f | %s | %.3f | %s |\n",
              long(m), long(n), long(k), e[0] * 1e3, e[1] * 1e3, ratio(e[1], e[0]).c_str(),
              e[2] * 1e3, ratio(e[0], e[2]).c_str(), pr[0] * 1e3, pr[1] * 1e3,
              ratio(pr[1], pr[0]).c_str(), red[0] * 1e3, ratio(red[0], red[1]).c_str());
}

// A layer's value and gradients, loss = sum(gelu(x w + b) * r), against its forward product.
// w is drawn as a layer is initialized (variance 1/k: pre-activations of variance ~1);
// `unscaled` draws it of variance 1, so that pre-activations reach -14 and gelu' underflows
// there: the backward product then multiplies subnormals, which on an Intel core cost a
// microcode assist each (the row shows that cliff; kiln does not flush subnormals).
void layer(std::int64_t m, std::int64_t n, std::int64_t k, bool quick, bool unscaled = false) {
  const auto x = kiln::random::normal<float>({m, k}, 1), b = kiln::random::normal<float>({n}, 3),
             r = kiln::random::normal<float>({m, n}, 4);
  const kiln::tensor<float> w =
      kiln::random::normal<float>({k, n}, 2) * float(unscaled ? 1.0 : 1 / std::sqrt(double(k)));
  kiln::tensor<float> p = kiln::zeros<float>({m, n}), l = kiln::zeros<float>({}),
                      gw = kiln::zeros<float>({k, n}), gb = kiln::zeros<float>({n});
  const auto loss = kiln::sum(kiln::gelu(kiln::matmul(x, w) + b) * r);
  // (named, not bound: clang 14 cannot capture a structured binding in a lambda)
  const auto grads = kiln::grad(loss, w, b);
  const auto& dw = std::get<0>(grads);
  const auto& db = std::get<1>(grads);
  const auto t =
      race({[&] { p = kiln::matmul(x, w); }, [&] { kiln::eval(l = loss, gw = dw, gb = db); }},
           rounds_for(6.0 * m * n * k, quick));
  std::printf("| %ld x %ld x %ld%s | %.3f | %.3f | %s |\n", long(m), long(n), long(k),
              unscaled ? " (w unscaled)" : "", t[0] * 1e3, t[1] * 1e3, ratio(t[1], t[0]).c_str());
}

} // namespace

int main(int argc, char** argv) {
  // Before OpenBLAS is opened and OpenMP starts: they read these once. OpenMP (Eigen's
  // threads) reads its environment when it is loaded, before main: the program runs itself
  // again with them set. Setting them here alone, as before, left Eigen's thread spinning
  // after each of its products, taking a core from the next contender: kiln and OpenBLAS read
  // at one thread's speed in the 2-thread rows (512^3 f32: kiln 176 GFLOP/s; 322-332 with the
  // variable set, Eigen 299-302).
  if (!std::getenv("OMP_WAIT_POLICY")) {
    ::setenv("OMP_WAIT_POLICY", "passive", 1);
    ::execv("/proc/self/exe", argv);
    std::fprintf(stderr, "bench_matmul: could not run itself again (%s); OMP_WAIT_POLICY unset\n",
                 std::strerror(errno));
  }
  ::setenv("OPENBLAS_THREAD_TIMEOUT", "4", 0);
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  // --fused: the fused products' table only (quick rounds).
  const bool only_fused = argc > 1 && std::strcmp(argv[1], "--fused") == 0;
  // --layer: the layer's table only (full rounds).
  const bool only_layer = argc > 1 && std::strcmp(argv[1], "--layer") == 0;
  const openblas ob;
  // kiln's figures are its own kernel's (the column "kiln, default" is what a user gets).
  kiln::set_blas_use(kiln::blas_use::never);
  std::printf("OpenBLAS: %s\n", ob.ok() ? ob.config.c_str() : "n/a (libopenblas.so.0 not found)");
  const int hw = int(std::max(1u, std::thread::hardware_concurrency()));
  std::printf("\n| product | threads | m x n x k | kiln GFLOP/s | OpenBLAS | Eigen | kiln / "
              "OpenBLAS | kiln / Eigen | kiln, default (provider by the rule) "
              "|\n|---|---|---|---|---|---|---|---|---|\n");
  for (int threads : {1, std::min(2, hw)}) {
    if (only_fused || only_layer) break;
    kiln::thread_pool::instance().set_threads(threads);
    if (ob.ok()) ob.set_threads(threads);
    Eigen::setNbThreads(threads);
    for (std::int64_t s : {64, 128, 256, 512, 1024, 2048}) {
      plain<float>(ob, threads, s, s, s, quick);
      plain<double>(ob, threads, s, s, s, quick);
    }
    if (!quick) {
      plain<float>(ob, threads, 4096, 4096, 4096, quick);
      for (std::int64_t k : {64, 256, 1024}) {
        plain<float>(ob, threads, 4096, 4096, k, quick);
        plain<double>(ob, threads, 4096, 4096, k, quick);
      }
    }
    if (threads == 2) break;
  }
  kiln::thread_pool::instance().set_threads(std::min(2, hw));
  if (ob.ok()) ob.set_threads(std::min(2, hw));
  if (!only_layer) {
    std::printf("\nFused, f32, %d threads (ms):\n\n| m x n x k | kiln gelu(x w + b) | OpenBLAS + "
                "kiln pass | speed-up | kiln bare x w | fused / bare | kiln relu(x) w | kiln "
                "pass + OpenBLAS | speed-up | kiln sum(x w, 0) | / bare x w "
                "|\n|---|---|---|---|---|---|---|---|---|---|---|\n",
                std::min(2, hw));
    for (std::int64_t k : {64, 128, 256, 1024})
      fused(ob, 2048, 2048, k, quick || only_fused);
  }
  if (only_fused) return 0;
  std::printf("\nA layer's value and gradients, f32, %d threads (ms):\n\n| m x n x k | forward "
              "x w | loss, dW, db (one eval) | ratio |\n|---|---|---|---|\n",
              std::min(2, hw));
  for (std::int64_t s : {256, 512, 1024})
    layer(s, s, s, quick);
  layer(256, 256, 256, quick, true);
}
