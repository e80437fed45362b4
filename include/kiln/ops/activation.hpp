#pragma once
// Activations: the elementwise functions a layer applies around a product. Each is one op
// (host value, SIMD batch, one device body for GLSL, CUDA and MSL over kiln's device math,
// derivative), written so that no input overflows or cancels where the result is
// representable: gelu through erfc (0.5 x erfc(-x/sqrt 2) keeps its tiny negative tail,
// where 1 + erf(x/sqrt 2) rounds to 0), the tanh form of gelu and silu through a stable
// sigmoid, softplus as max(x, 0) + log1p(e^-|x|); gelu and silu are 0 at -inf (their limit),
// not NaN. softmax and log_softmax along an axis are composites (the max subtracted first).
#include "kiln/ops/math.hpp"
#include "kiln/reduce.hpp"

namespace kiln::ops {

namespace edges {
// sqrt(1/2), sqrt(2/pi) and 1/sqrt(2 pi).
inline constexpr double sqrt_half = 0.70710678118654752440;
inline constexpr double sqrt_2_pi = 0.79788456080286535588;
inline constexpr double inv_sqrt_2pi = 0.39894228040143267794;
inline constexpr double gelu_cubic = 0.044715;

template <class B>
B simd_erfc(const B& x) {
  if constexpr (std::is_same_v<typename B::value_type, float>)
    return erfc_f32::erfc(x); // see ops::erfc
  else
    return erf_f64::erfc(x);
}
// x p for gelu's and silu's x times a probability p in [0, 1]: -0 where p is 0, so that the
// limit at -inf is 0 (as below it), not -inf times 0.
template <class T>
requires std::is_floating_point_v<T> T times_tail(T x, T p) { return p == T(0) ? -T(0) : x * p; }
template <class B>
requires(!std::is_arithmetic_v<B>) B times_tail(const B& x, const B& p) {
  return xsimd::select(p == B(0), B(-0.0), x * p);
}
// 2 sqrt(2/pi) (x + 0.044715 x^3): the tanh form's argument doubled, x tanh-gelu = x sigmoid(it).
template <class T>
T gelu_tanh_arg(T x) {
  return T(2 * sqrt_2_pi) * (x + T(gelu_cubic) * x * x * x);
}
} // namespace edges

// max(x, 0); NaN stays NaN, -0 stays -0; integers keep their type.
struct relu : op_base {
  static constexpr const char* name = "relu";
  static constexpr spelling device{.any = "($0 < $T(0) ? $T(0) : $0)"};
  static constexpr int arity = 1;
  static constexpr int cost = 2;
  using rule = rules::arithmetic;
  template <class T>
  static T host(T x) {
    if constexpr (std::is_unsigned_v<T>)
      return x;
    else
      return x < T(0) ? T(0) : x;
  }
  template <class T>
  static constexpr bool simd_for = detail::is_simd_float<T>;
  template <class B>
  static B simd(const B& x) {
    return xsimd::select(x < B(0), B(0), x);
  }
  // d relu = dx where x > 0, else 0 (0 at 0).
  struct derivative {
    template <class D, class G, class X>
    static auto vjp(const G& g, const X& x) {
      return D::tuple(D::mask(g, x > 0.0));
    }
  };
};

// x where x >= 0, slope * x below; the slope is a scalar operand (a kernel parameter).
struct leaky_relu : op_base {
  static constexpr const char* name = "leaky_relu";
  static constexpr spelling device{.any = "($0 < $T(0) ? $1 * $0 : $0)"};
  static constexpr int arity = 2;
  static constexpr int cost = 3;
  using rule = rules::floating;
  template <class T>
  static T host(T x, T slope) {
    return x < T(0) ? slope * x : x;
  }
  template <class T>
  static constexpr bool simd_for = detail::is_simd_float<T>;
  template <class B>
  static B simd(const B& x, const B& slope) {
    return xsimd::select(x < B(0), slope * x, x);
  }
  // d/dx = slope below 0, else 1; d/dslope = x below 0.
  struct derivative {
    template <class D, class G, class X, class S>
    static auto vjp(const G& g, const X& x, const S& slope) {
      return D::tuple(D::mul(g, kiln::where(x < 0.0, slope, 1.0)), D::mask(D::mul(g, x), x < 0.0));
    }
  };
};

// x Phi(x) = 0.5 x erfc(-x / sqrt 2): the exact (erf) form.
struct gelu : op_base {
  static constexpr const char* name = "gelu";
  static constexpr spelling device{
      .any = "(kiln_erfc(-$0 * $T(0.70710678118654752440)) == $T(0) ? -$T(0) : $T(0.5) * $0 * "
             "kiln_erfc(-$0 * $T(0.70710678118654752440)))"};
  // GLSL reads an unsuffixed literal as a float: its f64 constants carry LF.
  static constexpr spelling glsl{
      .f32 = device.any,
      .f64 = "(kiln_erfc(-$0 * 0.70710678118654752440LF) == 0.0LF ? -0.0LF : 0.5LF * $0 * "
             "kiln_erfc(-$0 * 0.70710678118654752440LF))"};
  static constexpr int arity = 1;
  using rule = rules::floating;
  template <class T>
  static T host(T x) {
    return edges::times_tail(x, T(0.5) * std::erfc(-x * T(edges::sqrt_half)));
  }
  template <class T>
  static constexpr bool simd_for = detail::is_simd_float<T>;
  template <class B>
  static B simd(const B& x) {
    // f32: the tail's product formed with erfc's own rounding (no subnormal multiplies).
    if constexpr (std::is_same_v<typename B::value_type, float>)
      return erfc_f32::erfc_times(-x * B(float(edges::sqrt_half)), B(0.5f) * x);
    else
      return edges::times_tail(x, B(0.5) * edges::simd_erfc(-x * B(edges::sqrt_half)));
  }
  // d gelu = (Phi(x) + x phi(x)) dx.
  struct derivative {
    template <class D, class G, class X>
    static auto vjp(const G& g, const X& x) {
      return D::tuple(D::mul(g, 0.5 * kiln::erfc(-x * edges::sqrt_half) +
                                    x * edges::inv_sqrt_2pi * D::exp(-0.5 * x * x)));
    }
  };
};

// The tanh approximation, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), computed as
// x sigmoid(2 sqrt(2/pi) (x + 0.044715 x^3)) (the same function; no cancellation below 0).
struct gelu_tanh : op_base {
  static constexpr const char* name = "gelu_tanh";
  static constexpr spelling device{
      .any = "(kiln_sigmoid($T(1.59576912160573071176) * ($0 + $T(0.044715) * $0 * $0 * $0)) == "
             "$T(0) ? -$T(0) : $0 * kiln_sigmoid($T(1.59576912160573071176) * ($0 + "
             "$T(0.044715) * $0 * $0 * $0)))"};
  static constexpr spelling glsl{
      .f32 = device.any,
      .f64 = "(kiln_sigmoid(1.59576912160573071176LF * ($0 + 0.044715LF * $0 * $0 * $0)) == "
             "0.0LF ? -0.0LF : $0 * kiln_sigmoid(1.59576912160573071176LF * ($0 + 0.044715LF * "
             "$0 * $0 * $0)))"};
  static constexpr int arity = 1;
  using rule = rules::floating;
  template <class T>
  static T host(T x) {
    return edges::times_tail(x, edges::host_sigmoid(edges::gelu_tanh_arg(x)));
  }
  template <class T>
  static constexpr bool simd_for = detail::is_simd_float<T>;
  template <class B>
  static B simd(const B& x) {
    return edges::times_tail(x, edges::simd_sigmoid(edges::gelu_tanh_arg(x)));
  }
  // With s = sigmoid(u), u = 2 sqrt(2/pi) (x + 0.044715 x^3): s + x s (1 - s) u'(x).
  struct derivative {
    template <class D, class G, class X>
    static auto vjp(const G& g, const X& x) {
      const auto s = D::sigmoid(2 * edges::sqrt_2_pi * (x + edges::gelu_cubic * x * x * x));
      return D::tuple(D::mul(g, s + x * s * (1.0 - s) * (2 * edges::sqrt_2_pi) *
                                        (1.0 + 3 * edges::gelu_cubic * x * x)));
    }
  };
};

// x sigmoid(x) (swish).
struct silu : op_base {
  static constexpr const char* name = "silu";
  static constexpr spelling device{
      .any = "(kiln_sigmoid($0) == $T(0) ? -$T(0) : $0 * kiln_sigmoid($0))"};
  static constexpr int arity = 1;
  using rule = rules::floating;
  template <class T>
  static T host(T x) {
    return edges::times_tail(x, edges::host_sigmoid(x));
  }
  template <class T>
  static constexpr bool simd_for = detail::is_simd_float<T>;
  template <class B>
  static B simd(const B& x) {
    return edges::times_tail(x, edges::simd_sigmoid(x));
  }
  // d silu = s (1 + x (1 - s)) dx, s = sigmoid(x).
  struct derivative {
    template <class D, class G, class X>
    static auto vjp(const G& g, const X& x) {
      const auto s = D::sigmoid(x);
      return D::tuple(D::mul(g, s * (1.0 + x * (1.0 - s))));
    }
  };
};

// log(1 + e^x) = max(x, 0) + log1p(e^-|x|): never overflows, and keeps e^x's tail below 0.
struct softplus : op_base {
  static constexpr const char* name = "softplus";
  static constexpr spelling device{
      .any = "(($0 > $T(0) ? $0 : $T(0)) + kiln_log1p(kiln_exp($0 < $T(0) ? $0 : -$0)))"};
  static constexpr int arity = 1;
  using rule = rules::floating;
  template <class T>
  static T host(T x) {
    return (x > T(0) ? x : T(0)) + std::log1p(std::exp(-std::fabs(x)));
  }
  template <class T>
  static constexpr bool simd_for = detail::is_simd_float<T>;
  template <class B>
  static B simd(const B& x) {
    return xsimd::select(x > B(0), x, B(0)) + edges::simd_log1p(edges::simd_exp(-xsimd::abs(x)));
  }
  // d softplus = sigmoid(x) dx.
  struct derivative {
    template <class D, class G, class X>
    static auto vjp(const G& g, const X& x) {
      return D::tuple(D::mul(g, D::sigmoid(x)));
    }
  };
};

} // namespace kiln::ops

namespace kiln {
KILN_UNARY_FUNCTION(relu, ops::relu)
KILN_BINARY_FUNCTION(leaky_relu, ops::leaky_relu)
// leaky_relu(x) with PyTorch's default slope, 0.01.
template <class X>
requires expression<X>
auto leaky_relu(X&& x) { return leaky_relu(std::forward<X>(x), 0.01); }
KILN_UNARY_FUNCTION(gelu, ops::gelu)
KILN_UNARY_FUNCTION(gelu_tanh, ops::gelu_tanh)
KILN_UNARY_FUNCTION(silu, ops::silu)
KILN_UNARY_FUNCTION(softplus, ops::softplus)

// softmax along `axis` (negative counts from the end): e^(x - max) / sum(e^(x - max)), the
// maximum subtracted first so that no exponential overflows. (x - logsumexp(x), one reduction
// fewer, loses |logsumexp| ulps in the exponent: 2.7e-6 relative at f32 logits of 100.) A
// row of -inf only gives NaN, as numpy's.
template <class X>
requires expression<X>
auto softmax(const X& x, int axis = -1) {
  const auto e = kiln::exp(x - kiln::max(x, {axis}, true));
  return e / kiln::sum(e, {axis}, true);
}

// log(softmax(x)) along `axis`: x - max - log(sum(e^(x - max))), without the division.
template <class X>
requires expression<X>
auto log_softmax(const X& x, int axis = -1) {
  const auto z = x - kiln::max(x, {axis}, true);
  return z - kiln::log(kiln::sum(kiln::exp(z), {axis}, true));
}
} // namespace kiln
