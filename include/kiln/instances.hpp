#pragma once
// Where the core is compiled once (KILN_COMPILED_CORE, kiln/linkage.hpp), so are the
// dtype-only templates every program uses: tensor<T>'s members and the creation of a
// tensor from data, for each element type. A file that includes kiln then compiles its own
// expressions, not those again. kiln/instances_impl.hpp instantiates them.
#include "kiln/creation.hpp"
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

#ifdef KILN_COMPILED_CORE
#define KILN_EXTERN_INSTANCES(T) KILN_INSTANCES(extern, T)
KILN_FOR_EACH_ELEMENT(KILN_EXTERN_INSTANCES)
#undef KILN_EXTERN_INSTANCES
#endif
