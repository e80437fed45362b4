// Ten user-defined ops (host, SIMD, one device body, a derivative rule each), each used in a
// fused statement and differentiated once: what a program with ten custom ops compiles.
#include <kiln/kiln.hpp>

#include <cstdio>

#include "ops10.inc"

namespace mylib {
namespace ops {
#define KILN_BENCH_OP(N)                                                                           \
  struct op##N : kiln::op_base {                                                                   \
    static constexpr const char* name = "op" #N;                                                   \
    using rule = kiln::rules::floating;                                                            \
    template <class T>                                                                             \
    static T host(T x) {                                                                           \
      return x / (T(N) + std::fabs(x));                                                            \
    }                                                                                              \
    template <class T>                                                                             \
    static constexpr bool simd_for = std::is_same_v<T, float> || std::is_same_v<T, double>;        \
    template <class B>                                                                             \
    static B simd(const B& x) {                                                                    \
      return x / (B(N) + xsimd::abs(x));                                                           \
    }                                                                                              \
    static constexpr kiln::spelling device{.any =                                                  \
                                               "($0 / ($T(" #N ") + ($0 < $T(0) ? -$0 : $0)))"};   \
    struct derivative {                                                                            \
      template <class D, class G, class X>                                                         \
      static auto vjp(const G& g, const X& x) {                                                    \
        const auto d = float(N) + kiln::abs(x);                                                    \
        return D::tuple(D::mul(g, float(N) / (d * d)));                                            \
      }                                                                                            \
    };                                                                                             \
  };
KILN_BENCH_FORMULAS(KILN_BENCH_OP)
} // namespace ops
#define KILN_BENCH_FN(N) KILN_UNARY_FUNCTION(op##N, ops::op##N)
KILN_BENCH_FORMULAS(KILN_BENCH_FN)
} // namespace mylib

int main() {
  const auto x = kiln::random::uniform<float>({1000}, 1, -3, 3).eval();
  const auto y = kiln::random::uniform<float>({1000}, 2, -1, 1).eval();
  double check = 0;
  kiln::tensor<float> r;
#define KILN_BENCH_USE(N)                                                                          \
  r = mylib::op##N(x) * y;                                                                         \
  check += kiln::sum(r).item();                                                                    \
  check += kiln::tensor<float>(std::get<0>(kiln::grad(kiln::sum(mylib::op##N(x) * y), x)))         \
               .to_vector()[0];
  KILN_BENCH_FORMULAS(KILN_BENCH_USE)
  std::printf("%.6f\n", check);
}
