// The host thread pool: persistent (no thread per evaluation), small passes stay on the
// calling thread, KILN_NUM_THREADS is honoured, results do not depend on the thread
// count, and evaluations from several user threads at once stay correct.
#include <kiln/kiln.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace {
int os_threads() { // this process's thread count, from the kernel
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  return -1;
}
} // namespace

TEST_CASE("KILN_NUM_THREADS sets the pool size and junk is an error naming it", "[threads]") {
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  ::setenv("KILN_NUM_THREADS", "3", 1);
  CHECK(kiln::thread_pool::default_threads() == 3);
  ::setenv("KILN_NUM_THREADS", "1", 1);
  CHECK(kiln::thread_pool::default_threads() == 1);
  for (const char* junk : {"0", "-2", "two", "4x", "1025"}) {
    ::setenv("KILN_NUM_THREADS", junk, 1);
    try {
      kiln::thread_pool::default_threads();
      FAIL("no kiln::error for KILN_NUM_THREADS=" << junk);
    } catch (const kiln::error& e) {
      CHECK(e.op() == "KILN_NUM_THREADS");
    }
  }
  ::setenv("KILN_NUM_THREADS", "", 1); // empty: not set
  CHECK(kiln::thread_pool::default_threads() == hw);
  ::unsetenv("KILN_NUM_THREADS");
  CHECK(kiln::thread_pool::default_threads() == hw);
}

TEST_CASE("evaluations create no threads, and small ones wake no worker", "[threads]") {
  kiln::set_num_threads(2);
  const auto a = kiln::random::uniform<float>({1 << 20}, Catch::rngSeed());
  kiln::tensor<float> r = kiln::exp(a) + a; // starts the pool
  const int before = os_threads();
  // (A thread started per evaluation shows after one; 20 keep this test short under the
  // sanitizers, where 200 passes of sin took 107 s.)
  for (int i = 0; i < 20; ++i)
    r = kiln::sin(a) * 2.0f + a;
  CHECK(os_threads() == before);

  auto& pool = kiln::thread_pool::instance();
  const auto small = kiln::random::uniform<float>({1000}, Catch::rngSeed());
  kiln::tensor<float> s = small * 2.0f;
  std::uint64_t passes = pool.parallel_passes();
  for (int i = 0; i < 50; ++i)
    s = small * 3.0f + 1.0f;
  CHECK(pool.parallel_passes() == passes);
  if (kiln::num_threads() > 1) {
    r = a * 2.0f;
    CHECK(pool.parallel_passes() > passes);
  }
}

TEST_CASE("a pass ends when its tasks are done: late helpers take none and touch nothing",
          "[threads]") {
  // Passes of a few tasks in a row: the caller often takes every task before a helper
  // wakes, and returns without waiting for it (its job then goes out of scope, which the
  // sanitizers would catch a late helper calling). Each task runs exactly once per pass.
  auto& pool = kiln::thread_pool::instance();
  kiln::set_num_threads(2);
  std::vector<int> runs(4);
  std::atomic<int> on_helpers{0};
  const auto caller = std::this_thread::get_id();
  for (int pass = 0; pass < 3000; ++pass) {
    const int tasks = 1 + pass % 4;
    std::fill(runs.begin(), runs.end(), 0);
    const int helped = on_helpers.load();
    pool.parallel_for(tasks, [&, pass](int t) {
      ++runs[std::size_t(t)]; // each task once: no two threads on one element
      if (std::this_thread::get_id() != caller) on_helpers.fetch_add(1);
      // Every 100th pass (of two tasks) holds its caller up to 20 ms, until a helper has
      // taken the other task: time to wake even on a loaded machine.
      if (pass % 100 == 1)
        for (int i = 0; i < 100 && on_helpers.load() == helped; ++i)
          std::this_thread::sleep_for(std::chrono::microseconds(200));
    });
    for (int t = 0; t < 4; ++t)
      REQUIRE(runs[std::size_t(t)] == (t < tasks ? 1 : 0));
  }
  // Some tasks ran on a helper: the pool is used, not bypassed. Only where a second core
  // exists to run it.
  if (std::thread::hardware_concurrency() > 1 && kiln::num_threads() > 1)
    CHECK(on_helpers.load() > 0);
}

TEST_CASE("a helper asleep after a pause is woken by the next pass", "[threads]") {
  // After a pass, helpers spin for a while, then sleep; a pass wakes only sleeping ones.
  // Each pass here comes after a pause longer than the spin, so its helper is asleep, and
  // holds its caller (up to 200 ms) until the helper has taken the other task: a helper
  // the pass failed to wake would never come.
  if (std::thread::hardware_concurrency() < 2) {
    WARN("skipped: one hardware thread, no helper to wake");
    return;
  }
  auto& pool = kiln::thread_pool::instance();
  kiln::set_num_threads(2);
  const auto caller = std::this_thread::get_id();
  for (int pass = 0; pass < 20; ++pass) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::atomic<int> on_helper{0};
    pool.parallel_for(2, [&](int) {
      if (std::this_thread::get_id() != caller) {
        on_helper.fetch_add(1);
        return;
      }
      for (int i = 0; i < 1000 && on_helper.load() == 0; ++i)
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    });
    INFO("pass " << pass);
    REQUIRE(on_helper.load() >= 1); // (2 where the helper came before the caller's first)
  }
}

TEST_CASE("a pass too short for a sleeping helper to join runs on the caller alone", "[threads]") {
  // Interleaved with other work (a pause longer than a helper's spin before each), a pass
  // that takes less than twice the wake-up the pool measured runs on its caller and wakes
  // no one; a long one wakes the helper; passes back to back wake it (it then spins).
  if (std::thread::hardware_concurrency() < 2) {
    WARN("skipped: one hardware thread, no helper to wake");
    return;
  }
  auto& pool = kiln::thread_pool::instance();
  kiln::set_num_threads(2);
  const auto heavy = [](const kiln::tensor<float>& x) {
    return kiln::exp(-x * 0.1f) * kiln::sqrt(x) + kiln::log(x) * kiln::sin(x);
  };
  const auto check = [&](const kiln::tensor<float>& got, const kiln::tensor<float>& x) {
    const auto g = got.to_vector(), xv = x.to_vector();
    for (std::size_t i = 0; i < xv.size(); i += 97) {
      const double v = xv[i];
      const double want = std::exp(-v * 0.1) * std::sqrt(v) + std::log(v) * std::sin(v);
      REQUIRE(std::abs(g[i] - want) <= 1e-5 * (1 + std::abs(want)));
    }
  };
  const auto big = kiln::random::uniform<float>({1 << 22}, Catch::rngSeed(), 0.5, 2);
  kiln::tensor<float> rb = kiln::zeros<float>({1 << 22});
  for (int i = 0; i < 3; ++i) { // a long pass after a pause: woken (and the pool learns)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const auto passes = pool.parallel_passes();
    rb = heavy(big);
    CHECK(pool.parallel_passes() == passes + 1);
  }
  check(rb, big);
  REQUIRE(pool.wake_ns() > 0);
  REQUIRE(pool.ns_per_work() > 0);
  // A pass of two tasks (parallel_for with its work stated, as a host pass states its
  // elements times its kernel's cost) whose estimate, from what the pool learnt, is a
  // quarter of the wake-up: after a pause, the caller runs both tasks.
  const auto caller = std::this_thread::get_id();
  std::atomic<int> on_helper{0};
  const auto task = [&](int) {
    if (std::this_thread::get_id() != caller) on_helper.fetch_add(1);
  };
  // (A helper starved of its core on a loaded machine may still be in its spin after the
  // pause: then the pass is one for a helper awake. Each pass the caller ran alone is
  // checked to have run both tasks itself.)
  int alone = 0;
  for (int i = 0; i < 5; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const double work = 0.25 * pool.wake_ns() / pool.ns_per_work();
    const auto passes = pool.parallel_passes();
    const int helped = on_helper.load();
    pool.parallel_for(2, task, 0, work);
    if (pool.parallel_passes() == passes) {
      ++alone;
      CHECK(on_helper.load() == helped);
    }
  }
  CHECK(alone >= 1);
  if (alone < 5) WARN(5 - alone << " of 5 passes found their helper awake after the pause");
  // The same right after another pass (back to back, its helper still spinning or just
  // asleep): woken, so that it spins through the passes that follow.
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const double work = 0.25 * pool.wake_ns() / pool.ns_per_work();
  pool.parallel_for(2, task, 0, work);
  const auto passes = pool.parallel_passes();
  pool.parallel_for(2, task, 0, work);
  CHECK(pool.parallel_passes() == passes + 1);
  // A long pass after a pause (its estimate 8 wake-ups): woken.
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const auto before = pool.parallel_passes();
  pool.parallel_for(2, task, 0, 8 * pool.wake_ns() / pool.ns_per_work());
  CHECK(pool.parallel_passes() == before + 1);
}

TEST_CASE("results do not depend on the thread count", "[threads]") {
  const auto a = kiln::random::normal<float>({1000, 777}, Catch::rngSeed());
  kiln::set_num_threads(1);
  kiln::tensor<float> one = kiln::tanh(a.transpose()) * 3.0f + kiln::erf(a.transpose());
  const auto s1 = kiln::sum(a * a, 1).to_vector();
  kiln::set_num_threads(2);
  kiln::tensor<float> two = kiln::tanh(a.transpose()) * 3.0f + kiln::erf(a.transpose());
  const auto s2 = kiln::sum(a * a, 1).to_vector();
  // Elementwise: bit-identical (no element takes another code path under another split).
  const bool same = one.to_vector() == two.to_vector();
  CHECK(same);
  // Sums: per-thread partials in double, so equal up to the last f32 bit.
  for (std::size_t i = 0; i < s1.size(); ++i)
    CHECK(s1[i] == Approx(s2[i]).epsilon(1e-6));
}

TEST_CASE("several user threads evaluate at once", "[threads]") {
  kiln::set_num_threads(2);
  const auto a = kiln::random::uniform<double>({300000}, Catch::rngSeed());
  const auto expect = kiln::tensor<double>(kiln::sqrt(a) * 2.0 + 1.0).to_vector();
  std::vector<int> ok(4, 0);
  std::vector<std::thread> users;
  for (int u = 0; u < 4; ++u)
    users.emplace_back([&, u] {
      bool good = true;
      for (int i = 0; i < 20; ++i) {
        kiln::tensor<double> r = kiln::sqrt(a) * 2.0 + 1.0;
        good = good && r.to_vector() == expect;
      }
      ok[u] = good;
    });
  for (auto& t : users)
    t.join();
  CHECK(ok == std::vector<int>(4, 1));
}
