#pragma once
// The instances declared in kiln/instances.hpp, compiled once with the core.
#include "kiln/instances.hpp"

#ifdef KILN_COMPILED_CORE
template class kiln::small_dims<std::int64_t>;
#define KILN_DEFINE_INSTANCES(T) KILN_INSTANCES(, T)
KILN_FOR_EACH_ELEMENT(KILN_DEFINE_INSTANCES)
#undef KILN_DEFINE_INSTANCES
KILN_FOR_EACH_COMMON_REDUCTION(KILN_REDUCTION_INSTANCES, )
#endif
