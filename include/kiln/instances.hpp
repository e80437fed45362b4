#pragma once
// Where the core is compiled once (KILN_COMPILED_CORE, kiln/linkage.hpp), so are the
// dtype-only templates every program uses: tensor<T>'s members and the creation of a
// tensor from data, for each element type, and the host and device loops of the common
// reductions of a tensor (`sum(t)`, `max(t, 1)`: about 0.7 s of a file's compile, measured
// in bench/build_time/kiln_one.cpp). A file that includes kiln then compiles its own
// expressions, not those again. kiln/instances_impl.hpp instantiates them.
#include "kiln/creation.hpp"
#include "kiln/reduce.hpp"
#include "kiln/tensor.hpp"

#include <cstdint>
#include <span>

// X(T) for each element type.
// clang-format off
#define KILN_FOR_EACH_ELEMENT(X)                                                               \
  X(bool) X(std::uint8_t) X(std::int32_t) X(std::uint32_t) X(std::int64_t) X(kiln::half)     \
  X(kiln::bfloat16) X(float) X(double)
// clang-format on

// `extern` (a declaration) or nothing (the definition) for one element type.
#define KILN_INSTANCES(EXTERN, T)                                                                  \
  EXTERN template class kiln::tensor<T>;                                                           \
  EXTERN template kiln::tensor<T> kiln::from<T>(std::span<const T>, const kiln::shape&,            \
                                                const kiln::device&);                              \
  EXTERN template kiln::tensor<T> kiln::detail::moved<T>(const kiln::tensor<T>&,                   \
                                                         const kiln::device&, const char*);        \
  EXTERN template void kiln::detail::assign<T, kiln::tensor<T>>(const kiln::tensor<T>&,            \
                                                                const kiln::tensor<T>&);

// The host loop, the device hand-over and the plan's recording of reduction R of a tensor<T>.
#define KILN_REDUCTION_INSTANCES(EXTERN, R, T)                                                     \
  EXTERN template void kiln::detail::run_reduction<R, kiln::tensor<T>>(                            \
      const kiln::tensor<R::result<T>>&, const kiln::tensor<T>&,                                   \
      const std::array<bool, kiln::max_rank>&, std::span<const double>);                           \
  EXTERN template void kiln::detail::device_reduce<R, kiln::tensor<T>>(                            \
      const kiln::tensor<R::result<T>>&, const kiln::tensor<T>&,                                   \
      const std::array<bool, kiln::max_rank>&, std::span<const double>);                           \
  EXTERN template void kiln::detail::record_reduction<R, kiln::tensor<T>>(                         \
      const kiln::tensor<R::result<T>>&, const kiln::tensor<T>&,                                   \
      const std::array<bool, kiln::max_rank>&, std::span<const double>);
// X(R, T) for the reductions and element types instantiated once: the floating types, and
// the reductions most programs call.
// clang-format off
#define KILN_FOR_EACH_COMMON_REDUCTION(X, EXTERN)                                                \
  X(EXTERN, kiln::reductions::sum, float) X(EXTERN, kiln::reductions::sum, double)                \
  X(EXTERN, kiln::reductions::mean, float) X(EXTERN, kiln::reductions::mean, double)              \
  X(EXTERN, kiln::reductions::max, float) X(EXTERN, kiln::reductions::max, double)                \
  X(EXTERN, kiln::reductions::min, float) X(EXTERN, kiln::reductions::min, double)
// clang-format on

#ifdef KILN_COMPILED_CORE
KILN_FOR_EACH_COMMON_REDUCTION(KILN_REDUCTION_INSTANCES, extern)
#define KILN_EXTERN_INSTANCES(T) KILN_INSTANCES(extern, T)
KILN_FOR_EACH_ELEMENT(KILN_EXTERN_INSTANCES)
#undef KILN_EXTERN_INSTANCES
#endif
