// Raw device code, fused (README, "Raw device code"; CuPy's ElementwiseKernel shape): a
// user's op whose device code is a function body with named inputs and output, called from
// the one kernel of the expression around it. Against a double-precision reference on the
// host and vulkan:0; its CUDA code compiled and assembled; kernels keyed by the body's text,
// never the op's name; a broken body reported against its own lines; a device-only op on
// the host a clear error.
#include "cuda_codegen_support.hpp"
#include "cuda_support.hpp"
#include "grad_support.hpp"
#include "metal_support.hpp"
#include "vulkan_support.hpp"

#include "kiln/jit/codegen/raw.hpp"
#include "kiln/kiln.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace mylib {
namespace ops {

// e^x by its Taylor series of TERMS terms: a loop in the body, its bound a tunable.
template <int Terms>
struct exp_series : kiln::op_base {
  static constexpr const char* name = "exp_series";
  static constexpr const char* inputs = "x";
  static constexpr const char* output = "y";
  static constexpr kiln::tunable tunables[] = {{"TERMS", Terms}};
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
    for (int k = 1; k <= Terms; ++k) {
      t = t * x / T(k);
      y = y + t;
    }
    return y;
  }
  struct derivative { // d/dx of the series of N terms: the series of N - 1
    template <class D, class G, class X>
    static auto vjp(const G& g, const X& x) {
      return D::tuple(D::mul(g, kiln::make_node<exp_series<Terms - 1>>(x)));
    }
  };
};
template <>
struct exp_series<0> : kiln::op_base { // the series of no terms: 1
  static constexpr const char* name = "exp_series";
  static constexpr const char* inputs = "x";
  static constexpr const char* output = "y";
  static constexpr const char* body = "  y = $T(1) + x * $T(0);\n";
  using rule = kiln::rules::floating;
  template <class T>
  static T host(T) {
    return T(1);
  }
  using derivative = kiln::zero_gradient;
};

// a + (b - a) * clamp(t, 0, 1): three named inputs.
struct blend : kiln::op_base {
  static constexpr const char* name = "blend";
  static constexpr const char* inputs = "a, b, t";
  static constexpr const char* output = "r";
  static constexpr const char* body = R"(
  $T u = t < $T(0) ? $T(0) : (t > $T(1) ? $T(1) : t);
  r = a + (b - a) * u;
)";
  template <class T>
  static T host(T a, T b, T t) {
    const T u = t < T(0) ? T(0) : (t > T(1) ? T(1) : t);
    return a + (b - a) * u;
  }
  using derivative = kiln::zero_gradient;
};

// Another op of the same name, with another body (MLX's issue 3832: the stale kernel ran).
struct blend_other : kiln::op_base {
  static constexpr const char* name = "blend";
  static constexpr const char* inputs = "a, b, t";
  static constexpr const char* output = "r";
  static constexpr const char* body = "  r = a * t + b;\n";
  template <class T>
  static T host(T a, T b, T t) {
    return a * t + b;
  }
};

// blend's body under another name: one function, one kernel.
struct mix3 : blend {
  static constexpr const char* name = "mix3";
};

// A body that does not compile (line 2 names what does not exist), and one declared to
// run on GPU devices only.
struct broken : kiln::op_base {
  static constexpr const char* name = "broken";
  static constexpr const char* inputs = "x";
  static constexpr const char* output = "y";
  static constexpr const char* body = "  $T a = x * $T(2);\n  y = a + undefined_thing;\n";
  static constexpr bool device_only = true;
};
struct gpu_square : kiln::op_base {
  static constexpr const char* name = "gpu_square";
  static constexpr const char* inputs = "x";
  static constexpr const char* output = "y";
  static constexpr const char* body = "  y = x * x;\n";
  static constexpr bool device_only = true;
};

} // namespace ops

template <int Terms, class X>
auto exp_series(const X& x) {
  return kiln::make_node<ops::exp_series<Terms>>(x);
}
KILN_TERNARY_FUNCTION(blend, ops::blend)
KILN_TERNARY_FUNCTION(blend_other, ops::blend_other)
KILN_TERNARY_FUNCTION(mix3, ops::mix3)
KILN_UNARY_FUNCTION(broken, ops::broken)
KILN_UNARY_FUNCTION(gpu_square, ops::gpu_square)

} // namespace mylib

namespace {

double series_ref(double x, int terms) {
  double t = 1, y = 1;
  for (int k = 1; k <= terms; ++k)
    t *= x / k, y += t;
  return y;
}
double blend_ref(double a, double b, double t) { return a + (b - a) * std::clamp(t, 0.0, 1.0); }

std::uint64_t kernels_made() {
  return kiln::jit::compile_count().load() + kiln::jit::disk_hit_count().load();
}

// Devices to run on: the host, and vulkan:0 and cuda:0 where there are.
std::vector<kiln::device> devices() {
  std::vector<kiln::device> d{kiln::device{}};
  for (const kiln::device* v : {vulkan_or_skip(), cuda_or_skip(), metal_or_skip()})
    if (v) d.push_back(*v);
  return d;
}

} // namespace

TEST_CASE("raw op: a body with a loop and a tunable, fused with the expression around it, on "
          "the host and each GPU device, against a double-precision reference",
          "[raw_ops][vulkan][cuda][metal]") {
  const std::int64_t n = test::draw(700, 3000);
  const auto xv = test::uniform<float>(std::size_t(n), -2, 2),
             av = test::uniform<float>(std::size_t(n), -3, 3),
             bv = test::uniform<float>(std::size_t(n), -3, 3),
             tv = test::uniform<float>(std::size_t(n), -0.5f, 1.5f);
  for (const kiln::device& d : devices()) {
    const auto x = kiln::from(xv, kiln::shape{n}, d), a = kiln::from(av, kiln::shape{n}, d),
               b = kiln::from(bv, kiln::shape{n}, d), t = kiln::from(tv, kiln::shape{n}, d);
    const std::uint64_t before = kernels_made();
    const auto got =
        (mylib::exp_series<10>(x) * 0.5f + mylib::blend(a, b, t) - mylib::exp_series<3>(x))
            .to_vector();
    if (!d.is_host()) CHECK(kernels_made() - before <= 1); // one kernel (or a cached one)
    REQUIRE(got.size() == std::size_t(n));
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      const double s10 = series_ref(xv[i], 10), s3 = series_ref(xv[i], 3),
                   want = s10 * 0.5 + blend_ref(av[i], bv[i], tv[i]) - s3;
      // The series' rounding is relative to the sum of its terms' magnitudes (for x < 0
      // they alternate and cancel): the series of |x|.
      const double scale = series_ref(std::fabs(xv[i]), 10) * 0.5 + std::fabs(av[i]) +
                           std::fabs(bv[i]) * 2 + series_ref(std::fabs(xv[i]), 3);
      wrong += std::fabs(got[i] - want) > 16 * 1.2e-7 * scale;
    }
    INFO(wrong << " of " << n << " elements beyond 16 ulp on " << d.str());
    CHECK(wrong == 0);
  }
}

TEST_CASE("raw op: its derivative rule (the series of one term fewer) against finite "
          "differences",
          "[raw_ops][grad]") {
  constexpr int n = 23;
  const auto xv = test::uniform<double>(n, -2, 2), wv = test::uniform<double>(n, -2, 2);
  const auto x = kiln::from(xv, kiln::shape{n}), w = kiln::from(wv, kiln::shape{n});
  auto [dx] = kiln::grad(kiln::sum(w * mylib::exp_series<12>(x)), x);
  grad_test::check_close(kiln::tensor<double>(dx).to_vector(),
                         grad_test::fd_grad(kiln::sum(w * mylib::exp_series<12>(x)), x), 1e-8,
                         "d exp_series");
}

TEST_CASE("raw op: the same name with another body is another kernel with its own result, "
          "the same body under another name is the same kernel",
          "[raw_ops][vulkan][cuda][metal]") {
  for (const kiln::device* dev : {vulkan_or_skip(), cuda_or_skip(), metal_or_skip()}) {
    if (!dev) continue;
    const std::int64_t n = 513;
    const auto av = test::uniform<float>(n, -3, 3), bv = test::uniform<float>(n, -3, 3),
               tv = test::uniform<float>(n, -0.5f, 1.5f);
    const auto a = kiln::from(av, kiln::shape{n}, *dev), b = kiln::from(bv, kiln::shape{n}, *dev),
               t = kiln::from(tv, kiln::shape{n}, *dev);
    const auto r1 = mylib::blend(a, b, t).to_vector();
    const auto r2 = mylib::blend_other(a, b, t).to_vector();
    const std::uint64_t before = kernels_made();
    const auto r3 = mylib::mix3(a, b, t).to_vector();
    CHECK(kernels_made() == before); // blend's kernel, found by its source in memory
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < std::size_t(n); ++i) {
      const double w1 = blend_ref(av[i], bv[i], tv[i]), w2 = double(av[i]) * tv[i] + bv[i];
      wrong += std::fabs(r1[i] - w1) > 1e-5 * (1 + std::fabs(w1));
      wrong += std::fabs(r2[i] - w2) > 1e-5 * (1 + std::fabs(w2));
      wrong += r3[i] != r1[i];
    }
    INFO(wrong << " wrong values of " << 3 * n);
    CHECK(wrong == 0);
    // The op's name is nowhere in the source; the body's function name is its hash.
    const kiln::tensor<float> x(kiln::shape{4});
    const std::string src1 =
        cuda_test::elementwise_source(cuda_test::ir_of(false, 1, false, mylib::blend(x, x, x)));
    const std::string src2 = cuda_test::elementwise_source(
        cuda_test::ir_of(false, 1, false, mylib::blend_other(x, x, x)));
    const std::string src3 =
        cuda_test::elementwise_source(cuda_test::ir_of(false, 1, false, mylib::mix3(x, x, x)));
    CHECK(src1.find("blend") == std::string::npos);
    CHECK(src1 != src2);
    CHECK(src1 == src3);
  }
}

TEST_CASE("raw op: a body that does not compile is a kiln::error naming the op and the "
          "body's line, from glslang on vulkan:0 and from NVRTC",
          "[raw_ops][vulkan][cuda][codegen]") {
  if (const kiln::device* dev = vulkan_or_skip()) {
    const auto x = kiln::from(test::uniform<float>(64, -1, 1), kiln::shape{64}, *dev);
    try {
      (void)(mylib::broken(x) + 1.0f).eval();
      FAIL("a raw op with a broken body compiled on vulkan:0");
    } catch (const kiln::error& e) {
      INFO(e.what());
      CHECK(e.op() == "broken");
      CHECK(e.reason() == "the raw op's device body does not compile (GLSL)");
      CHECK(std::string(e.what()).find("broken body line 2:") != std::string::npos);
      CHECK(std::string(e.what()).find("undefined_thing") != std::string::npos);
    }
  }
  if (!cuda_test::nvrtc_or_skip()) return;
  const kiln::tensor<float> x(kiln::shape{4});
  const std::string src =
      cuda_test::elementwise_source(cuda_test::ir_of(false, 1, false, mylib::broken(x) * 2.0f));
  try {
    (void)cuda_test::compile_and_assemble(src, 80);
    FAIL("a raw op with a broken body compiled with NVRTC");
  } catch (const kiln::error& e) {
    try {
      kiln::jit::codegen::rethrow_raw_body_error(e, src, "CUDA C++");
    } catch (const kiln::error& r) {
      INFO(r.what());
      CHECK(r.op() == "broken");
      CHECK(std::string(r.what()).find("broken body line 2:") != std::string::npos);
    }
  }
}

TEST_CASE("raw op: a device-only op on the host is a kiln::error naming it, and runs on "
          "each GPU device",
          "[raw_ops][vulkan][cuda][metal]") {
  const auto xv = test::uniform<float>(100, -3, 3);
  const auto x = kiln::from(xv, kiln::shape{100});
  try {
    (void)(mylib::gpu_square(x) + 1.0f).eval();
    FAIL("a device-only op ran on the host");
  } catch (const kiln::error& e) {
    INFO(e.what());
    CHECK(e.op() == "gpu_square");
    CHECK(std::string(e.what()).find("device_only") != std::string::npos);
  }
  CHECK_THROWS_AS(kiln::sum(mylib::gpu_square(x)).item(), kiln::error);
  for (const kiln::device* dev : {vulkan_or_skip(), cuda_or_skip(), metal_or_skip()}) {
    if (!dev) continue;
    const auto xd = kiln::from(xv, kiln::shape{100}, *dev);
    const auto got = (mylib::gpu_square(xd) + 1.0f).to_vector();
    for (std::size_t i = 0; i < got.size(); ++i)
      CHECK(got[i] == Approx(double(xv[i]) * xv[i] + 1).epsilon(1e-6));
    CHECK(kiln::sum(mylib::gpu_square(xd)).item() ==
          Approx(std::accumulate(xv.begin(), xv.end(), 0.0, [](double s, float v) {
            return s + double(v) * v;
          })).epsilon(1e-5));
  }
}

TEST_CASE("raw op: the CUDA code of raw ops compiles for sm_80 and assembles",
          "[raw_ops][cuda][codegen]") {
  const kiln::tensor<float> x(kiln::shape{4, 4});
  const kiln::tensor<double> xd(kiln::shape{4, 4});
  const std::string f32 = cuda_test::elementwise_source(
      cuda_test::ir_of(false, 2, false, mylib::exp_series<6>(x) + mylib::blend(x, x, x)));
  const std::string f64 = cuda_test::elementwise_source(
      cuda_test::ir_of(true, 2, true, mylib::exp_series<6>(xd) * mylib::gpu_square(xd)));
  CHECK(f32.find("for (int k = 1; k <= 6; ++k)") != std::string::npos);
  CHECK(f64.find("inline double kx_") != std::string::npos);
  if (!cuda_test::nvrtc_or_skip()) return;
  const auto ptx = cuda_test::compile_and_assemble(cuda_test::bundle({f32, f64}), 80);
  CHECK(!ptx.bytes.empty());
}
