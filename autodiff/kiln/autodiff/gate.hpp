#pragma once
// gate(v, m): v where the runtime scalar m is non-zero, else 0 (never 0 * v, so an inf or
// NaN in a switched-off term does not leak into a gradient). Autodiff uses it to switch
// adjoint terms on and off at run time without changing an expression's type: which leaf
// is "x" is a run-time fact (storage identity), the adjoint's type is compile-time.
#include "kiln/ops/define.hpp"
#include "kiln/ops/rules.hpp"

namespace kiln::ops {

struct gate : op_base {
  static constexpr const char* name = "gate";
  static constexpr spelling glsl{.any = "($1 != $T(0) ? $0 : $T(0))"};
  static constexpr spelling cuda{.any = "($1 != $T(0) ? $0 : $T(0))"};
  static constexpr spelling msl = cuda;
  static constexpr int arity = 2;
  // The host evaluator reads v only where m is non-zero: a switched-off adjoint term costs
  // its mask, not its arithmetic (eval/readers.hpp).
  static constexpr bool short_circuit = true;
  using rule = rules::arithmetic;
  template <class T>
  static T host(T v, T m) {
    return m != T(0) ? v : T(0);
  }
  template <class T>
  static constexpr bool simd_for = detail::is_simd_float<T>;
  template <class B>
  static B simd(const B& v, const B& m) {
    return xsimd::select(m != B(0), v, B(0));
  }
  // Linear in v; the switch itself is not differentiated.
  struct derivative {
    template <class D, class G, class V, class M>
    static auto vjp(const G& g, const V&, const M& m) {
      return D::tuple(D::gate(g, m), D::zero);
    }
  };
};

} // namespace kiln::ops
