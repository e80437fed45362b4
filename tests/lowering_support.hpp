#pragma once
// Kernel IR from expressions without a device, as the JIT lowers a pass, and reductions as
// the executor specializes them (the compile-only tests of every dialect:
// cuda_codegen_support.hpp, msl_codegen_support.hpp).
#include "support.hpp"

#include "kiln/ir/lower.hpp"
#include "kiln/jit/pipeline/ir.hpp"
#include "kiln/kiln.hpp"

#include <tuple>

namespace lowering_test {

// The IR of several outputs, each computing one of `exprs` (as run_pass lowers them).
template <class... E>
kiln::jit::kernel_ir ir_of(bool strided, int rank, bool wide, const E&... exprs) {
  kiln::jit::leaf_table lt;
  kiln::jit::collect(lt, exprs...);
  return kiln::jit::lower(lt.pattern, strided, rank, wide, exprs...);
}
template <class Tuple>
kiln::jit::kernel_ir ir_of_tuple(bool strided, int rank, bool wide, const Tuple& t) {
  return std::apply([&](const auto&... e) { return ir_of(strided, rank, wide, e...); }, t);
}

// A reduction as the executor specializes it for values of dtype v: its definition and its
// result dtype.
struct reduction_case {
  const kiln::reduction_info* info;
  kiln::dtype (*result)(kiln::dtype value);
};
template <class R, class T>
constexpr kiln::dtype result_dtype = kiln::dtype_of<typename R::template result<T>>();
template <class R>
kiln::dtype result_of(kiln::dtype v) {
  switch (v) {
  case kiln::dtype::f32:
    return result_dtype<R, float>;
  case kiln::dtype::f64:
    return result_dtype<R, double>;
  case kiln::dtype::f16:
    return result_dtype<R, kiln::half>;
  case kiln::dtype::i32:
    return result_dtype<R, std::int32_t>;
  case kiln::dtype::i64:
    return result_dtype<R, std::int64_t>;
  case kiln::dtype::b8:
    return result_dtype<R, bool>;
  default:
    throw kiln::error("test", "no value type for this dtype", std::string(kiln::name(v)));
  }
}
template <class R>
reduction_case case_of() {
  return {&kiln::reduction_info_of<R>, &result_of<R>};
}

} // namespace lowering_test
