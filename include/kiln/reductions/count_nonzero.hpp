#pragma once
// count_nonzero: how many elements are not zero (NaN counts, as numpy's), as i64.
#include "kiln/reductions/define.hpp"

namespace kiln {

namespace reductions {

struct count_nonzero {
  static constexpr const char* name = "count_nonzero";
  template <class T>
  using acc_t = std::int64_t;
  template <class T>
  using result = std::int64_t;
  static constexpr bool identity = true;
  template <class T>
  static std::int64_t init() {
    return 0;
  }
  template <class A, class V>
  static A combine(A a, V v, std::int64_t) {
    return a + (convert<bool>(v) ? 1 : 0);
  }
  template <class A>
  static A merge(A a, A b) {
    return a + b;
  }
  template <class R, class A>
  static R finish(A a, std::int64_t) {
    return a;
  }
  static constexpr bool has_simd = false;

  static dtype accumulator(dtype, bool) { return dtype::i64; }
  static reduction_code device(const device_spelling& s, const reduction_dtypes& t) {
    reduction_code c;
    c.init = "int64_t(0)";
    c.combine = "if (" + s.convert(t.value, dtype::b8, "v") + ") a += int64_t(1);";
    c.merge = "a += b;";
    c.finish = "a";
    return c;
  }

  using derivative = zero_gradient; // piecewise constant
};

} // namespace reductions

KILN_REDUCTION_FUNCTION(count_nonzero, reductions::count_nonzero)

} // namespace kiln
