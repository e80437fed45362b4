// Writing fused custom ops (README, "Writing your own op"): a new elementwise op with its
// derivative, a composite with a derivative of its own, a raw-source op and a custom
// reduction, each fused into the expression around it. Runs on the default device
// (KILN_DEVICE) and on vulkan:0 where there is one; checks every value and gradient against
// a double-precision loop on the host. Exit status 1 on a mismatch.
#include <kiln/kiln.hpp>

#include <cmath>
#include <cstdio>
#include <vector>

namespace mylib {
namespace ops {

// softsign(x) = x / (1 + |x|): host, SIMD, one device body, a derivative rule.
struct softsign : kiln::op_base {
  static constexpr const char* name = "softsign";
  using rule = kiln::rules::floating;
  static constexpr int cost = 10; // in adds: a division and an abs, not a math function
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
  static constexpr kiln::spelling device{.any = "($0 / ($T(1) + ($0 < $T(0) ? -$0 : $0)))"};
  struct derivative {
    template <class D, class G, class X>
    static auto vjp(const G& g, const X& x) {
      const auto d = 1.0f + kiln::abs(x);
      return D::tuple(D::mul(g, 1.0f / (d * d)));
    }
  };
};

// A smooth step between 0 and 1 as a raw body: statements, a branch, a named input.
struct smoothstep : kiln::op_base {
  static constexpr const char* name = "smoothstep";
  static constexpr const char* inputs = "x";
  static constexpr const char* output = "y";
  static constexpr const char* body = R"(
  $T t = x < $T(0) ? $T(0) : (x > $T(1) ? $T(1) : x);
  y = t * t * ($T(3) - $T(2) * t);
)";
  using rule = kiln::rules::floating;
  template <class T>
  static T host(T x) {
    const T t = x < T(0) ? T(0) : (x > T(1) ? T(1) : x);
    return t * t * (T(3) - T(2) * t);
  }
  struct derivative { // 6 t (1 - t) inside [0, 1], 0 outside
    template <class D, class G, class X>
    static auto vjp(const G& g, const X& x) {
      const auto t = kiln::clamp(x, 0.0f, 1.0f);
      return D::tuple(D::mul(g, 6.0f * t * (1.0f - t)));
    }
  };
};

} // namespace ops

KILN_UNARY_FUNCTION(softsign, ops::softsign)
KILN_UNARY_FUNCTION(smoothstep, ops::smoothstep)

// softplus(x) = log(1 + e^x) computed without overflow, its gradient the rule's sigmoid.
struct softplus_rule {
  template <class D, class G, class Out, class X>
  static auto vjp(const G& g, const Out&, const X& x) {
    return D::tuple(D::mul(g, kiln::sigmoid(x)));
  }
};
template <class X>
auto softplus(const X& x) {
  return kiln::custom_vjp(
      softplus_rule{},
      [](const auto& v) { return kiln::maximum(v, 0.0f) + kiln::log1p(kiln::exp(-kiln::abs(v))); },
      x);
}

// The sum of squares, scaled so that it neither overflows nor underflows (the state: the
// largest |x| and the sum of (|x| / largest)^2), finished as the 2-norm.
struct rms_def {
  static constexpr const char* name = "scaled_norm";
  struct state {
    double scale = 0, sum = 0;
  };
  template <class T>
  using acc_t = state;
  template <class T>
  using result = T;
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
    if (a.scale < b.scale) {
      const double q = a.scale / b.scale;
      return {b.scale, b.sum + a.sum * q * q};
    }
    if (b.scale == 0) return a;
    const double q = b.scale / a.scale;
    return {a.scale, a.sum + b.sum * q * q};
  }
  template <class R, class A>
  static R finish(const A& a, std::int64_t) {
    return R(a.scale * std::sqrt(a.sum));
  }
  static constexpr kiln::reduction_spelling device{
      .accumulator = kiln::reduction_accumulator::floating,
      .identity = "$A(0)",
      .identity2 = "$A(0)",
      .map = "b = v < $V(0) ? $A(-v) : $A(v);\nb2 = b > $A(0) ? $A(1) : $A(0);",
      .combine = "if (a < b) { $A q = a / b; a2 = b2 + a2 * q * q; a = b; }\n"
                 "else if (b > $A(0)) { $A q = b / a; a2 = a2 + b2 * q * q; }",
      .finish = "$R(a * kiln_sqrt(a2))"};
  using derivative = kiln::zero_gradient; // (not differentiated here)
};
KILN_REDUCTION_FUNCTION(scaled_norm, kiln::custom_reduction<rms_def>)

} // namespace mylib

namespace {

double softsign_ref(double x) { return x / (1 + std::fabs(x)); }
double smooth_ref(double x) {
  const double t = std::fmin(std::fmax(x, 0.0), 1.0);
  return t * t * (3 - 2 * t);
}
double softplus_ref(double x) { return std::fmax(x, 0.0) + std::log1p(std::exp(-std::fabs(x))); }

int failures = 0;
void check(const char* what, double got, double want, double tol) {
  const double err = std::fabs(got - want) / std::fmax(1.0, std::fabs(want));
  if (!(err <= tol)) {
    std::printf("  MISMATCH %s: %.9g, want %.9g\n", what, got, want);
    ++failures;
  }
}

void run(const kiln::device& dev) {
  std::printf("on %s:\n", dev.str().c_str());
  const std::int64_t n = 100000;
  const auto xh = kiln::random::normal<float>({n}, 7) * 3.0f;
  const kiln::tensor<float> x = kiln::tensor<float>(xh).to(dev);
  const std::vector<float> xv = kiln::tensor<float>(xh).to_vector();

  // One fused expression with all three elementwise kinds, and its gradient.
  const auto f = mylib::softsign(x) * mylib::smoothstep(x * 0.25f + 0.5f) + mylib::softplus(x);
  const std::vector<float> value = kiln::tensor<float>(f).to_vector();
  auto [dx] = kiln::grad(kiln::sum(f), x);
  const std::vector<float> grad = kiln::tensor<float>(dx).to_vector();
  double worst_v = 0, worst_g = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double v = xv[std::size_t(i)], u = v * 0.25 + 0.5, t = std::fmin(std::fmax(u, 0.0), 1.0);
    const double want = softsign_ref(v) * smooth_ref(u) + softplus_ref(v);
    const double dsoft = 1 / ((1 + std::fabs(v)) * (1 + std::fabs(v)));
    const double want_g =
        dsoft * smooth_ref(u) + softsign_ref(v) * 6 * t * (1 - t) * 0.25 + 1 / (1 + std::exp(-v));
    worst_v =
        std::fmax(worst_v, std::fabs(value[std::size_t(i)] - want) / std::fmax(1, std::fabs(want)));
    worst_g = std::fmax(worst_g,
                        std::fabs(grad[std::size_t(i)] - want_g) / std::fmax(1, std::fabs(want_g)));
  }
  std::printf("  softsign * smoothstep + softplus: worst relative error %.2e (value), %.2e "
              "(gradient)\n",
              worst_v, worst_g);
  check("elementwise value", worst_v, 0, 1e-5);
  check("elementwise gradient", worst_g, 0, 1e-5);

  // The custom reduction, its input fused: the norm of 1e30 x (squares of f32 would overflow).
  const float norm = mylib::scaled_norm(x * 1e30f).item();
  double m = 0, s = 0;
  for (float v : xv)
    m = std::fmax(m, std::fabs(double(v) * 1e30));
  for (float v : xv)
    s += (double(v) * 1e30 / m) * (double(v) * 1e30 / m);
  std::printf("  scaled_norm(1e30 x) = %.6g (reference %.6g)\n", double(norm), m * std::sqrt(s));
  check("custom reduction", norm, m * std::sqrt(s), 1e-5);
}

} // namespace

int main() {
  run(kiln::default_device());
  for (const auto& d : kiln::devices())
    if (d.available && d.device.kind() == kiln::device_kind::vulkan &&
        !(d.device == kiln::default_device())) {
      run(d.device);
      break;
    }
  if (failures) {
    std::printf("%d mismatches\n", failures);
    return 1;
  }
  std::printf("all values and gradients match the double-precision reference\n");
  return 0;
}
