// What the host thread pool costs a pass (issue 13, point 2): passes of two tasks on 2
// threads, each task empty or busy for 10 us, timed from the call to its return, in three
// situations:
//  - back to back: the next pass starts as soon as the last returned (a helper still
//    spinning picks it up);
//  - after a pause of `gap` us with the helper spinning or asleep (past its spin time, it
//    sleeps and the pass pays a wake-up);
//  - 1 thread, for the floor (the tasks run on the caller).
// A task records which thread ran it; the share of passes in which the helper took a task
// is printed too. Medians and 90th percentiles over `passes` passes.
//
// Usage: bench_pool_wake [passes = 2000]
#include <kiln/kiln.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(q * double(v.size() - 1) + 0.5)];
}

void wait_us(int us) {
  if (us <= 0) return;
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  while (std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::microseconds(us / 4 + 1));
}

} // namespace

int main(int argc, char** argv) {
  const int passes = argc > 1 ? std::atoi(argv[1]) : 2000;
  if (passes < 10) {
    std::fprintf(stderr, "usage: bench_pool_wake [passes >= 10]\n");
    return 2;
  }
  auto& pool = kiln::thread_pool::instance();
  const int hw = pool.threads();
  if (hw < 2) {
    std::printf("one hardware thread: nothing to measure\n");
    return 0;
  }
  const std::thread::id caller = std::this_thread::get_id();
  std::printf("| tasks | situation | threads | median us | p90 us | passes the helper joined |\n"
              "|---|---|---:|---:|---:|---:|\n");
  for (const int work : {0, 10})
    for (const int threads : {2, 1})
      for (const int gap : {0, 20, 200, 2000}) {
        if (threads == 1 && gap != 0 && gap != 200) continue;
        pool.set_threads(threads);
        std::vector<double> us;
        int joined = 0;
        for (int p = 0; p < passes + 10; ++p) {
          wait_us(gap);
          std::atomic<bool> helped{false};
          const auto t0 = std::chrono::steady_clock::now();
          pool.parallel_for(2, [&](int) {
            if (std::this_thread::get_id() != caller) helped.store(true);
            if (work > 0) { // busy, not asleep: a task of a pass computes
              const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(work);
              while (std::chrono::steady_clock::now() < until) {
              }
            }
          });
          const auto t1 = std::chrono::steady_clock::now();
          if (p < 10) continue; // warm-up
          us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
          joined += helped.load();
        }
        std::printf("| %s | %s | %d | %.2f | %.2f | %.0f%% |\n", work ? "2 x 10 us" : "2 empty",
                    gap == 0 ? "back to back"
                             : (std::to_string(gap) + " us after the last").c_str(),
                    threads, quantile(us, 0.5), quantile(us, 0.9), 100.0 * joined / passes);
      }
  pool.set_threads(hw);
  return 0;
}
