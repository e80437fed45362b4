// The elementwise family's code-changing parameters on vulkan:0 (pipeline/pass_shape.hpp):
// every combination of units per invocation and vector width, at several workgroup and
// group counts, computes what double-precision loops compute, over flat and strided
// operands, several outputs, integer and float dtypes, and sizes that leave partial units
// and partial sweeps (1, 7, 1000, 12345, 2^16 + 3). And custom ops' tunables as parameters
// (tune/op_tunables.hpp): each value compiles its own code and computes the right values,
// kiln::tune picks among them and later evaluations take its choice, and values whose
// results differ from the op's own are rejected.
#include "cuda_support.hpp"
#include "device_stand_in.hpp"
#include "metal_support.hpp"
#include "vulkan_support.hpp"

#include "tune_support.hpp"

#include "kiln/ir/lower.hpp"
#include "kiln/jit/tune/op_tunables.hpp"

#include <filesystem>
#include <random>
#include <unistd.h>

namespace tune = kiln::jit::tune;

namespace ops {

// 16 steps of y = y * x + 1 (a geometric sum), in chunks of STEP: every STEP runs the same
// arithmetic in the same order, so any value gives the same bits.
template <int Step>
struct geometric : kiln::op_base {
  static constexpr const char* name = "geometric";
  static constexpr const char* inputs = "x";
  static constexpr const char* output = "y";
  static constexpr kiln::tunable tunables[] = {{"STEP", Step, kiln::tuning_values<1, 2, 4, 8>}};
  static constexpr const char* body = R"(
  y = $T(0);
  for (int k = 0; k < 16; k += ${STEP}) {
    for (int j = 0; j < ${STEP}; ++j) {
      y = y * x + $T(1);
    }
  }
)";
  using rule = kiln::rules::floating;
  template <class T>
  static T host(T x) {
    T y = 0;
    for (int k = 0; k < 16; ++k)
      y = y * x + T(1);
    return y;
  }
  using derivative = kiln::zero_gradient;
};

// e^x by TERMS terms of its series: fewer terms give other values.
template <int Terms>
struct series : kiln::op_base {
  static constexpr const char* name = "series";
  static constexpr const char* inputs = "x";
  static constexpr const char* output = "y";
  static constexpr kiln::tunable tunables[] = {{"TERMS", Terms, kiln::tuning_values<2, 4, 12>}};
  static constexpr const char* body = R"(
  $T t = $T(1);
  y = $T(1);
  for (int k = 1; k <= ${TERMS}; ++k) {
    t = t * x / $T(k);
    y = y + t;
  }
)";
  using rule = kiln::rules::floating;
  template <class T>
  static T host(T x) {
    T t = 1, y = 1;
    for (int k = 1; k <= Terms; ++k)
      t = t * x / T(k), y = y + t;
    return y;
  }
  using derivative = kiln::zero_gradient;
};

// A sum of squares whose combine adds b in SPLIT equal parts: a custom reduction's own
// tunable, values to tune over listed.
struct split_sumsq_def {
  static constexpr const char* name = "split_sumsq";
  static constexpr kiln::tunable tunables[] = {{"SPLIT", 1, kiln::tuning_values<1, 2, 4>}};
  template <class T>
  using acc_t = double;
  template <class T>
  using result = double;
  template <class A>
  static A identity() {
    return 0;
  }
  template <class A, class V>
  static A map(V v) {
    return double(v) * double(v);
  }
  template <class A>
  static A combine(const A& a, const A& b) {
    return a + b;
  }
  template <class R, class A>
  static R finish(const A& a, std::int64_t) {
    return a;
  }
  static constexpr kiln::reduction_spelling device{
      .accumulator = kiln::reduction_accumulator::floating,
      .identity = "$A(0)",
      .map = "b = $A(v) * $A(v);",
      .combine = "for (int j = 0; j < ${SPLIT}; ++j) { a = a + b / $A(${SPLIT}); }",
      .finish = "$R(a)"};
};

} // namespace ops

template <class X>
auto split_sumsq(const X& x, kiln::axes over = {}) {
  return kiln::reduce_node<kiln::custom_reduction<ops::split_sumsq_def>, X>(x, std::move(over),
                                                                            false);
}

template <class X>
auto geometric(const X& x) {
  return kiln::make_node<ops::geometric<4>>(x);
}
template <class X>
auto series(const X& x) {
  return kiln::make_node<ops::series<12>>(x);
}

namespace {

using tune_test::forced;
using tune_test::jit_of;
using tune_test::launches_of;

// The configurations tried: every (per_invocation, vector) pair, each at the default
// workgroup and group count and, but on a CPU stand-in (a host compile per configuration),
// at ones drawn from the space.
std::vector<tune::config> shapes(const tune::space& sp, std::mt19937& rng, bool stand_in) {
  std::vector<tune::config> out;
  const auto& wgs = sp.params()[tune::ew::workgroup].values;
  const auto& gs = sp.params()[tune::ew::groups].values;
  for (std::int64_t e : sp.params()[tune::ew::per_invocation].values)
    for (std::int64_t v : sp.params()[tune::ew::vector].values) {
      tune::config c = sp.defaults();
      c[tune::ew::per_invocation] = e;
      c[tune::ew::vector] = v;
      out.push_back(c);
      if (stand_in) continue;
      c[tune::ew::workgroup] = wgs[rng() % wgs.size()];
      c[tune::ew::groups] = gs[rng() % std::min<std::size_t>(gs.size(), 3)]; // few: loops
      if (sp.why_illegal(c).empty()) out.push_back(c);
    }
  return out;
}

// Runs f once to learn its elementwise kernel (its last launch: the fills come first), then under
// each configuration, handing the result to check.
template <class F, class Check>
void under_each(F&& f, Check&& check, std::mt19937& rng) {
  const tune::launch_site site = launches_of(f).back();
  REQUIRE(site.sp->family() == "elementwise");
  for (const tune::config& c : shapes(*site.sp, rng, test::stand_in(site.backend->device()))) {
    INFO("under " << site.sp->format(c));
    check(forced(site, c, f));
  }
}

// A float pass's values against those of double loops, within f32 rounding.
void check_near(const kiln::tensor<float>& out, const std::vector<double>& ref) {
  const auto o = out.to_vector();
  REQUIRE(o.size() == ref.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < o.size(); ++i)
    bad += !(std::abs(o[i] - ref[i]) <= 1e-6 * (1 + std::abs(ref[i])));
  CHECK(bad == 0);
}

// The element counts each shape runs on: one partial unit, a few, many. On the CPU stand-ins
// every shape is a host compile (~1-2 s): there the smallest and the largest only.
std::vector<std::int64_t> sizes(const kiln::device& dev) {
  if (test::stand_in(dev)) return {7, (1 << 16) + 3};
  return {1, 7, 1000, 12345, (1 << 16) + 3};
}

// What every output holds before the pass under test writes it: a slot left unwritten
// shows (the device's allocator hands out blocks that held earlier, correct results).
const float unwritten = std::numeric_limits<float>::quiet_NaN();

} // namespace

TEST_CASE("tuning shapes on each GPU device: a flat float pass in every shape matches double loops",
          "[tune][vulkan][cuda][metal]") {
  for (const kiln::device* dev : {vulkan_or_skip(), cuda_or_skip(), metal_or_skip()}) {
    if (!dev) continue;
    std::mt19937 rng(11);
    for (const std::int64_t n : sizes(*dev)) {
      INFO(n << " elements");
      kiln::tensor<float> x = kiln::random::normal<float>({n}, 5).to(*dev);
      kiln::tensor<float> y = kiln::random::normal<float>({n}, 6).to(*dev);
      const auto xs = x.to_vector(), ys = y.to_vector();
      std::vector<double> ref(static_cast<std::size_t>(n));
      for (std::size_t i = 0; i < ref.size(); ++i)
        ref[i] = double(xs[i]) * double(ys[i]) - 0.5 * double(xs[i]);
      auto f = [&] {
        kiln::tensor<float> o = kiln::full<float>({n}, unwritten, *dev);
        o = x * y - 0.5f * x;
        return o;
      };
      under_each(
          f, [&](const kiln::tensor<float>& out) { check_near(out, ref); }, rng);
    }
  }
}

TEST_CASE("tuning shapes on each GPU device: strided and offset views, an integer pass and two "
          "outputs in every shape match double loops",
          "[tune][vulkan][cuda][metal]") {
  for (const kiln::device* dev : {vulkan_or_skip(), cuda_or_skip(), metal_or_skip()}) {
    if (!dev) continue;
    std::mt19937 rng(12);
    // Rows of 3 and of 129 (several units a row); on a CPU stand-in (a host compile per
    // shape) the long rows only.
    const std::vector<std::int64_t> all_cols = {3, 129}, long_cols = {129};
    for (const std::int64_t cols : test::stand_in(*dev) ? long_cols : all_cols) {
      const std::int64_t rows = 301;
      INFO(rows << " x " << cols);
      kiln::tensor<float> a = kiln::random::normal<float>({cols, rows + 2}, 7).to(*dev);
      kiln::tensor<float> b = kiln::random::normal<float>({rows, 1}, 8).to(*dev);
      const auto as = a.to_vector(), bs = b.to_vector();
      // a's transpose without its first row (an offset, strided view), broadcast with b.
      auto f = [&] {
        kiln::tensor<float> o = kiln::full<float>({rows, cols}, unwritten, *dev);
        o = a.transpose().narrow(0, 1, rows) * 3.0f + b;
        return o;
      };
      std::vector<double> ref(std::size_t(rows * cols));
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c)
          ref[std::size_t(r * cols + c)] =
              3.0 * double(as[std::size_t(c * (rows + 2) + r + 1)]) + double(bs[std::size_t(r)]);
      under_each(
          f, [&](const kiln::tensor<float>& out) { check_near(out, ref); }, rng);
    }
    for (const std::int64_t n : sizes(*dev)) {
      INFO(n << " integers");
      const kiln::tensor<std::int32_t> x =
          kiln::cast<std::int32_t>(kiln::random::uniform<double>({n}, 9, -1000, 1000));
      const auto xs = x.to_vector();
      kiln::tensor<std::int32_t> xd = x.to(*dev);
      auto f = [&] {
        kiln::tensor<std::int32_t> o = kiln::full<std::int32_t>({n}, -12345, *dev);
        o = xd * xd - 7 * xd;
        return o;
      };
      under_each(
          f,
          [&](const kiln::tensor<std::int32_t>& out) {
            const auto o = out.to_vector();
            REQUIRE(o.size() == xs.size());
            std::size_t bad = 0;
            for (std::size_t i = 0; i < o.size(); ++i) {
              const std::int64_t v = xs[i];
              bad += o[i] != v * v - 7 * v;
            }
            CHECK(bad == 0);
          },
          rng);
    }
    // Two outputs of one pass: both stored in every shape.
    const std::int64_t n = 12345;
    kiln::tensor<float> x = kiln::random::normal<float>({n}, 10).to(*dev);
    const auto xs = x.to_vector();
    kiln::tensor<float> p, q;
    auto f = [&] {
      p = kiln::full<float>({n}, unwritten, *dev);
      q = kiln::full<float>({n}, unwritten, *dev);
      kiln::eval(p = x * 2.0f, q = x - 1.0f);
      return 0;
    };
    under_each(
        f,
        [&](int) {
          const auto ps = p.to_vector(), qs = q.to_vector();
          std::size_t bad = 0;
          for (std::size_t i = 0; i < xs.size(); ++i)
            bad += ps[i] != 2.0f * xs[i] || qs[i] != xs[i] - 1.0f;
          CHECK(bad == 0);
        },
        rng);
  }
}

TEST_CASE("tuning a custom op's tunables on vulkan:0: each value its own code and the right "
          "values, the tuned value used later, values that change results rejected",
          "[tune][vulkan]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  const std::int64_t n = 5000;
  kiln::tensor<float> x = kiln::random::uniform<float>({n}, 21, -0.9, 0.9).to(*dev);
  const auto xs = x.to_vector();
  auto f = [&] {
    kiln::tensor<float> o = kiln::full<float>({n}, unwritten, *dev);
    o = geometric(x) * 2.0f;
    return o;
  };
  const tune::launch_site site = launches_of(f).back();
  const tune::space& sp = *site.sp;
  REQUIRE(sp.size() == jit_of(*dev).elementwise_space().size() + 1);
  const auto& step = sp.params().back();
  CHECK(step.name == "geometric.STEP");
  CHECK(step.values == std::vector<std::int64_t>{1, 2, 4, 8});
  CHECK(step.fallback == 4);
  for (std::int64_t v : step.values) {
    tune::config c = sp.defaults();
    c[sp.size() - 1] = v;
    INFO("under " << sp.format(c));
    const auto made = kiln::jit::compile_count().load();
    const std::vector<float> out = forced(site, c, f).to_vector();
    if (v != 4)
      CHECK(kiln::jit::compile_count().load() + kiln::jit::disk_hit_count().load() > made);
    std::size_t bad = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      double y = 0;
      for (int k = 0; k < 16; ++k)
        y = y * double(xs[std::size_t(i)]) + 1;
      bad += !(std::abs(out[std::size_t(i)] - 2 * y) <= 1e-5 * (1 + std::abs(2 * y)));
    }
    CHECK(bad == 0);
  }
  // Tuned: the choice is one of the values, and later evaluations take it.
  const std::string db = std::filesystem::temp_directory_path().string() + "/kiln-tune-ops-" +
                         std::to_string(::getpid()) + ".kdb";
  std::filesystem::remove(db);
  auto& sel = tune::selector::instance();
  sel.use(db);
  kiln::tune_options o;
  o.db = db;
  o.budget_seconds = 8;
  o.timing.min_runs = 3;
  o.timing.max_seconds = 0.02;
  // (The tuner takes the launch with the most work, the first of equals: no fill before it.)
  const auto rep = kiln::tune([&] { return kiln::tensor<float>(geometric(x) * 2.0f); }, o);
  CHECK(rep.result.rejected == 0);
  CHECK(rep.chosen.find("geometric.STEP=") != std::string::npos);
  (void)kiln::tensor<float>(geometric(x) * 2.0f);
  CHECK(tune::last_choice("elementwise").tuned);
  CHECK(tune::last_choice("elementwise").cfg == rep.result.chosen);
  // An op whose values change its results: every other value is rejected, the op's own kept.
  auto g = [&] { return kiln::tensor<float>(series(x)); };
  // Long enough for the whole space: within 8 s a loaded 2-core machine compiled too few
  // configurations on lavapipe to reach another TERMS value (CI, 2026-12-01).
  o.budget_seconds = 300;
  const auto rep2 = kiln::tune(g, o);
  CHECK(rep2.result.rejected > 0);
  CHECK(rep2.chosen.find("series.TERMS=12") != std::string::npos);
  sel.use("");
  std::filesystem::remove(db);
}

TEST_CASE("tuning: storage made while a tuner checks a configuration's output starts as 0xFF "
          "bytes, on the host and on vulkan:0",
          "[tune][vulkan]") {
  const kiln::device* dev = vulkan_or_skip();
  std::vector<kiln::device> devices{kiln::device{}};
  if (dev) devices.push_back(*dev);
  for (const kiln::device& d : devices) {
    INFO(d.str());
    kiln::detail::poison_new_storage() = true;
    const auto f = kiln::empty<float>({1000}, d);
    const auto i = kiln::empty<std::int32_t>({1000}, d);
    kiln::detail::poison_new_storage() = false;
    for (float v : f.to_vector())
      CHECK(std::isnan(v));
    for (std::int32_t v : i.to_vector())
      CHECK(v == -1);
  }
}

TEST_CASE("tuning: a custom op's values to tune over survive the record of launches, and the "
          "read-back kernel offers them as parameters",
          "[tune]") {
  const kiln::tensor<float> x(kiln::shape{16});
  kiln::jit::leaf_table lt;
  const auto e = geometric(x) + series(x);
  kiln::jit::collect(lt, e);
  const kiln::jit::kernel_ir ir = kiln::jit::lower(lt.pattern, false, 1, false, e);
  tune::token_writer w;
  tune::write_ir(w, ir);
  tune::op_arena arena;
  tune::token_reader r(w.str());
  const kiln::jit::kernel_ir back = tune::read_ir(r, arena);
  const tune::space base("elementwise", {{"workgroup", "", {32, 64}, 64}});
  const tune::space want = tune::op_tunables(ir, base).kernel_space();
  const tune::space got = tune::op_tunables(back, base).kernel_space();
  REQUIRE(got.size() == 3);
  for (std::size_t i = 0; i < want.size(); ++i) {
    CHECK(got.params()[i].name == want.params()[i].name);
    CHECK(got.params()[i].values == want.params()[i].values);
    CHECK(got.params()[i].fallback == want.params()[i].fallback);
  }
  CHECK(got.params()[2].name == "series.TERMS");
  CHECK(got.params()[2].values == std::vector<std::int64_t>{2, 4, 12});
}

TEST_CASE("tuning a custom op's tunables inside a reduction on vulkan:0: the reduction space "
          "gains the parameter, and each value sums the right values",
          "[tune][vulkan]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  const std::int64_t rows = 37, cols = 3001;
  kiln::tensor<float> x = kiln::random::uniform<float>({rows, cols}, 22, -0.9, 0.9).to(*dev);
  const auto xs = x.to_vector();
  std::vector<double> ref(std::size_t(rows), 0.0);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      double y = 0;
      for (int k = 0; k < 16; ++k)
        y = y * double(xs[std::size_t(r * cols + c)]) + 1;
      ref[std::size_t(r)] += y;
    }
  auto f = [&] { return kiln::tensor<float>(kiln::sum(geometric(x), {1})); };
  const tune::launch_site site = launches_of(f).front();
  REQUIRE(site.sp->family() == "reduction");
  const tune::space& sp = *site.sp;
  REQUIRE(sp.size() == jit_of(*dev).reduction_space().size() + 1);
  CHECK(sp.params().back().name == "geometric.STEP");
  const auto made = kiln::jit::compile_count().load() + kiln::jit::disk_hit_count().load();
  for (std::int64_t v : sp.params().back().values) {
    for (std::int64_t g : {32, 128}) {
      tune::config c = sp.defaults();
      c[tune::red::group] = g;
      c[sp.size() - 1] = v;
      INFO("under " << sp.format(c));
      const std::vector<float> out = forced(site, c, f).to_vector();
      for (std::int64_t r = 0; r < rows; ++r)
        CHECK(std::abs(out[std::size_t(r)] - ref[std::size_t(r)]) <=
              1e-5 * std::abs(ref[std::size_t(r)]));
    }
  }
  // Each value is code of its own: every (value, group) pair compiled (or loaded) its kernels.
  CHECK(kiln::jit::compile_count().load() + kiln::jit::disk_hit_count().load() >=
        made + 2 * sp.params().back().values.size());
}

TEST_CASE("tuning a custom reduction's own tunables on vulkan:0: the reduction space gains the "
          "parameter, and each value reduces to the right values with code of its own",
          "[tune][vulkan]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  if (!jit_of(*dev).unsupported(kiln::dtype::f64).empty()) return; // a double accumulator
  const std::int64_t rows = 23, cols = 5000;
  kiln::tensor<float> x = kiln::random::normal<float>({rows, cols}, 23).to(*dev);
  const auto xs = x.to_vector();
  std::vector<double> ref(std::size_t(rows), 0.0);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c)
      ref[std::size_t(r)] += double(xs[std::size_t(r * cols + c)]) * xs[std::size_t(r * cols + c)];
  auto f = [&] { return kiln::tensor<double>(split_sumsq(x, {1})); };
  const tune::launch_site site = launches_of(f).front();
  REQUIRE(site.sp->family() == "reduction");
  const tune::space& sp = *site.sp;
  REQUIRE(sp.size() == jit_of(*dev).reduction_space().size() + 1);
  CHECK(sp.params().back().name == "split_sumsq.SPLIT");
  CHECK(sp.params().back().values == std::vector<std::int64_t>{1, 2, 4});
  const auto made = kiln::jit::compile_count().load() + kiln::jit::disk_hit_count().load();
  for (std::int64_t v : sp.params().back().values) {
    tune::config c = sp.defaults();
    c[tune::red::group] = 32;
    c[sp.size() - 1] = v;
    INFO("under " << sp.format(c));
    const std::vector<double> out = forced(site, c, f).to_vector();
    for (std::int64_t r = 0; r < rows; ++r)
      CHECK(std::abs(out[std::size_t(r)] - ref[std::size_t(r)]) <= 1e-9 * ref[std::size_t(r)]);
  }
  CHECK(kiln::jit::compile_count().load() + kiln::jit::disk_hit_count().load() >= made + 3);
}
