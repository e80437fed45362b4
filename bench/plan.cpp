// Captured plans (issue 34): what a replay costs against the same statements uncaptured.
//   1. per statement of `z = a * b + c` (f32) at 1, 16, 256 and 4096 elements: a plan of 10
//      such statements replayed, the same 10 statements run as written, Eigen's
//      `z = a * b + c` on ArrayXf (target: <= 20 ns per replayed statement at 16);
//   2. a 10-statement step of small tensors (64 f32: arithmetic, math functions, a sum
//      reduction, a multi-output eval, an in-place update), captured against uncaptured
//      (target >= 5x);
//   3. the explicit heat equation, 1000 steps of a 5-point stencil through narrow views on
//      64^2 and 512^2 f64 grids: captured, uncaptured, a hand loop (1 thread each);
//   4. one pass at 2^24 f32 elements, captured against uncaptured (no regression);
//   5. a training step (examples/logistic_regression.cpp: Adam on the gradients of a
//      logistic loss, d = 16) at n = 64 and 8000 rows, captured against uncaptured;
//   6. on vulkan:0 (where there is one): host time per step of 1, 5 and 20 kernels
//      (`z_k = a * b + c * s` at 4096 f32 each), captured against uncaptured: the time of the
//      call (the launches queued; the device's work is waited for after it, untimed), and
//      captured with `s` new at every call (no command buffer recorded again); and
//      section 5's training step in f32 on the device: the call, and the whole step;
//   7. the same on cuda:0 (where there is one): a replay is one CUDA graph launch (its nodes
//      set where a scalar changed) against the statements' stream launches.
//
// Method: contenders alternate round by round; each figure is the median over the rounds
// (with the interquartile range). Every captured result is checked equal, bit for bit, to
// the uncaptured one before timing.
//
// Usage: bench_plan [rounds = 31] [devices: sections 6 and 7 alone]
#include <kiln/jit/cuda/backend.hpp>   // (its count of CUDA graphs made)
#include <kiln/jit/vulkan/backend.hpp> // (its count of recorded command buffers)
#include <kiln/kiln.hpp>

#include <Eigen/Core>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

namespace {

using kiln::tensor;
using clk = std::chrono::steady_clock;

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(q * double(v.size() - 1) + 0.5)];
}

// Each contender's median (and quartiles) of `rounds` rounds, the contenders alternating.
struct figure {
  double median, q1, q3;
};
std::vector<figure> alternate(int rounds, const std::vector<std::function<double()>>& runs) {
  std::vector<std::vector<double>> t(runs.size());
  for (int r = 0; r < rounds; ++r)
    for (std::size_t c = 0; c < runs.size(); ++c)
      t[c].push_back(runs[c]());
  std::vector<figure> f;
  for (auto& v : t)
    f.push_back({quantile(v, 0.5), quantile(v, 0.25), quantile(v, 0.75)});
  return f;
}

// ns per call of f, over enough calls for ~2 ms.
template <class F>
double ns_per_call(F&& f, int calls) {
  const auto t0 = clk::now();
  for (int i = 0; i < calls; ++i)
    f();
  return std::chrono::duration<double, std::nano>(clk::now() - t0).count() / calls;
}

template <class T>
bool same_bits(const tensor<T>& x, const tensor<T>& y) {
  const auto a = x.to_vector(), b = y.to_vector();
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

void require(bool ok, const char* what) {
  if (!ok) {
    std::printf("MISMATCH: %s\n", what);
    std::exit(1);
  }
}

void per_statement(int rounds) {
  std::printf("\n1. z = a * b + c, ns per statement (10 statements per call)\n");
  std::printf("%8s %12s %12s %12s %10s\n", "n", "captured", "uncaptured", "Eigen", "unc/capt");
  for (const std::int64_t n : {1, 16, 256, 4096}) {
    const auto a = kiln::random::uniform<float>({n}, 1), b = kiln::random::uniform<float>({n}, 2),
               c = kiln::random::uniform<float>({n}, 3);
    std::vector<tensor<float>> z, zr;
    for (int k = 0; k < 10; ++k)
      z.push_back(kiln::zeros<float>({n})), zr.push_back(kiln::zeros<float>({n}));
    const auto ten = [](std::vector<tensor<float>>& z, const tensor<float>& a,
                        const tensor<float>& b, const tensor<float>& c) {
      for (tensor<float>& zk : z)
        zk = a * b + c;
    };
    auto plan = kiln::capture([&](tensor<float>& z0, tensor<float>& z1, tensor<float>& z2,
                                  tensor<float>& z3, tensor<float>& z4, tensor<float>& z5,
                                  tensor<float>& z6, tensor<float>& z7, tensor<float>& z8,
                                  tensor<float>& z9, const tensor<float>& a, const tensor<float>& b,
                                  const tensor<float>& c) {
      std::vector<tensor<float>> v{z0, z1, z2, z3, z4, z5, z6, z7, z8, z9};
      ten(v, a, b, c);
    });
    const auto call = [&] {
      plan(z[0], z[1], z[2], z[3], z[4], z[5], z[6], z[7], z[8], z[9], a, b, c);
    };
    call();
    call();
    ten(zr, a, b, c);
    for (int k = 0; k < 10; ++k)
      require(same_bits(z[k], zr[k]), "z = a * b + c");
    Eigen::ArrayXf ea = Eigen::ArrayXf::Random(n), eb = Eigen::ArrayXf::Random(n),
                   ec = Eigen::ArrayXf::Random(n);
    std::vector<Eigen::ArrayXf> ez(10, Eigen::ArrayXf(n));
    const int calls = int(std::max<std::int64_t>(50, 20000 / std::max<std::int64_t>(1, n / 64)));
    const auto f =
        alternate(rounds, {[&] { return ns_per_call(call, calls) / 10; },
                           [&] { return ns_per_call([&] { ten(zr, a, b, c); }, calls) / 10; },
                           [&] {
                             return ns_per_call(
                                        [&] {
                                          for (auto& e : ez)
                                            e = ea * eb + ec;
                                          asm volatile("" ::: "memory");
                                        },
                                        calls) /
                                    10;
                           }});
    std::printf("%8lld %12.1f %12.1f %12.1f %9.2fx\n", (long long)n, f[0].median, f[1].median,
                f[2].median, f[1].median / f[0].median);
  }
}

// Ten statements of an update on small tensors: what a solver or optimizer step does.
void ten_statements(tensor<float>& x, tensor<float>& m, tensor<float>& v, tensor<float>& loss,
                    const tensor<float>& g, kiln::param<float> lr) {
  tensor<float> gg = g * g;                                                // 1
  m = m * 0.9f + g * 0.1f;                                                 // 2
  v = v * 0.999f + gg * 0.001f;                                            // 3
  tensor<float> step = m / (kiln::sqrt(v) + 1e-8f);                        // 4
  tensor<float> clipped = kiln::minimum(kiln::maximum(step, -1.0f), 1.0f); // 5
  x = x - lr * clipped;                                                    // 6
  tensor<float> e, s;
  kiln::eval(e = kiln::exp(-x * x), s = kiln::sin(x) * kiln::cos(x)); // 7
  loss = kiln::sum(e * s + kiln::log1p(gg)); // 8, 9 (a reduction, then a pass)
  x = x * 0.5f + kiln::tanh(x) * 0.5f;       // 10
}

void small_step(int rounds) {
  std::printf("\n2. a 10-statement step of 64-element tensors, ns per step\n");
  const std::int64_t n = 64;
  const auto g = kiln::random::normal<float>({n}, 4);
  auto fresh = [&](tensor<float>& x, tensor<float>& m, tensor<float>& v, tensor<float>& l) {
    x = kiln::random::normal<float>({n}, 5);
    m = kiln::zeros<float>({n});
    v = kiln::zeros<float>({n});
    l = kiln::zeros<float>({});
  };
  tensor<float> x, m, v, l, xr, mr, vr, lr;
  fresh(x, m, v, l);
  fresh(xr, mr, vr, lr);
  auto plan = kiln::capture(ten_statements, {.name = "adam-like step"});
  for (int i = 0; i < 5; ++i) {
    plan(x, m, v, l, g, 0.01f * float(i + 1));
    kiln::param<float> p(0.01f * float(i + 1));
    ten_statements(xr, mr, vr, lr, g, p);
  }
  require(same_bits(x, xr) && same_bits(m, mr) && same_bits(v, vr) && same_bits(l, lr),
          "10-statement step");
  std::printf("   (%zu recorded steps)\n", plan.steps());
  const int calls = 5000;
  kiln::param<float> p(0.001f);
  const auto f = alternate(
      rounds, {[&] { return ns_per_call([&] { plan(x, m, v, l, g, 0.001f); }, calls); },
               [&] { return ns_per_call([&] { ten_statements(xr, mr, vr, lr, g, p); }, calls); }});
  std::printf("%12s %12s %10s\n", "captured", "uncaptured", "ratio");
  std::printf("%12.0f %12.0f %9.2fx   (IQR captured %.0f-%.0f, uncaptured %.0f-%.0f)\n",
              f[0].median, f[1].median, f[1].median / f[0].median, f[0].q1, f[0].q3, f[1].q1,
              f[1].q3);
}

constexpr double heat_r = 0.2;

// One step of the stencil: the interior of v from u.
void heat_step(tensor<double>& v, const tensor<double>& u) {
  const std::int64_t n = u.dim(0);
  const auto in = [&](const tensor<double>& t, std::int64_t di, std::int64_t dj) {
    return t.narrow(0, 1 + di, n - 2).narrow(1, 1 + dj, n - 2);
  };
  in(v, 0, 0) = in(u, 0, 0) + heat_r * (in(u, -1, 0) + in(u, 1, 0) + in(u, 0, -1) + in(u, 0, 1) -
                                        4.0 * in(u, 0, 0));
}

void hand_heat(std::vector<double>& u, std::vector<double>& v, std::int64_t n, int steps) {
  for (int s = 0; s < steps; ++s) {
    for (std::int64_t i = 1; i < n - 1; ++i) {
      const double *c = u.data() + i * n, *up = c - n, *dn = c + n;
      double* o = v.data() + i * n;
      for (std::int64_t j = 1; j < n - 1; ++j)
        o[j] = c[j] + heat_r * (up[j] + dn[j] + c[j - 1] + c[j + 1] - 4.0 * c[j]);
    }
    std::swap(u, v);
  }
}

void heat(int rounds) {
  std::printf("\n3. heat equation, 1000 steps, f64, 1 thread: ms per 1000 steps\n");
  std::printf("%6s %10s %10s %10s %10s %10s\n", "n", "captured", "uncaptured", "hand", "unc/capt",
              "hand/capt");
  const int threads = kiln::num_threads();
  kiln::set_num_threads(1);
  for (const std::int64_t n : {64, 512}) {
    const int steps = 1000;
    const auto u0 = kiln::random::uniform<double>({n, n}, 7);
    auto plan = kiln::capture(heat_step, {.name = "heat step"});
    tensor<double> u = u0.clone(), v = u0.clone(), ur = u0.clone(), vr = u0.clone();
    const auto captured = [&] {
      for (int s = 0; s < steps; s += 2) {
        plan(v, u);
        plan(u, v);
      }
    };
    const auto uncaptured = [&] {
      for (int s = 0; s < steps; s += 2) {
        heat_step(vr, ur);
        heat_step(ur, vr);
      }
    };
    std::vector<double> hu = u0.to_vector(), hv = hu;
    captured();
    uncaptured();
    require(same_bits(u, ur), "heat");
    const auto ms = [](auto&& f) {
      const auto t0 = clk::now();
      f();
      return std::chrono::duration<double, std::milli>(clk::now() - t0).count();
    };
    const auto f = alternate(rounds, {[&] { return ms(captured); }, [&] { return ms(uncaptured); },
                                      [&] { return ms([&] { hand_heat(hu, hv, n, steps); }); }});
    std::printf("%6lld %10.3f %10.3f %10.3f %9.2fx %9.2fx\n", (long long)n, f[0].median,
                f[1].median, f[2].median, f[1].median / f[0].median, f[2].median / f[0].median);
  }
  kiln::set_num_threads(threads);
}

void large(int rounds) {
  std::printf("\n4. z = a * b + c at 2^24 f32, ms per pass (all threads)\n");
  const std::int64_t n = std::int64_t{1} << 24;
  const auto a = kiln::random::uniform<float>({n}, 1), b = kiln::random::uniform<float>({n}, 2),
             c = kiln::random::uniform<float>({n}, 3);
  tensor<float> z = kiln::zeros<float>({n}), zr = kiln::zeros<float>({n});
  auto plan = kiln::capture([](tensor<float>& z, const tensor<float>& a, const tensor<float>& b,
                               const tensor<float>& c) { z = a * b + c; });
  plan(z, a, b, c);
  plan(z, a, b, c);
  zr = a * b + c;
  require(same_bits(z, zr), "2^24 pass");
  const auto ms = [](auto&& f) {
    const auto t0 = clk::now();
    f();
    return std::chrono::duration<double, std::milli>(clk::now() - t0).count();
  };
  const auto f = alternate(rounds, {[&] { return ms([&] { plan(z, a, b, c); }); },
                                    [&] { return ms([&] { zr = a * b + c; }); }});
  std::printf("%12s %12s %10s\n", "captured", "uncaptured", "unc/capt");
  std::printf("%12.3f %12.3f %9.3fx   (IQR %.3f-%.3f, %.3f-%.3f)\n", f[0].median, f[1].median,
              f[1].median / f[0].median, f[0].q1, f[0].q3, f[1].q1, f[1].q3);
}

void training(int rounds) {
  std::printf("\n5. logistic regression, one Adam step from the gradients, us per step\n");
  std::printf("%6s %10s %10s %10s\n", "n", "captured", "uncaptured", "unc/capt");
  for (const std::int64_t n : {64, 8000}) {
    const std::int64_t d = 16;
    const auto X = kiln::random::normal<double>({n, d}, 8);
    const auto Y = kiln::cast<double>(kiln::sum(X, 1) > 0.0).eval();
    struct model {
      tensor<double> w = kiln::zeros<double>({16}), b = kiln::zeros<double>(kiln::shape{});
    } m, mr;
    const auto loss_of = [&](const model& m) {
      const auto z = kiln::sum(X * m.w, 1) + m.b;
      return kiln::mean(kiln::softplus(z) - Y * z);
    };
    const auto loss = loss_of(m), loss_r = loss_of(mr);
    auto [dw, db] = kiln::grad(loss, m.w, m.b);
    auto [dwr, dbr] = kiln::grad(loss_r, mr.w, mr.b);
    kiln::optim::adam<double> opt({m.w, m.b}, {.lr = 0.05}), opt_r({mr.w, mr.b}, {.lr = 0.05});
    auto plan = kiln::capture(
        [&, &dw = dw, &db = db](const tensor<double>&, const tensor<double>&) { opt.step(dw, db); },
        {.name = "training step"});
    for (int i = 0; i < 3; ++i) {
      plan(X, Y);
      opt_r.step(dwr, dbr);
    }
    require(same_bits(m.w, mr.w) && same_bits(m.b, mr.b), "training step");
    const int calls = n == 64 ? 2000 : 50;
    const auto f =
        alternate(rounds, {[&] { return ns_per_call([&] { plan(X, Y); }, calls) / 1e3; },
                           [&, &dwr = dwr, &dbr = dbr] {
                             return ns_per_call([&] { opt_r.step(dwr, dbr); }, calls) / 1e3;
                           }});
    std::printf("%6lld %10.2f %10.2f %9.2fx\n", (long long)n, f[0].median, f[1].median,
                f[1].median / f[0].median);
  }
}

// Command buffers vulkan:N's plans have recorded so far, or CUDA graphs cuda:N's have made.
std::uint64_t recorded(const kiln::device& dev) {
  const auto be = kiln::backend_for(dev);
  if (dev.kind() == kiln::device_kind::cuda)
    return dynamic_cast<const kiln::jit::cuda::cuda_backend&>(*be).graphs().made;
  return dynamic_cast<const kiln::jit::vk::vulkan_backend&>(*be).prerecorded().second;
}

// The first available device of this kind, else the host.
kiln::device first_of(kiln::device_kind kind) {
  for (const auto& d : kiln::devices())
    if (d.available && d.device.kind() == kind) return d.device;
  return {};
}

void device_steps(kiln::device_kind kind, int rounds) {
  const char* section = kind == kiln::device_kind::cuda ? "7" : "6";
  const kiln::device dev = first_of(kind);
  if (dev.is_host()) {
    std::printf("\n%s. no %s device: not measured\n", section,
                kind == kiln::device_kind::cuda ? "CUDA" : "Vulkan");
    return;
  }
  std::printf("\n%s. %s: host time per step of k kernels, us (the call only)\n", section,
              dev.str().c_str());
  std::printf("%4s %10s %10s %10s %12s %10s\n", "k", "captured", "uncaptured", "unc/capt",
              "capt, new s", "unc/new s");
  const std::int64_t n = 4096;
  const auto a = kiln::random::uniform<float>({n}, 1, 0, 1, dev),
             b = kiln::random::uniform<float>({n}, 2, 0, 1, dev),
             c = kiln::random::uniform<float>({n}, 3, 0, 1, dev);
  for (const int k : {1, 5, 20}) {
    // k statements, each its own kernel (each reads what the one before wrote).
    const auto body = [k](tensor<float>& out, const tensor<float>& a, const tensor<float>& b,
                          const tensor<float>& c, kiln::param<float> s) {
      out = a * b + c * s;
      for (int i = 1; i < k; ++i)
        out = out * b + c * s;
    };
    auto plan = kiln::capture(body, {.name = "device step"});
    tensor<float> out = kiln::zeros<float>({n}, dev), out_r = out.clone();
    const auto uncaptured = [&] { body(out_r, a, b, c, kiln::param<float>(0.5f)); };
    plan(out, a, b, c, 0.5f);
    plan(out, a, b, c, 0.5f);
    uncaptured();
    kiln::synchronize(dev);
    require(same_bits(out, out_r), "device step");
    require(plan.steps() == std::size_t(k), "one step per kernel");
    const int calls = 200;
    const auto host_us = [&](auto&& step) {
      double t = 0;
      for (int i = 0; i < calls; ++i) {
        const auto t0 = clk::now();
        step();
        t += std::chrono::duration<double, std::micro>(clk::now() - t0).count();
        kiln::synchronize(dev);
      }
      return t / calls;
    };
    // The parameter changed at every call (a time step, a learning rate): the kernels read
    // it from a buffer the queue writes, so the step's command buffer is not recorded again.
    float s = 0.5f;
    const auto varied = [&] {
      s = s < 1.0f ? s + 0.001f : 0.5f;
      plan(out, a, b, c, s);
    };
    const auto made = recorded(dev);
    const auto f =
        alternate(rounds, {[&] { return host_us([&] { plan(out, a, b, c, 0.5f); }); },
                           [&] { return host_us(uncaptured); }, [&] { return host_us(varied); }});
    const auto rerecorded = recorded(dev) - made;
    std::printf("%4d %10.2f %10.2f %9.2fx %12.2f %9.2fx  (%llu recorded in %d calls)\n", k,
                f[0].median, f[1].median, f[1].median / f[0].median, f[2].median,
                f[1].median / f[2].median, (unsigned long long)rerecorded, 2 * calls * rounds);
  }
  // The training step of section 5 (f32) on the device: host time of the call, and the
  // whole step (the call and the wait for the device).
  std::printf("\n   %s: logistic regression (Adam, d = 16, f32), us per step\n", dev.str().c_str());
  std::printf("%6s %10s %10s %9s %10s %10s %9s\n", "n", "call capt", "call unc", "unc/capt",
              "step capt", "step unc", "unc/capt");
  for (const std::int64_t n : {64, 8000}) {
    const std::int64_t d = 16;
    const auto X = kiln::random::normal<float>({n, d}, 8, 0, 1, dev);
    const auto Y = kiln::cast<float>(kiln::sum(X, 1) > 0.0f).eval();
    struct model {
      tensor<float> w, b;
    };
    model m{kiln::zeros<float>({16}, dev), kiln::zeros<float>(kiln::shape{}, dev)};
    model mr{m.w.clone(), m.b.clone()};
    const auto loss_of = [&](const model& m) {
      const auto z = kiln::sum(X * m.w, 1) + m.b;
      return kiln::mean(kiln::softplus(z) - Y * z);
    };
    const auto loss = loss_of(m), loss_r = loss_of(mr);
    auto [dw, db] = kiln::grad(loss, m.w, m.b);
    auto [dwr, dbr] = kiln::grad(loss_r, mr.w, mr.b);
    kiln::optim::adam<float> opt({m.w, m.b}, {.lr = 0.05}), opt_r({mr.w, mr.b}, {.lr = 0.05});
    auto plan = kiln::capture(
        [&, &dw = dw, &db = db](const tensor<float>&, const tensor<float>&) { opt.step(dw, db); },
        {.name = "device training step"});
    for (int i = 0; i < 3; ++i) {
      plan(X, Y);
      opt_r.step(dwr, dbr);
    }
    kiln::synchronize(dev);
    require(same_bits(m.w, mr.w) && same_bits(m.b, mr.b), "device training step");
    const int calls = n == 64 ? 200 : 50;
    const auto timed = [&](auto&& step, bool whole) {
      double t = 0;
      for (int i = 0; i < calls; ++i) {
        const auto t0 = clk::now();
        step();
        if (whole) kiln::synchronize(dev);
        t += std::chrono::duration<double, std::micro>(clk::now() - t0).count();
        if (!whole) kiln::synchronize(dev);
      }
      return t / calls;
    };
    const auto captured = [&] { plan(X, Y); };
    const auto uncaptured = [&, &dwr = dwr, &dbr = dbr] { opt_r.step(dwr, dbr); };
    const auto f = alternate(
        rounds, {[&] { return timed(captured, false); }, [&] { return timed(uncaptured, false); },
                 [&] { return timed(captured, true); }, [&] { return timed(uncaptured, true); }});
    std::printf("%6lld %10.1f %10.1f %8.2fx %10.1f %10.1f %8.2fx\n", (long long)n, f[0].median,
                f[1].median, f[1].median / f[0].median, f[2].median, f[3].median,
                f[3].median / f[2].median);
  }
}

} // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 31;
  std::printf("bench_plan: %d threads, %d rounds\n", kiln::num_threads(), rounds);
  if (argc > 2 && std::string(argv[2]) == "devices") { // (sections 6 and 7 alone)
    device_steps(kiln::device_kind::vulkan, std::max(5, rounds / 3));
    device_steps(kiln::device_kind::cuda, std::max(5, rounds / 3));
    return 0;
  }
  per_statement(rounds);
  small_step(rounds);
  heat(std::max(5, rounds / 3));
  large(rounds);
  training(rounds);
  device_steps(kiln::device_kind::vulkan, std::max(5, rounds / 3));
  device_steps(kiln::device_kind::cuda, std::max(5, rounds / 3));
}
