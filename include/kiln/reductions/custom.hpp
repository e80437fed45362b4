#pragma once
// A user's reduction (README, "Custom reductions"; CuPy's ReductionKernel shape):
// kiln::custom_reduction<Def> turns a definition of map, combine, finish and identity into
// the reduction protocol of define.hpp, so that it runs as the built-ins do: its input
// expression fused in front of it, any axes, keepdims, on the host and in the JIT's kernel
// templates (thread, group, and partial + merge stages), and differentiable where Def gives
// a rule.
//
// Def gives, on the host:
//   name;
//   template <class T> using acc_t = ...;     the state for values of type T (any copyable
//                                             type: a number, or a struct of two)
//   template <class T> using result = ...;    the result's element type
//   template <class A> static A identity();   the state of no values
//   template <class A, class V> static A map(V v);                the state of one value
//   template <class A> static A combine(const A& a, const A& b);  associative, commutative
//   template <class R, class A> static R finish(const A& a, std::int64_t n);  n: the count
// and on GPU devices `static constexpr kiln::reduction_spelling device{...}` (below); and
// optionally `derivative` (vjp<D>(g, node), as a built-in reduction's), `tunables`, and
// `static constexpr int params = N` run-time parameters (map, combine and finish then take
// a std::span<const double> last; the device code reads $Q0 ..; the node carries them).
#include "kiln/reductions/define.hpp"

#include <string>
#include <string_view>

namespace kiln {

// The device state's dtype for values of dtype `value`.
enum class reduction_accumulator {
  value,    // the value's own dtype (16-bit floats: f32)
  wide,     // f64 where the device has it, else f32, for floats; i64 for integers
  floating, // f64 where the device has it, else f32, for every value dtype
};

// A custom reduction's device code, C-family source shared by GLSL and CUDA C++. The state
// is `a` (and `a2` where identity2 is given), of type $A; $V is the value's type, $R the
// result's, $N the count folded into each output (an expression of the index type), $Q<k>
// run-time parameter k (a kernel parameter, f64 where the device has it, else f32),
// ${NAME} a tunable. kiln_ math names work as in ops.
struct reduction_spelling {
  reduction_accumulator accumulator = reduction_accumulator::wide;
  const char* identity = nullptr;  // an expression: the identity of a
  const char* identity2 = nullptr; // an expression: the identity of a2 (a two-value state)
  const char* map = nullptr;       // statements setting b (and b2) from v
  const char* combine = nullptr;   // statements folding (b, b2) into (a, a2)
  const char* finish = nullptr;    // an expression of (a, a2) and $N, of type $R
};

namespace detail {

template <class Def>
std::string reduction_source(const char* text, const device_spelling& s,
                             const reduction_dtypes& t) {
  std::string out;
  for (const char* p = text; *p; ++p) {
    if (*p != '$') {
      out += *p;
      continue;
    }
    const char c = p[1];
    if (c == 'A' || c == 'V' || c == 'R') {
      out += s.type(c == 'A' ? t.acc : c == 'V' ? t.value : t.result);
      ++p;
    } else if (c == 'N') {
      out += "(" + s.count + ")";
      ++p;
    } else if (c == 'Q' && p[2] >= '0' && p[2] < '0' + detail::param_count_of<Def>()) {
      out += s.param(p[2] - '0');
      p += 2;
    } else if (c == '{') {
      const std::string_view rest(p + 2);
      const std::size_t end = rest.find('}');
      const std::string_view name = rest.substr(0, end);
      const tunable* tn =
          find_tunable(s.tunables.empty() ? detail::tunables_of<Def>() : s.tunables, name);
      if (!tn || end == std::string_view::npos)
        throw error(Def::name, "the reduction's device code uses a tunable it does not declare",
                    "${" + std::string(name) + "}");
      out += std::to_string(tn->value);
      p += 2 + end;
    } else {
      throw error(Def::name,
                  "in a reduction's device code, `$` starts only $A, $V, $R, $N, $Q<k> or "
                  "${NAME}",
                  text);
    }
  }
  return out;
}

template <class Def>
constexpr bool custom_second() {
  return Def::device.identity2 != nullptr;
}

// The rule a definition without one gets: a sentence where gradients are asked for.
struct missing_reduction_rule {
  template <class D, class G, class N>
  static auto vjp(const G&, const N&) {
    static_assert(sizeof(N) == 0, "kiln: this custom reduction has no derivative rule (give its "
                                  "definition a `derivative`, or `using derivative = "
                                  "kiln::zero_gradient;`)");
    return D::zero;
  }
};
template <class Def>
struct custom_rule {
  using type = missing_reduction_rule;
};
template <class Def>
requires requires { typename Def::derivative; }
struct custom_rule<Def> {
  using type = typename Def::derivative;
};

} // namespace detail

template <class Def>
struct custom_reduction {
  static_assert(
      requires { Def::name; }, "kiln: a custom reduction needs `static constexpr "
                               "const char* name`");
  static constexpr const char* name = Def::name;
  // Hand-written kernels (providers) are for built-in reductions: a user's reduction named
  // like one never gets that one's kernel.
  static constexpr bool builtin = false;

  template <class T>
  using acc_t = typename Def::template acc_t<T>;
  template <class T>
  using result = typename Def::template result<T>;
  static constexpr bool identity = true;
  static constexpr bool has_simd = false;
  // Run-time parameters (at most 4): Def's map, combine and finish then take them last, as
  // a std::span<const double>; its device code reads them as $Q0 .. $Q3.
  static constexpr int params = detail::param_count_of<Def>();
  static constexpr std::span<const tunable> tunables = detail::tunables_of<Def>();
  static_assert(params >= 0 && params <= 4, "kiln: a custom reduction takes at most 4 run-time "
                                            "parameters");
  template <class T>
  static acc_t<T> init() {
    return Def::template identity<acc_t<T>>();
  }
  template <class A, class V>
  static A combine(const A& a, V v, std::int64_t) {
    return Def::combine(a, Def::template map<A>(v));
  }
  template <class A>
  static A merge(const A& a, const A& b) {
    return Def::combine(a, b);
  }
  template <class R, class A>
  static R finish(const A& a, std::int64_t n) {
    return Def::template finish<R>(a, n);
  }
  template <class A, class V>
  static A combine(const A& a, V v, std::int64_t, std::span<const double> q) {
    return Def::combine(a, Def::template map<A>(v, q), q);
  }
  template <class A>
  static A merge(const A& a, const A& b, std::span<const double> q) {
    return Def::combine(a, b, q);
  }
  template <class R, class A>
  static R finish(const A& a, std::int64_t n, std::span<const double> q) {
    return Def::template finish<R>(a, n, q);
  }

  static constexpr bool second = detail::custom_second<Def>();
  static dtype accumulator(dtype value, bool has_f64) {
    switch (Def::device.accumulator) {
    case reduction_accumulator::value:
      return ir::compute_dtype(value);
    case reduction_accumulator::wide:
      return reductions::wide_dtype(value, has_f64);
    default:
      return has_f64 ? dtype::f64 : dtype::f32;
    }
  }
  static reduction_code device(const device_spelling& s, const reduction_dtypes& t) {
    constexpr reduction_spelling d = Def::device;
    if (!d.identity || !d.map || !d.combine || !d.finish)
      throw error(Def::name,
                  "the reduction has no device code (`device` with identity, map, "
                  "combine and finish)",
                  "");
    auto src = [&](const char* text) { return detail::reduction_source<Def>(text, s, t); };
    const std::string A = s.type(t.acc);
    reduction_code c;
    c.init = src(d.identity);
    if (second) c.init2 = src(d.identity2);
    // The first stage folds each value: its own state (b, b2), then the combine.
    c.combine = "{\n" + A + " b;\n" + (second ? A + " b2;\n" : "") + src(d.map) + "\n" +
                src(d.combine) + "\n}";
    // Partial states meet as (b, b2): the same combine.
    c.merge = src(d.combine);
    c.finish = src(d.finish);
    return c;
  }

  using derivative = typename detail::custom_rule<Def>::type;
};

} // namespace kiln
