#pragma once
// A STREAM-style bandwidth probe for the triad r = a*b + c on f32: the denominator of the
// elementwise targets, so it is written to be hard to beat, not to be a strawman.
//   - Persistent threads, started once, each pinned to its own core, each streaming one
//     contiguous share of the arrays (shares start on 64-byte boundaries).
//   - The timed window is measured inside the threads: it opens when every thread has
//     passed a spin barrier and closes when the last one has finished its share, so waking
//     the threads is not counted (a library that must wake its workers pays for that).
//   - Two store flavours: ordinary stores (what every contender here issues; the memory
//     system then also reads each output line before writing it), and non-temporal
//     streaming stores, which skip that read. The probe's figure is the better of the two.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include <immintrin.h>
#include <pthread.h>
#include <sched.h>

namespace bench {

class stream_probe {
public:
  // threads: how many; each is pinned to the i-th CPU this process may run on.
  explicit stream_probe(int threads) : n_threads_(threads) {
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    sched_getaffinity(0, sizeof allowed, &allowed);
    std::vector<int> cpus;
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
    for (int i = 0; i < threads; ++i)
      workers_.emplace_back([this, i, cpu = cpus.empty() ? -1 : cpus[i % cpus.size()]] {
        if (cpu >= 0) {
          cpu_set_t one;
          CPU_ZERO(&one);
          CPU_SET(cpu, &one);
          pthread_setaffinity_np(pthread_self(), sizeof one, &one); // best effort
        }
        work(i);
      });
  }
  stream_probe(const stream_probe&) = delete;
  stream_probe& operator=(const stream_probe&) = delete;
  ~stream_probe() {
    stop_ = true;
    generation_.fetch_add(1);
    generation_.notify_all();
    for (auto& w : workers_)
      w.join();
  }

  // r[i] = a[i]*b[i] + c[i] for i in [0, n) on every probe thread; returns the seconds
  // from the moment all threads were ready to the moment the last one finished.
  double triad(float* r, const float* a, const float* b, const float* c, std::int64_t n,
               bool streaming_stores) {
    r_ = r, a_ = a, b_ = b, c_ = c, n_ = n, nt_ = streaming_stores;
    ready_.store(0);
    finished_.store(0);
    done_.store(0);
    generation_.fetch_add(1); // publishes the job (seq_cst)
    generation_.notify_all();
    done_.wait(0);
    return std::chrono::duration<double>(t1_ - t0_).count();
  }

private:
  void work(int index) {
    std::uint64_t seen = 0;
    for (;;) {
      generation_.wait(seen);
      seen = generation_.load();
      if (stop_) return;
      // Spin barrier: the window opens when every thread is awake and at the start line.
      ready_.fetch_add(1);
      while (ready_.load() < n_threads_)
        _mm_pause();
      if (index == 0) t0_ = std::chrono::steady_clock::now();
      constexpr std::int64_t line = 16; // floats per 64-byte cache line
      const std::int64_t lo = n_ * index / n_threads_ / line * line;
      const std::int64_t hi =
          index + 1 == n_threads_ ? n_ : n_ * (index + 1) / n_threads_ / line * line;
      if (nt_)
        triad_streaming(r_, a_, b_, c_, lo, hi);
      else
        triad_plain(r_, a_, b_, c_, lo, hi);
      if (finished_.fetch_add(1) + 1 == n_threads_) {
        t1_ = std::chrono::steady_clock::now();
        done_.store(1);
        done_.notify_one();
      }
    }
  }

  // The loop GCC/Clang vectorize at -O3 -march=native (one FMA, ordinary stores).
  static void triad_plain(float* __restrict r, const float* __restrict a, const float* __restrict b,
                          const float* __restrict c, std::int64_t lo, std::int64_t hi) {
    for (std::int64_t i = lo; i < hi; ++i)
      r[i] = a[i] * b[i] + c[i];
  }

  // Non-temporal stores once r + i is vector-aligned; scalar head and tail.
  static void triad_streaming(float* __restrict r, const float* __restrict a,
                              const float* __restrict b, const float* __restrict c, std::int64_t lo,
                              std::int64_t hi) {
#if defined(__AVX512F__)
    constexpr std::int64_t w = 16;
#elif defined(__AVX__)
    constexpr std::int64_t w = 8;
#else
    constexpr std::int64_t w = 1;
#endif
    std::int64_t i = lo;
    for (; i < hi && reinterpret_cast<std::uintptr_t>(r + i) % (w * 4) != 0; ++i)
      r[i] = a[i] * b[i] + c[i];
#if defined(__AVX512F__)
    for (; i + w <= hi; i += w)
      _mm512_stream_ps(r + i, _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i),
                                              _mm512_loadu_ps(c + i)));
#elif defined(__AVX__)
    for (; i + w <= hi; i += w)
      _mm256_stream_ps(r + i,
                       _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)),
                                     _mm256_loadu_ps(c + i)));
#endif
    for (; i < hi; ++i)
      r[i] = a[i] * b[i] + c[i];
    _mm_sfence(); // streaming stores are weakly ordered: make them visible before "done"
  }

  const int n_threads_;
  std::vector<std::thread> workers_;
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<int> ready_{0}, finished_{0}, done_{0};
  std::atomic<bool> stop_{false};
  // The job; written before generation_ is bumped, read after it is seen.
  float* r_ = nullptr;
  const float *a_ = nullptr, *b_ = nullptr, *c_ = nullptr;
  std::int64_t n_ = 0;
  bool nt_ = false;
  std::chrono::steady_clock::time_point t0_, t1_;
};

} // namespace bench
