// A user's own op, defined outside namespace kiln with the catalog's one-definition mechanism
// (README, "Writing your own op"): host value, SIMD batch, one device body shared by GLSL and
// CUDA, a derivative rule. It fuses into the pass around it on the host and on vulkan:0, its
// CUDA code compiles and assembles, its gradient matches finite differences; an op with no
// device body is a clear error on a device, and runs on the host.
#include "cuda_codegen_support.hpp"
#include "cuda_support.hpp"
#include "grad_support.hpp"
#include "metal_support.hpp"
#include "vulkan_support.hpp"

#include "kiln/jit/vulkan/glsl.hpp"

#include "kiln/kiln.hpp"

#include <cmath>
#include <limits>

namespace mylib {
namespace ops {

// softsign(x) = x / (1 + |x|), its derivative 1 / (1 + |x|)^2.
struct softsign : kiln::op_base {
  static constexpr const char* name = "softsign";
  using rule = kiln::rules::floating;
  static constexpr int cost = 10; // a division and an abs: not a math function
  template <class T>
  static T host(T x) {
    return x / (T(1) + std::fabs(x));
  }
  template <class T>
  static constexpr bool simd_for = std::is_same_v<T, float> || std::is_same_v<T, double>;
  template <class B>
  static B simd(const B& x) {
    return x / (B(1) + xsimd::abs(x));
  }
  // One body for GLSL and CUDA C++: operators and $T(...) casts mean the same in both.
  static constexpr kiln::spelling device{.any = "($0 / ($T(1) + ($0 < $T(0) ? -$0 : $0)))"};
  struct derivative {
    template <class D, class G, class X>
    static auto vjp(const G& g, const X& x) {
      const auto d = 1.0 + kiln::abs(x);
      return D::tuple(D::mul(g, 1.0 / (d * d)));
    }
  };
};

// Host only: no SIMD batch, no device body; the arithmetic promotion (op_base's rule).
struct cube_plus : kiln::op_base {
  static constexpr const char* name = "cube_plus";
  template <class T>
  static T host(T a, T b) {
    return a * a * a + b;
  }
};

// 2 e^x through kiln's device math name kiln_exp: GLSL's math library on vulkan, an
// overload over expf/exp in CUDA; one shared body serves both.
struct twice_exp : kiln::op_base {
  static constexpr const char* name = "twice_exp";
  using rule = kiln::rules::floating;
  template <class T>
  static T host(T x) {
    return T(2) * std::exp(x);
  }
  static constexpr kiln::spelling device{.any = "($T(2) * kiln_exp($0))"};
  struct derivative {
    template <class D, class G, class X>
    static auto vjp(const G& g, const X& x) {
      return D::tuple(D::mul(g, 2.0 * kiln::exp(x)));
    }
  };
};

// x^N, N a tunable: each N is an op of its own (its own kernels). CUDA overrides the shared
// body with a spelling of its own.
template <int N>
struct ipow : kiln::op_base {
  static constexpr const char* name = "ipow";
  using rule = kiln::rules::floating;
  static constexpr kiln::tunable tunables[] = {{"N", N}};
  template <class T>
  static T host(T x) {
    T r = 1;
    for (int k = 0; k < N; ++k)
      r *= x;
    return r;
  }
  static constexpr kiln::spelling device{.any = "kiln_pow($0, $T(${N}))"};
  static constexpr kiln::spelling cuda{.f32 = "powf($0, float(${N}))",
                                       .f64 = "pow($0, double(${N}))"};
  using derivative = kiln::zero_gradient; // (not differentiated in these tests)
};

} // namespace ops

KILN_UNARY_FUNCTION(twice_exp, ops::twice_exp)
template <int N, kiln::detail::any_expression X>
auto ipow(const X& x) {
  return kiln::make_node<ops::ipow<N>>(x);
}
KILN_UNARY_FUNCTION(softsign, ops::softsign)
KILN_BINARY_FUNCTION(cube_plus, ops::cube_plus)

} // namespace mylib

namespace {

double softsign_ref(double x) { return x / (1 + std::fabs(x)); }

// |got - want| within `ulps` units in the last place of T at `scale`, the magnitude of the
// terms summed (a sum that cancels is only as accurate as its terms).
template <class T>
bool near(double got, double want, double scale, double ulps) {
  const double eps = std::numeric_limits<T>::epsilon();
  return std::fabs(got - want) <= ulps * eps * std::max(scale, 1e-30);
}

} // namespace

TEST_CASE("custom op: a user's op outside namespace kiln, fused on the host, against a "
          "double-precision reference",
          "[custom_ops]") {
  const std::int64_t n = test::draw(1, 300); // not a multiple of a batch: the tail is checked
  const auto av = test::uniform<double>(std::size_t(n), -6, 6),
             bv = test::uniform<double>(std::size_t(n), -2, 2);
  {
    const auto a = kiln::from(av, kiln::shape{n}), b = kiln::from(bv, kiln::shape{n});
    const kiln::tensor<double> r = mylib::softsign(a) * b + 1.0;
    const kiln::tensor<double> c = mylib::cube_plus(a, b * 0.5); // no SIMD: lane by lane
    for (std::int64_t i = 0; i < n; ++i) {
      const auto k = std::size_t(i);
      INFO("f64 element " << i << " of " << n << ", a = " << av[k]);
      CHECK(near<double>(r.data()[i], softsign_ref(av[k]) * bv[k] + 1.0,
                         std::fabs(softsign_ref(av[k]) * bv[k]) + 1.0, 4));
      CHECK(near<double>(c.data()[i], av[k] * av[k] * av[k] + bv[k] * 0.5,
                         std::fabs(av[k] * av[k] * av[k]) + std::fabs(bv[k] * 0.5), 4));
    }
  }
  std::vector<float> af(av.begin(), av.end()), bf(bv.begin(), bv.end());
  const auto a = kiln::from(af, kiln::shape{n}), b = kiln::from(bf, kiln::shape{n});
  const kiln::tensor<float> r = mylib::softsign(a) * b + 1.0f;
  for (std::int64_t i = 0; i < n; ++i) {
    const auto k = std::size_t(i);
    INFO("f32 element " << i << " of " << n << ", a = " << af[k]);
    const double t = softsign_ref(af[k]) * double(bf[k]);
    CHECK(near<float>(r.data()[i], t + 1.0, std::fabs(t) + 1.0, 4));
  }
  // The op's type rule: integers compute in a float type (int32 in double), as kiln's own
  // math does.
  const kiln::tensor<std::int32_t> ints =
      kiln::from(std::vector<std::int32_t>{-3, 0, 5}, kiln::shape{3});
  const auto s = mylib::softsign(ints).eval();
  static_assert(std::is_same_v<decltype(s), const kiln::tensor<double>>);
  CHECK(s.to_vector() == std::vector<double>{-0.75, 0.0, 5.0 / 6.0});
}

TEST_CASE("custom op: an op without simd() computes lane by lane while the rest of its pass "
          "stays vectorized",
          "[custom_ops]") {
  const std::int64_t n = test::draw(1, 300);
  const auto av = test::uniform<double>(std::size_t(n), -3, 3),
             bv = test::uniform<double>(std::size_t(n), 0.25, 2);
  const auto a = kiln::from(av, kiln::shape{n}), b = kiln::from(bv, kiln::shape{n});
  // The pass runs on batches of 8 bytes (not the scalar loop), the user's op and kiln's own
  // pow (no simd() either) lane by lane inside it.
  const auto e = mylib::cube_plus(a, b) * b + kiln::pow(b, a) - mylib::softsign(a);
  static_assert(kiln::detail::lane_bytes<decltype(e)> == sizeof(double));
  // The host evaluator's cost model: softsign states its cost (cheap), pow and the user's
  // twice_exp (the floating rule, no stated cost) count as math functions.
  static_assert(kiln::detail::math_count<std::remove_cvref_t<decltype(e)>> == 1);
  static_assert(kiln::detail::math_count<decltype(mylib::twice_exp(a) + mylib::softsign(a))> == 1);
  static_assert(kiln::detail::op_cost<mylib::ops::softsign> == 10);
  const std::vector<float> af(av.begin(), av.end()), bf(bv.begin(), bv.end());
  const auto a32 = kiln::from(af, kiln::shape{n}), b32 = kiln::from(bf, kiln::shape{n});
  const auto e32 = mylib::cube_plus(a32, b32) * b32 + kiln::pow(b32, a32);
  static_assert(kiln::detail::lane_bytes<decltype(e32)> == sizeof(float));
  const auto got = kiln::tensor<double>(e).to_vector();
  const auto got32 = kiln::tensor<float>(e32).to_vector();
  for (std::int64_t i = 0; i < n; ++i) {
    const auto k = std::size_t(i);
    INFO("element " << i << " of " << n << ", a = " << av[k] << ", b = " << bv[k]);
    const double c = av[k] * av[k] * av[k] + bv[k], p = std::pow(bv[k], av[k]);
    const double s = softsign_ref(av[k]);
    CHECK(near<double>(got[k], c * bv[k] + p - s,
                       std::fabs(c * bv[k]) + std::fabs(av[k] * av[k] * av[k] * bv[k]) + p + 1, 8));
    const double a3 = double(af[k]), b3 = double(bf[k]);
    const double c3 = a3 * a3 * a3 + b3;
    CHECK(near<float>(got32[k], c3 * b3 + std::pow(b3, a3),
                      std::fabs(a3 * a3 * a3 * b3) + std::fabs(b3 * b3) + std::pow(b3, a3), 8));
  }
  // A reduction's fused prologue reads through the same lanes.
  const double total = kiln::sum(mylib::cube_plus(a, b) * 2.0).item();
  double want = 0, scale = 0;
  for (std::size_t k = 0; k < av.size(); ++k)
    want += 2 * (av[k] * av[k] * av[k] + bv[k]),
        scale += 2 * (std::fabs(av[k] * av[k] * av[k]) + bv[k]);
  CHECK(near<double>(total, want, scale, 8 * double(n)));
}

TEST_CASE("custom op: a user's op on each GPU device, one fused kernel, against the host",
          "[custom_ops][vulkan][cuda][metal]") {
  for (const kiln::device* dev : {vulkan_or_skip(), cuda_or_skip(), metal_or_skip()}) {
    if (!dev) continue;
    const std::int64_t n = test::draw(1000, 5000);
    const auto av = test::uniform<float>(std::size_t(n), -6, 6),
               bv = test::uniform<float>(std::size_t(n), -2, 2);
    const auto a = kiln::from(av, kiln::shape{n}, *dev), b = kiln::from(bv, kiln::shape{n}, *dev);
    const std::vector<float> got = (mylib::softsign(a) * b + 1.0f).to_vector();
    REQUIRE(got.size() == std::size_t(n));
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      const double t = softsign_ref(av[i]) * double(bv[i]);
      wrong += !near<float>(got[i], t + 1.0, std::fabs(t) + 1.0, 8);
    }
    INFO(wrong << " of " << n << " elements beyond 8 ulp of the double reference");
    CHECK(wrong == 0);
  }
}

TEST_CASE("custom op: without a device body, a kiln::error naming the op on vulkan:0",
          "[custom_ops][vulkan]") {
  const kiln::device* dev = vulkan_or_skip();
  if (!dev) return;
  const auto a = kiln::from(test::uniform<float>(64, -1, 1), kiln::shape{64}, *dev);
  try {
    (void)mylib::cube_plus(a, a).eval();
    FAIL("evaluating an op without a GLSL spelling on vulkan:0 did not throw");
  } catch (const kiln::error& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(e.op() == "cube_plus");
    CHECK(what.find("no GLSL spelling for f32") != std::string::npos);
    CHECK(what.find("on vulkan:0") != std::string::npos);
  }
}

TEST_CASE("custom op: the CUDA code of a user's op compiles for sm_80 and assembles",
          "[custom_ops][cuda][codegen]") {
  if (!cuda_test::nvrtc_or_skip()) return;
  const kiln::tensor<float> x(kiln::shape{4, 4}), y(kiln::shape{4, 4});
  const kiln::tensor<double> xd(kiln::shape{4, 4});
  const std::string f32 = cuda_test::elementwise_source(
      cuda_test::ir_of(false, 1, false, mylib::softsign(x) * y + 1.0f));
  const std::string f64 =
      cuda_test::elementwise_source(cuda_test::ir_of(true, 2, true, mylib::softsign(xd)));
  // The shared body is in the kernel, with $T as the compute type.
  CHECK(f32.find("float(1) + (") != std::string::npos);
  CHECK(f64.find("double(1) + (") != std::string::npos);
  const auto ptx = cuda_test::compile_and_assemble(cuda_test::bundle({f32, f64}), 80);
  const std::string text(reinterpret_cast<const char*>(ptx.bytes.data()), ptx.bytes.size());
  CHECK(text.find(".entry kiln_kernel_1") != std::string::npos);
}

TEST_CASE("custom op: its derivative rule against finite differences, first and second order",
          "[custom_ops][grad]") {
  constexpr int n = 37;
  const auto xv = test::uniform<double>(n, -3, 3), wv = test::uniform<double>(n, -2, 2);
  const auto x = kiln::from(xv, kiln::shape{n}), w = kiln::from(wv, kiln::shape{n});
  auto [dx] = kiln::grad(kiln::sum(w * mylib::softsign(x)), x);
  const auto got = kiln::tensor<double>(dx).to_vector();
  std::vector<double> want(n), want2(n);
  for (int i = 0; i < n; ++i) {
    want[std::size_t(i)] = wv[std::size_t(i)] * grad_test::fd1(softsign_ref, xv[std::size_t(i)]);
    // d/dx of the first derivative 1 / (1 + |x|)^2 (smooth away from 0: kept away below).
    want2[std::size_t(i)] = grad_test::fd1(
        [](double v) { return 1 / ((1 + std::fabs(v)) * (1 + std::fabs(v))); }, xv[std::size_t(i)]);
  }
  // Within a step of 0, the differences straddle the kink of |x| (the second derivative
  // jumps there): their error is 1e-5, not the rule's. Both orders leave those points out.
  const auto check_away_from_kink = [&](const std::vector<double>& g, const std::vector<double>& e,
                                        double tol, const char* what) {
    std::vector<double> gs, es;
    for (int i = 0; i < n; ++i)
      if (std::fabs(xv[std::size_t(i)]) > 1e-2)
        gs.push_back(g[std::size_t(i)]), es.push_back(e[std::size_t(i)]);
    grad_test::check_close(gs, es, tol, what);
  };
  check_away_from_kink(got, want, 1e-6, "softsign d/dx");
  // Second order: the derivative of sum(d softsign / dx), through the rule's expression.
  auto [d1] = kiln::grad(kiln::sum(mylib::softsign(x)), x);
  auto [d2] = kiln::grad(kiln::sum(d1), x);
  check_away_from_kink(kiln::tensor<double>(d2).to_vector(), want2, 1e-5, "softsign d2/dx2");
}

TEST_CASE("custom op: a tunable and a kiln_ math name in a shared body, on the host and "
          "each GPU device, against a double-precision reference",
          "[custom_ops][vulkan][cuda][metal]") {
  const std::int64_t n = test::draw(500, 3000);
  const auto av = test::uniform<float>(std::size_t(n), 0.5f, 2.0f),
             bv = test::uniform<float>(std::size_t(n), -3.0f, 3.0f);
  std::vector<const kiln::device*> devices{nullptr};
  for (const kiln::device* dev : {vulkan_or_skip(), cuda_or_skip(), metal_or_skip()})
    if (dev) devices.push_back(dev);
  for (const kiln::device* dev : devices) {
    const kiln::device d = dev ? *dev : kiln::device{};
    const auto a = kiln::from(av, kiln::shape{n}, d), b = kiln::from(bv, kiln::shape{n}, d);
    // Two values of the tunable in one expression: two ops, two device functions.
    const auto got = (mylib::ipow<3>(a) + mylib::ipow<5>(a) * mylib::twice_exp(b)).to_vector();
    REQUIRE(got.size() == std::size_t(n));
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      const double x = av[i], p3 = x * x * x, p5 = p3 * x * x, e = 2 * std::exp(double(bv[i]));
      wrong += !near<float>(got[i], p3 + p5 * e, p3 + p5 * e, 16);
    }
    INFO(wrong << " of " << n << " elements beyond 16 ulp on " << d.str());
    CHECK(wrong == 0);
  }
}

TEST_CASE("custom op: GLSL takes the shared body, CUDA its override, both with the tunable's "
          "value, and CUDA compiles and assembles kiln_ math names",
          "[custom_ops][cuda][codegen]") {
  const kiln::tensor<float> x(kiln::shape{8});
  const kiln::tensor<double> xd(kiln::shape{8});
  const auto ir = cuda_test::ir_of(false, 1, false, mylib::ipow<5>(x));
  const std::string glsl = kiln::jit::glsl::generate(ir, kiln::jit::param_layout(ir, 128));
  CHECK(glsl.find("kiln_pow(v0, float(5))") != std::string::npos);
  CHECK(glsl.find("float kiln_pow(float") != std::string::npos); // the math library's
  const std::string cuda = cuda_test::elementwise_source(ir);
  CHECK(cuda.find("powf(v0, float(5))") != std::string::npos);
  CHECK(cuda.find("kiln_pow") == std::string::npos);
  const std::string e32 = cuda_test::elementwise_source(
      cuda_test::ir_of(false, 1, false, mylib::twice_exp(x) + mylib::ipow<2>(x)));
  const std::string e64 =
      cuda_test::elementwise_source(cuda_test::ir_of(false, 1, false, mylib::twice_exp(xd)));
  CHECK(e32.find("(float(2) * kiln_exp(v0))") != std::string::npos);
  CHECK(e32.find("inline float kiln_exp(float a) { return expf(a); }") != std::string::npos);
  CHECK(e64.find("(double(2) * kiln_exp(v0))") != std::string::npos);
  if (!cuda_test::nvrtc_or_skip()) return;
  const auto ptx = cuda_test::compile_and_assemble(cuda_test::bundle({cuda, e32, e64}), 80);
  CHECK(!ptx.bytes.empty());
}

TEST_CASE("custom op: a kiln_ name outside kiln's device math is a kiln::error naming the op",
          "[custom_ops][cuda][codegen]") {
  static constexpr kiln::spelling none{}, body{.any = "kiln_frobnicate($0)"};
  static constexpr kiln::jit::ir_op fake{"frobnicate", &none, &none, &none, &body};
  kiln::jit::kernel_ir ir;
  ir.inputs = {kiln::dtype::f32};
  ir.outputs = {kiln::dtype::f32};
  kiln::jit::ir_instr ld{kiln::jit::ir_code::load, kiln::dtype::f32, kiln::dtype::f32};
  ld.slot = 0;
  kiln::jit::ir_instr op{kiln::jit::ir_code::apply, kiln::dtype::f32, kiln::dtype::f32};
  op.nargs = 1;
  op.args = {ir.add(ld), -1, -1};
  op.op = &fake;
  ir.results = {ir.add(op)};
  CHECK_THROWS_WITH(cuda_test::elementwise_source(ir),
                    Catch::StartsWith("kiln::frobnicate: a device spelling calls kiln_frobnicate"));
}
