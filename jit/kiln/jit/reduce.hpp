#pragma once
// Reductions on a GPU device (kernel templates in kernels/kiln/kernels/).
#include "kiln/jit/evaluate.hpp"
#include "kiln/reduce.hpp"

namespace kiln::detail {

template <class R, class E>
void device_reduce(const tensor<typename R::template result<value_t<E>>>& out, const E&,
                   const std::array<bool, max_rank>&) {
  throw error(R::name, "reductions do not run on this device yet", "device " + out.device().str());
}

} // namespace kiln::detail
