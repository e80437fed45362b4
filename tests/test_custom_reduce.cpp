// Custom reductions (kiln::custom_reduction, README "Custom reductions"; CuPy's
// ReductionKernel shape): a user's map, combine, finish and identity run as the built-ins do,
// with the expression feeding them fused, any axes and keepdims, on the host, on vulkan:0 in
// every stage of its kernel templates, and as CUDA code that compiles; a derivative rule
// where the definition gives one. Against a long double reference.
#include "cuda_codegen_support.hpp"
#include "cuda_support.hpp"
#include "grad_support.hpp"
#include "vulkan_support.hpp"

#include "kiln/kiln.hpp"

#include <cmath>

namespace mylib {

// The L_P norm without overflow or underflow: the state is the largest |x| seen (a) and
// the sum of (|x| / a)^P (a2), rescaled when a grows. P is a tunable.
template <int P>
struct lp_def {
  static constexpr const char* name = "lp_norm";
  static constexpr kiln::tunable tunables[] = {{"P", P}};
  struct state {
    double scale = 0, sum = 0;
  };
  template <class T>
  using acc_t = state;
  template <class T>
  using result = kiln::float_of_t<T>;
  template <class A>
  static A identity() {
    return {};
  }
  template <class A, class V>
  static A map(V v) {
    const double x = std::fabs(double(v));
    return {x, x > 0 ? 1.0 : 0.0};
  }
  template <class A>
  static A combine(const A& a, const A& b) {
    if (a.scale < b.scale) return {b.scale, b.sum + a.sum * std::pow(a.scale / b.scale, P)};
    if (b.scale > 0) return {a.scale, a.sum + b.sum * std::pow(b.scale / a.scale, P)};
    return a;
  }
  template <class R, class A>
  static R finish(const A& a, std::int64_t) {
    return R(a.scale * std::pow(a.sum, 1.0 / P));
  }
  static constexpr kiln::reduction_spelling device{
      .accumulator = kiln::reduction_accumulator::floating,
      .identity = "$A(0)",
      .identity2 = "$A(0)",
      .map = "b = v < $V(0) ? $A(-v) : $A(v);\nb2 = b > $A(0) ? $A(1) : $A(0);",
      .combine = "if (a < b) { a2 = b2 + a2 * kiln_pow(a / b, $A(${P})); a = b; }\n"
                 "else if (b > $A(0)) { a2 = a2 + b2 * kiln_pow(b / a, $A(${P})); }",
      .finish = "$R(a * kiln_pow(a2, $A(1) / $A(${P})))"};
  // d |x|_P = sign(x) (|x| / |x|_P)^(P-1) dx; 0 where the norm is 0.
  struct derivative {
    template <class D, class G, class N>
    static auto vjp(const G& g, const N& n) {
      using F = kiln::float_of_t<kiln::value_t<decltype(n.expr)>>;
      using R = kiln::custom_reduction<lp_def<P>>;
      const auto y = kiln::reduce_node<R, decltype(n.expr)>(n.expr, n.over, true);
      return D::mul(g, kiln::where(y != F(0),
                                   kiln::sign(n.expr) * kiln::pow(kiln::abs(n.expr) / y, F(P - 1)),
                                   F(0)));
    }
  };
};
template <int P, class X>
auto lp_norm(const X& x, kiln::axes over = {}, bool keepdims = false) {
  return kiln::reduce_node<kiln::custom_reduction<lp_def<P>>, X>(x, std::move(over), keepdims);
}

// The same norm with p a run-time value (params = 1): one kernel for every p.
struct lp_rt_def {
  static constexpr const char* name = "lp_norm_rt";
  static constexpr int params = 1;
  using state = lp_def<1>::state;
  template <class T>
  using acc_t = state;
  template <class T>
  using result = kiln::float_of_t<T>;
  template <class A>
  static A identity() {
    return {};
  }
  template <class A, class V>
  static A map(V v, std::span<const double>) {
    const double x = std::fabs(double(v));
    return {x, x > 0 ? 1.0 : 0.0};
  }
  template <class A>
  static A combine(const A& a, const A& b, std::span<const double> q) {
    if (a.scale < b.scale) return {b.scale, b.sum + a.sum * std::pow(a.scale / b.scale, q[0])};
    if (b.scale > 0) return {a.scale, a.sum + b.sum * std::pow(b.scale / a.scale, q[0])};
    return a;
  }
  template <class R, class A>
  static R finish(const A& a, std::int64_t, std::span<const double> q) {
    return R(a.scale * std::pow(a.sum, 1.0 / q[0]));
  }
  static constexpr kiln::reduction_spelling device{
      .accumulator = kiln::reduction_accumulator::floating,
      .identity = "$A(0)",
      .identity2 = "$A(0)",
      .map = "b = v < $V(0) ? $A(-v) : $A(v);\nb2 = b > $A(0) ? $A(1) : $A(0);",
      .combine = "if (a < b) { a2 = b2 + a2 * kiln_pow(a / b, $A($Q0)); a = b; }\n"
                 "else if (b > $A(0)) { a2 = a2 + b2 * kiln_pow(b / a, $A($Q0)); }",
      .finish = "$R(a * kiln_pow(a2, $A(1) / $A($Q0)))"};
  using derivative = kiln::zero_gradient; // (not differentiated here)
};
template <class X>
auto lp_norm_rt(const X& x, double p, kiln::axes over = {}, bool keepdims = false) {
  const double q[] = {p};
  return kiln::reduce_node<kiln::custom_reduction<lp_rt_def>, X>(x, std::move(over), keepdims, q);
}

// A sum whose name is a built-in's: it must not reach sum's hand-written kernels
// (providers), and sums squares instead. One-value state, no derivative rule.
struct sumsq_def {
  static constexpr const char* name = "sum";
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
    return A(v) * A(v);
  }
  template <class A>
  static A combine(const A& a, const A& b) {
    return a + b;
  }
  template <class R, class A>
  static R finish(const A& a, std::int64_t) {
    return R(a);
  }
  static constexpr kiln::reduction_spelling device{.accumulator =
                                                       kiln::reduction_accumulator::floating,
                                                   .identity = "$A(0)",
                                                   .map = "b = $A(v) * $A(v);",
                                                   .combine = "a = a + b;",
                                                   .finish = "$R(a)"};
};
KILN_REDUCTION_FUNCTION(sumsq, kiln::custom_reduction<sumsq_def>)

} // namespace mylib

namespace {

long double lp_ref(const std::vector<long double>& v, long double p) {
  long double m = 0, s = 0;
  for (auto x : v)
    m = std::max(m, std::fabs(x));
  if (m == 0) return 0;
  for (auto x : v)
    s += std::pow(std::fabs(x) / m, p);
  return m * std::pow(s, 1.0L / p);
}

} // namespace

TEST_CASE("custom reduction: an overflow-safe L_p norm over any axes with keepdims, its input "
          "fused, on the host against a long double reference",
          "[custom_reduce]") {
  const int rows = int(test::draw(2, 9)), cols = int(test::draw(1, 400));
  auto xv = test::uniform<double>(std::size_t(rows * cols), -3, 3);
  xv[0] = 1e300; // squares would overflow: the scaled state does not
  const auto x = kiln::from(xv, kiln::shape{rows, cols});
  const auto y =
      kiln::from(test::uniform<double>(std::size_t(rows * cols), -1, 1), kiln::shape{rows, cols});
  const auto yv = y.to_vector();
  for (int axis : {0, 1}) {
    const auto r = mylib::lp_norm<3>(x * 2.0 + y, {axis}, true).eval();
    CHECK(r.shape() == (axis == 0 ? kiln::shape{1, cols} : kiln::shape{rows, 1}));
    const auto got = r.to_vector();
    const int outer = axis == 0 ? cols : rows, inner = axis == 0 ? rows : cols;
    for (int o = 0; o < outer; ++o) {
      std::vector<long double> v;
      for (int i = 0; i < inner; ++i) {
        const std::size_t k = std::size_t(axis == 0 ? i * cols + o : o * cols + i);
        v.push_back((long double)xv[k] * 2 + yv[k]);
      }
      const long double want = lp_ref(v, 3);
      INFO("axis " << axis << " output " << o);
      CHECK(std::fabs((long double)got[std::size_t(o)] - want) <= 1e-13L * want);
    }
  }
  const double all = mylib::lp_norm<8>(x).item();
  std::vector<long double> v(xv.begin(), xv.end());
  CHECK(std::fabs((long double)all - lp_ref(v, 8)) <= 1e-13L * lp_ref(v, 8));
  // Empty axes: the identity's finish (0).
  const kiln::tensor<double> empty(kiln::shape{3, 0});
  CHECK(mylib::lp_norm<3>(empty, {1}).eval().to_vector() == std::vector<double>{0, 0, 0});
}

TEST_CASE("custom reduction: its derivative rule against finite differences",
          "[custom_reduce][grad]") {
  const auto xv = test::uniform<double>(3 * 11, -2, 2);
  const auto wv = test::uniform<double>(3, -2, 2);
  const auto x = kiln::from(xv, kiln::shape{3, 11}), w = kiln::from(wv, kiln::shape{3});
  const auto f = kiln::sum(w * mylib::lp_norm<3>(x, {1}));
  auto [g] = kiln::grad(f, x);
  grad_test::check_close(kiln::tensor<double>(g).to_vector(), grad_test::fd_grad(f, x), 1e-8,
                         "d |x|_3");
}

TEST_CASE("custom reduction: named like a built-in, it runs its own code, not the built-in's "
          "kernels",
          "[custom_reduce]") {
  const auto xv = test::uniform<float>(1000, -2, 2);
  const auto x = kiln::from(xv, kiln::shape{1000});
  double want = 0;
  for (float v : xv)
    want += double(v) * v;
  CHECK(mylib::sumsq(x).item() == Approx(want).epsilon(1e-12));
  if (const kiln::device* dev = vulkan_or_skip())
    CHECK(mylib::sumsq(kiln::from(xv, kiln::shape{1000}, *dev)).item() ==
          Approx(want).epsilon(1e-12));
}

TEST_CASE("custom reduction: on each GPU device in the thread, group and partial + merge stages, "
          "against the host",
          "[custom_reduce][vulkan][cuda]") {
  for (const kiln::device* dev : {vulkan_or_skip(), cuda_or_skip()}) {
    if (!dev) continue;
    // Shapes that take each stage (jit/pipeline/reduce_plan.hpp): rows shorter than a workgroup
    // (an invocation each), many rows of two workgroups' length (a workgroup each), few long
    // rows and one very long (partials, then the merge).
    for (const auto& [rows, cols] :
         {std::pair{4096, 7}, std::pair{4096, 100}, std::pair{8, 3000}, std::pair{1, 600000}}) {
      auto xv = test::uniform<float>(std::size_t(rows) * cols, -3, 3);
      xv[std::size_t(cols) / 2] = 3e30f; // past f32's square
      const auto xh = kiln::from(xv, kiln::shape{rows, cols});
      const auto xd = kiln::from(xv, kiln::shape{rows, cols}, *dev);
      const auto host = mylib::lp_norm<4>(xh * 0.5f, {1}).eval().to_vector();
      const auto got = mylib::lp_norm<4>(xd * 0.5f, {1}).eval().to_vector();
      REQUIRE(got.size() == host.size());
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < got.size(); ++i)
        wrong += std::fabs(double(got[i]) - host[i]) > 4e-7 * std::fabs(double(host[i]));
      INFO(wrong << " of " << got.size() << " outputs beyond 4e-7 (" << rows << " x " << cols
                 << ")");
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("custom reduction: its CUDA code compiles for sm_80 and assembles",
          "[custom_reduce][cuda][codegen]") {
  if (!cuda_test::nvrtc_or_skip()) return;
  const kiln::tensor<float> x(kiln::shape{16, 16});
  const auto ir = cuda_test::ir_of(false, 2, false, x * 2.0f);
  std::vector<std::string> srcs;
  for (const auto stage : {kiln::jit::reduce_stage::thread, kiln::jit::reduce_stage::group,
                           kiln::jit::reduce_stage::partial, kiln::jit::reduce_stage::merge})
    srcs.push_back(
        cuda_test::reduction_source<kiln::custom_reduction<mylib::lp_def<3>>, float>(ir, stage));
  CHECK(srcs[0].find("kiln_pow(") != std::string::npos);
  const auto ptx = cuda_test::compile_and_assemble(cuda_test::bundle(srcs), 80);
  CHECK(!ptx.bytes.empty());
}

TEST_CASE("custom reduction: a run-time parameter (p of an L_p norm) on the host and in every "
          "stage of each GPU device, a new value compiling nothing",
          "[custom_reduce][vulkan][cuda]") {
  const auto xv = test::uniform<double>(3 * 700, -3, 3);
  const auto x = kiln::from(xv, kiln::shape{3, 700});
  std::vector<const kiln::device*> devs{nullptr};
  for (const kiln::device* d : {vulkan_or_skip(), cuda_or_skip()})
    if (d) devs.push_back(d);
  for (const kiln::device* d : devs) {
    const kiln::device dev = d ? *d : kiln::device{};
    for (const auto& [rows, cols] : {std::pair{700, 3}, std::pair{3, 700}, std::pair{1, 300000}}) {
      auto v = test::uniform<float>(std::size_t(rows) * cols, -3, 3);
      const auto xd = kiln::from(v, kiln::shape{rows, cols}, dev);
      std::uint64_t kernels = 0;
      for (const double p : {1.5, 3.0, 7.25, 40.0}) {
        const std::uint64_t before =
            kiln::jit::compile_count().load() + kiln::jit::disk_hit_count().load();
        const auto got = mylib::lp_norm_rt(xd * 0.5f, p, {1}).eval().to_vector();
        kernels += kiln::jit::compile_count().load() + kiln::jit::disk_hit_count().load() - before;
        std::size_t wrong = 0;
        for (int r = 0; r < rows; ++r) {
          std::vector<long double> row;
          for (int c = 0; c < cols; ++c)
            row.push_back((long double)v[std::size_t(r) * cols + c] * 0.5L);
          const long double want = lp_ref(row, p);
          wrong += std::fabs((long double)got[std::size_t(r)] - want) > 2e-6L * want;
        }
        INFO(dev.str() << ", " << rows << " x " << cols << ", p = " << p);
        CHECK(wrong == 0);
      }
      // The first p may compile (or load from disk) the stage's kernels; the others reuse them.
      if (d) CHECK(kernels <= 2);
    }
  }
  // Host f64 at 1e-13 against long double.
  std::vector<long double> all(xv.begin(), xv.begin() + 700);
  CHECK(std::fabs((long double)mylib::lp_norm_rt(x, 2.5, {1}).eval().to_vector()[0] -
                  lp_ref(all, 2.5L)) <= 1e-13L * lp_ref(all, 2.5L));
  // The wrong number of parameters is a kiln::error naming the reduction.
  CHECK_THROWS_WITH(
      (kiln::reduce_node<kiln::custom_reduction<mylib::lp_rt_def>, kiln::tensor<double>>(
          x, {1}, false, {})),
      Catch::StartsWith("kiln::lp_norm_rt: the reduction takes another number"));
}

TEST_CASE("custom reduction: with a run-time parameter, its CUDA code compiles for sm_80 and "
          "assembles",
          "[custom_reduce][cuda][codegen]") {
  if (!cuda_test::nvrtc_or_skip()) return;
  const kiln::tensor<float> x(kiln::shape{16, 16});
  const auto ir = cuda_test::ir_of(false, 2, false, x * 2.0f);
  std::vector<std::string> srcs;
  for (const auto stage : {kiln::jit::reduce_stage::thread, kiln::jit::reduce_stage::group,
                           kiln::jit::reduce_stage::partial, kiln::jit::reduce_stage::merge})
    srcs.push_back(
        cuda_test::reduction_source<kiln::custom_reduction<mylib::lp_rt_def>, float>(ir, stage));
  CHECK(srcs[3].find("P.p0") != std::string::npos); // the merge pass's only scalar
  CHECK(srcs[0].find("P.p1") != std::string::npos); // after the expression's scalar
  const auto ptx = cuda_test::compile_and_assemble(cuda_test::bundle(srcs), 80);
  CHECK(!ptx.bytes.empty());
}
