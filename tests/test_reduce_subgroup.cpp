// Subgroup reductions (kernels/reduce_template.hpp's subgroup fold; the reduction family's
// `subgroup` parameter): the space's legality; forced on vulkan:0 at group sizes 32..256 in
// the thread, group and partial + merge stages for sum, max, argmax and argmin with ties,
// mean, var and a custom reduction (two accumulators each), any and all (a bool state), over
// f32, f64 and i32 inputs, against double references computed here; GLSL sources of the
// state types a run here does not reach (64-bit indices, 8-bit integers), which shaderc
// compiles and spirv-val accepts; and the CUDA sources with warp shuffles, which NVRTC
// compiles and ptxas assembles.
#include "vulkan_support.hpp" // first: it asks Catch for its listener interfaces

#include "cuda_codegen_support.hpp"
#include "cuda_support.hpp"
#include "device_stand_in.hpp"
#include "metal_support.hpp"

#include "kiln/jit/pipeline/reduce_plan.hpp"
#include "kiln/jit/tune.hpp"
#include "kiln/jit/vulkan/glsl_reduce.hpp"
#include "kiln/jit/vulkan/shaderc.hpp"
#include "kiln/kiln.hpp"

#include <cmath>
#include <limits>
#include <map>
#include <set>

namespace tune = kiln::jit::tune;
namespace jit = kiln::jit;
using kiln::dtype;

namespace mylib {

// max - min: a two-value state whose merge takes either order.
struct range_def {
  static constexpr const char* name = "range";
  struct state {
    double hi = -std::numeric_limits<double>::infinity();
    double lo = std::numeric_limits<double>::infinity();
  };
  template <class T>
  using acc_t = state;
  template <class T>
  using result = double;
  template <class A>
  static A identity() {
    return {};
  }
  template <class A, class V>
  static A map(V v) {
    return {double(v), double(v)};
  }
  template <class A>
  static A combine(const A& a, const A& b) {
    return {std::max(a.hi, b.hi), std::min(a.lo, b.lo)};
  }
  template <class R, class A>
  static R finish(const A& a, std::int64_t) {
    return R(a.hi - a.lo);
  }
  static constexpr kiln::reduction_spelling device{
      .accumulator = kiln::reduction_accumulator::floating,
      .identity = "$A(-1.0 / 0.0)",
      .identity2 = "$A(1.0 / 0.0)",
      .map = "b = $A(v);\nb2 = $A(v);",
      .combine = "a = b > a ? b : a;\na2 = b2 < a2 ? b2 : a2;",
      .finish = "$R(a - a2)"};
};
template <class X>
auto range(const X& x, kiln::axes over) {
  return kiln::reduce_node<kiln::custom_reduction<range_def>, X>(x, std::move(over), false);
}

} // namespace mylib

namespace {

kiln::jit::jit_backend& jit_of(const kiln::device& d) {
  auto* be = dynamic_cast<kiln::jit::jit_backend*>(kiln::backend_for(d).get());
  REQUIRE(be);
  return *be;
}

// f()'s values with the reduction configuration c forced on f's reduction kernel, whose id
// an unforced run learns where `kernel` is empty (the id is the same at every size here).
template <class F>
auto forced(const tune::config& c, std::string& kernel, F&& f) {
  if (kernel.empty()) {
    tune::launch_hook probe;
    {
      kiln::detail::hook_scope s(probe);
      (void)f();
    }
    for (const auto& site : probe.seen)
      if (site.sp->family() == "reduction") kernel = site.kernel;
    REQUIRE(!kernel.empty());
  }
  tune::launch_hook h;
  h.force = &c;
  h.family = "reduction";
  h.kernel = kernel;
  kiln::detail::hook_scope s(h);
  auto out = f();
  REQUIRE(tune::last_choice("reduction").cfg == c);
  return out;
}

// Per-row references in double, from the inputs alone.
struct row_refs {
  double sum = 0, max = 0, mean = 0, var = 0, range = 0;
  std::int64_t argmax = 0, argmin = 0;
  bool any = false, all = true; // of x >= hi, of x > -hi
};
row_refs refs_of(const double* x, std::int64_t n, double hi) {
  row_refs r;
  double lo = x[0];
  r.max = x[0];
  for (std::int64_t i = 0; i < n; ++i) {
    r.sum += x[i];
    if (x[i] > r.max) r.max = x[i], r.argmax = i; // the first of ties
    if (x[i] < lo) lo = x[i], r.argmin = i;
    r.any = r.any || x[i] >= hi;
    r.all = r.all && x[i] > -hi;
  }
  r.mean = r.sum / double(n);
  for (std::int64_t i = 0; i < n; ++i)
    r.var += (x[i] - r.mean) * (x[i] - r.mean);
  r.var /= double(n);
  r.range = r.max - lo;
  return r;
}

// Values with many ties (argmax's first index is tested): quarters in [-10, 10] for floats
// (exact sums), integers in [-50, 50].
template <class T>
std::vector<T> draws(std::size_t n) {
  if constexpr (std::is_integral_v<T>) return test::integers<T>(n, -50, 50);
  auto q = test::integers<std::int64_t>(n, -40, 40);
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = T(q[i]) / T(4);
  return v;
}

// few (the f64 and i32 shuffles; float runs every stage and group): on a CPU stand-in the
// two-pass shape only, on vulkan:0 one group per shape.
template <class T>
void check_type(const kiln::device& dev, const tune::space& sp, std::set<jit::reduce_stage>& stages,
                bool few = false) {
  std::map<std::string, std::string> ids; // kernel ids by reduction
  // Rows shorter than thread_below (an invocation each), rows of one chunk (a workgroup
  // each; 100 is shorter than most groups, so lanes start from the identity) and few long
  // rows (partials, then the merge): plan_reduction says which. On the CPU stand-in for
  // CUDA (a host thread per device thread, 0.2 ms a barrier), fewer rows of each kind.
  // There every distinct kernel is a host compile (~1-2 s), so one shape per stage runs, each
  // under one group (the smallest and the largest in turn); vulkan:0 runs all four, f32 under
  // all four groups and the other types under one each (all four over the shapes).
  using shape_t = std::pair<std::int64_t, std::int64_t>;
  const bool stand_in = test::stand_in(dev);
  const std::vector<shape_t> shapes =
      stand_in ? (few ? std::vector<shape_t>{{2, 30000}}
                      : std::vector<shape_t>{{300, 20}, {40, 100}, {2, 30000}})
               : std::vector<shape_t>{{300, 20}, {500, 100}, {2000, 300}, {3, 100000}};
  const std::vector<std::int64_t> all_groups = {32, 64, 128, 256};
  for (std::size_t si = 0; si < shapes.size(); ++si) {
    const auto& shape = shapes[si];
    // On a stand-in one group per shape, the smallest and the largest in turn; on vulkan:0
    // every group for f32, and one per shape, each in turn, for the other types.
    const std::vector<std::int64_t> groups =
        stand_in ? std::vector<std::int64_t>{si % 2 == 0 && !few ? 32 : 256}
        : few    ? std::vector<std::int64_t>{all_groups[si % all_groups.size()]}
                 : all_groups;
    const std::int64_t rows = shape.first, cols = shape.second; // (lambdas capture them)
    const std::vector<T> xv = draws<T>(std::size_t(rows * cols));
    const std::vector<double> xh(xv.begin(), xv.end());
    // any and all (a bool state) true in some short rows, false in others.
    const T hi = std::is_integral_v<T> ? T(49) : T(9.75);
    std::vector<row_refs> want;
    for (std::int64_t r = 0; r < rows; ++r)
      want.push_back(refs_of(xh.data() + r * cols, cols, double(hi)));
    const auto x = kiln::from(xv, kiln::shape{rows, cols}, dev);
    for (const std::int64_t group : groups) {
      tune::config c = sp.defaults();
      c[tune::red::group] = group;
      c[tune::red::groups] = 16;
      c[tune::red::subgroup] = 1;
      INFO(kiln::name(kiln::dtype_of<T>())
           << " " << rows << " x " << cols << " under " << sp.format(c));
      REQUIRE(sp.why_illegal(c).empty());
      const auto plan = jit::plan_reduction(cols, rows, c[tune::red::groups], "test", group,
                                            c[tune::red::thread_below]);
      stages.insert(plan.stage);
      auto values = [&](const std::string& what, auto&& make) {
        const auto v = forced(c, ids[what], [&] { return make().eval().to_vector(); });
        REQUIRE(v.size() == std::size_t(rows));
        std::vector<double> d(v.begin(), v.end());
        return d;
      };
      auto close = [](double got, double ref, double rel) {
        return std::fabs(got - ref) <= rel * std::fabs(ref) + 1e-9;
      };
      const auto sum = values("sum", [&] { return kiln::sum(x, {1}); });
      const auto max = values("max", [&] { return kiln::max(x, {1}); });
      const auto amax = values("argmax", [&] { return kiln::argmax(x, {1}); });
      const auto amin = values("argmin", [&] { return kiln::argmin(x, {1}); });
      const auto mean = values("mean", [&] { return kiln::mean(x, {1}); });
      const auto var = values("var", [&] { return kiln::var(x, {1}); });
      // The custom range's result is f64, which Metal has not: refused there, with the reason.
      std::vector<double> range;
      if (dev.kind() == kiln::device_kind::metal) {
        CHECK_THROWS_WITH(mylib::range(x, {1}).eval(), Catch::Contains("64-bit floats"));
        for (const auto& w : want)
          range.push_back(w.range);
      } else {
        range = values("range", [&] { return mylib::range(x, {1}); });
      }
      const auto any = values("any", [&] { return kiln::any(x >= hi, {1}); });
      const auto all = values("all", [&] { return kiln::all(x > T(-hi), {1}); });
      std::size_t wrong = 0;
      for (std::size_t r = 0; r < std::size_t(rows); ++r) {
        const row_refs& w = want[r];
        const bool ok = close(sum[r], w.sum, 1e-7) && max[r] == w.max &&
                        amax[r] == double(w.argmax) && amin[r] == double(w.argmin) &&
                        close(mean[r], w.mean, 1e-6) && close(var[r], w.var, 1e-5) &&
                        range[r] == w.range && any[r] == double(w.any) && all[r] == double(w.all);
        if (!ok && wrong++ == 0) {
          UNSCOPED_INFO("row " << r << ": sum " << sum[r] << " / " << w.sum << ", max " << max[r]
                               << " / " << w.max << ", argmax " << amax[r] << " / " << w.argmax
                               << ", argmin " << amin[r] << " / " << w.argmin << ", mean "
                               << mean[r] << " / " << w.mean << ", var " << var[r] << " / " << w.var
                               << ", range " << range[r] << " / " << w.range << ", any " << any[r]
                               << " / " << w.any << ", all " << all[r] << " / " << w.all);
        }
      }
      INFO(wrong << " of " << rows << " rows wrong");
      CHECK(wrong == 0);
    }
  }
}

} // namespace

TEST_CASE("subgroup reductions: legal only where the device has subgroup shuffles and the "
          "group holds whole subgroups, off by default, and records without it are another space",
          "[reduce][subgroup][tune]") {
  tune::device_limits l;
  const tune::space none = tune::reduction_space(l, 64);
  REQUIRE(none.params().size() == 4);
  CHECK(none.params()[tune::red::subgroup].values == std::vector<std::int64_t>{0});
  tune::config c = none.defaults();
  CHECK(c[tune::red::subgroup] == 0);
  c[tune::red::subgroup] = 1;
  CHECK(!none.why_illegal(c).empty());

  l.subgroup = 64; // AMD's wave64: a group of 32 is half a subgroup
  const tune::space wide = tune::reduction_space(l, 64);
  CHECK(wide.params()[tune::red::subgroup].values == std::vector<std::int64_t>{0, 1});
  c[tune::red::group] = 64;
  CHECK(wide.why_illegal(c).empty());
  c[tune::red::group] = 32;
  CHECK(wide.why_illegal(c).find("lanes per subgroup") != std::string::npos);
  c[tune::red::subgroup] = 0;
  CHECK(wide.why_illegal(c).empty());
  CHECK(wide.format(wide.defaults()) == "group=64,thread_below=64,groups=64,subgroup=0");
  // A database record of the three-parameter space stays valid: the new parameter takes its
  // default, the value it was measured at; a name the space lacks does not parse.
  const auto old = wide.parse("group=128,thread_below=64,groups=64");
  REQUIRE(old);
  CHECK(wide.format(*old) == "group=128,thread_below=64,groups=64,subgroup=0");
  CHECK(!wide.parse("group=128,per_thread=4"));
  CHECK(!wide.parse(""));
  CHECK(wide.parse("group=128,thread_below=64,groups=64,subgroup=1"));
}

TEST_CASE("subgroup reductions on each GPU device: sum, max, argmax and argmin with ties, mean, "
          "var and a custom reduction at group sizes 32 to 256, in every stage, match double "
          "references",
          "[reduce][subgroup][vulkan][cuda][metal]") {
  for (const kiln::device* dev : {vulkan_or_skip(), cuda_or_skip(), metal_or_skip()}) {
    if (!dev) continue;
    auto& be = jit_of(*dev);
    const tune::space& sp = be.reduction_space();
    REQUIRE(sp.params().size() == 4);
    if (sp.params()[tune::red::subgroup].values.size() < 2) {
      WARN(dev->str() << " has no subgroup shuffles in compute shaders: " << be.describe());
      continue;
    }
    std::set<jit::reduce_stage> stages;
    check_type<float>(*dev, sp, stages);
    // Metal has no 64-bit floats: no f64 inputs, and the custom range's result, the mean and
    // variance of integers are f64 (checked as errors in test_metal_exec), so f32 only there.
    if (dev->kind() != kiln::device_kind::metal) {
      check_type<double>(*dev, sp, stages, true);
      check_type<std::int32_t>(*dev, sp, stages, true);
    }
    CHECK(stages.count(jit::reduce_stage::thread) == 1);
    CHECK(stages.count(jit::reduce_stage::group) == 1);
    CHECK(stages.count(jit::reduce_stage::partial) == 1);
  }
}

namespace {

// The spec run_reduction makes for R over values of type V, with subgroup folding.
template <class R, class V>
jit::reduce_spec spec_of(jit::reduce_stage stage, int group = 64) {
  const dtype v = kiln::dtype_of<V>();
  jit::reduce_spec spec{&kiln::reduction_info_of<R>, stage, v,
                        kiln::reduction_info_of<R>.accumulator(v, true),
                        kiln::dtype_of<typename R::template result<V>>()};
  spec.group = group;
  spec.subgroup = true;
  return spec;
}

// A reduction kernel's CUDA source with subgroup folding (as run_reduction specializes it).
template <class R, class V>
std::string subgroup_source(const jit::kernel_ir& ir, jit::reduce_stage stage, int group) {
  const jit::reduce_spec spec = spec_of<R, V>(stage, group);
  const jit::kernel_ir sir = jit::stage_ir(ir, spec);
  return jit::cuda::generate_reduction(
      sir, jit::param_layout(sir, jit::cuda::max_param_bytes, jit::reduce_extras), spec);
}

template <class V>
void add_sources(std::vector<std::string>& srcs, const jit::kernel_ir& ir, int group) {
  namespace rd = kiln::reductions;
  for (const auto st :
       {jit::reduce_stage::group, jit::reduce_stage::partial, jit::reduce_stage::merge}) {
    srcs.push_back(subgroup_source<rd::sum, V>(ir, st, group));
    srcs.push_back(subgroup_source<rd::max, V>(ir, st, group));
    srcs.push_back(subgroup_source<rd::argmax, V>(ir, st, group));
    srcs.push_back(subgroup_source<rd::argmin, V>(ir, st, group));
    srcs.push_back(subgroup_source<rd::mean, V>(ir, st, group));
    srcs.push_back(subgroup_source<rd::prod, V>(ir, st, group));
    srcs.push_back(subgroup_source<rd::sum_sq_dev, V>(ir, st, group));
    srcs.push_back(subgroup_source<rd::count_nonzero, V>(ir, st, group));
    srcs.push_back(subgroup_source<kiln::custom_reduction<mylib::range_def>, V>(ir, st, group));
  }
}

} // namespace

TEST_CASE("subgroup reductions: CUDA sources with warp shuffles compile and assemble for every "
          "state type (float, double, int, long long, unsigned char, bool, with 32- and 64-bit "
          "indices)",
          "[reduce][subgroup][cuda][codegen]") {
  if (!cuda_test::nvrtc_or_skip()) return;
  namespace rd = kiln::reductions;
  const kiln::tensor<float> x(kiln::shape{8, 8});
  const kiln::tensor<double> d(kiln::shape{8, 8});
  const kiln::tensor<std::int32_t> i(kiln::shape{8, 8});
  const kiln::tensor<std::int64_t> l(kiln::shape{8, 8});
  const kiln::tensor<kiln::half> h(kiln::shape{8, 8});
  const kiln::tensor<bool> b(kiln::shape{8, 8});
  std::vector<std::string> srcs;
  add_sources<float>(srcs, cuda_test::ir_of(false, 1, false, x * 2.0f), 32);
  add_sources<double>(srcs, cuda_test::ir_of(true, 2, true, kiln::sqrt(d)), 256);
  add_sources<std::int32_t>(srcs, cuda_test::ir_of(true, 2, false, i + i), 64);
  add_sources<std::int64_t>(srcs, cuda_test::ir_of(false, 1, true, l * l), 128);
  add_sources<kiln::half>(srcs, cuda_test::ir_of(false, 1, false, h * h), 64);
  // bool: all/any's accumulator is a bool, max's an unsigned char.
  const auto bir = cuda_test::ir_of(true, 2, false, b && b);
  for (const auto st : {jit::reduce_stage::group, jit::reduce_stage::merge}) {
    srcs.push_back(subgroup_source<rd::all, bool>(bir, st, 64));
    srcs.push_back(subgroup_source<rd::any, bool>(bir, st, 64));
    srcs.push_back(subgroup_source<rd::max, bool>(bir, st, 64));
    srcs.push_back(subgroup_source<rd::argmax, bool>(bir, st, 64));
  }
  for (const auto& s : srcs) {
    CHECK(s.find("__shfl_down_sync(0xffffffffu, x, h)") != std::string::npos);
    CHECK(s.find("(threadIdx.x & 31u) == 0u") != std::string::npos);
  }
  const auto ptx = cuda_test::compile_and_assemble(cuda_test::bundle(srcs), 80);
  CHECK(!ptx.bytes.empty());
}

TEST_CASE("subgroup reductions: GLSL sources with 64-bit indices and sums, 8-bit and bool states "
          "compile with shaderc and pass spirv-val",
          "[reduce][subgroup][glsl]") {
  namespace rd = kiln::reductions;
  const kiln::tensor<std::int64_t> l(kiln::shape{8, 8});
  const kiln::tensor<bool> b(kiln::shape{8, 8});
  const kiln::tensor<double> d(kiln::shape{8, 8});
  const auto wide = cuda_test::ir_of(true, 2, true, l * l);     // 64-bit index and accumulators
  const auto bools = cuda_test::ir_of(false, 1, false, b && b); // bool and uint8_t states
  const auto dwide = cuda_test::ir_of(false, 1, true, d * d);   // double with 64-bit index
  auto glsl = [](const jit::kernel_ir& ir, const jit::reduce_spec& spec) {
    const jit::kernel_ir sir = jit::stage_ir(ir, spec);
    return jit::glsl::generate_reduction(sir, jit::param_layout(sir, 128, jit::reduce_extras),
                                         spec);
  };
  std::vector<std::pair<std::string, std::string>> srcs;
  for (const auto st : {jit::reduce_stage::group, jit::reduce_stage::merge}) {
    const std::string at = st == jit::reduce_stage::group ? " group" : " merge";
    srcs.push_back({"argmax i64" + at, glsl(wide, spec_of<rd::argmax, std::int64_t>(st))});
    srcs.push_back({"sum i64" + at, glsl(wide, spec_of<rd::sum, std::int64_t>(st))});
    srcs.push_back({"argmin f64" + at, glsl(dwide, spec_of<rd::argmin, double>(st))});
    srcs.push_back({"max bool" + at, glsl(bools, spec_of<rd::max, bool>(st))});
    srcs.push_back({"any bool" + at, glsl(bools, spec_of<rd::any, bool>(st))});
  }
  CHECK(srcs[0].second.find("int64_t kiln_shfl(int64_t x, uint h)") != std::string::npos);
  CHECK(srcs[3].second.find("uint8_t kiln_shfl(uint8_t x, uint h)") != std::string::npos);
  CHECK(srcs[4].second.find("bool kiln_shfl(bool x, uint h)") != std::string::npos);
  const auto& compiler = jit::glsl_compiler::instance();
  for (const auto& [what, src] : srcs) {
    INFO(what << ":\n" << src);
    const auto m = compiler.compile(src);
    const auto [ok, why] = jit::validate_spirv(m.words);
    INFO(why);
    CHECK((ok || why == "spirv-val not found"));
  }
}
